"""A max-flow network with real capacities (Dinic's algorithm): what the exact solvers test feasibility with.

Node 0 is the source and node 1 the sink; others are added as needed. Edges are kept in pairs (an
edge at an even index, its reverse at the next), so `e ^ 1` is an edge's reverse. `base` holds the
capacities the next max-flow starts from, `cap` the residual capacities the last one left.
"""

import math


class FlowNetwork:
    """A directed graph of capacities, and the max-flow the last `max_flow` left in it."""

    SOURCE, SINK = 0, 1

    def __init__(self, nodes: int = 2):
        self.adj: list[list[int]] = [[] for _ in range(nodes)]
        self.to: list[int] = []
        self.cap: list[float] = []
        self.base: list[float] = []

    def node(self) -> int:
        """A new node's index."""
        self.adj.append([])
        return len(self.adj) - 1

    def edge(self, a: int, b: int, c: float) -> int:
        """An edge a -> b of capacity c; its index (for `base` and `flow`)."""
        self.adj[a].append(len(self.to))
        self.to.append(b)
        self.cap.append(c)
        self.base.append(c)
        self.adj[b].append(len(self.to))
        self.to.append(a)
        self.cap.append(0.0)
        self.base.append(0.0)
        return len(self.to) - 2

    def flow(self, e: int) -> float:
        return self.base[e] - self.cap[e]

    def max_flow(self, eps: float) -> float:
        """The max-flow from the `base` capacities (pushes of `eps` or less are left); the residual in `cap`."""
        self.cap = list(self.base)
        total = 0.0
        while True:
            depth = self._levels(eps)
            if depth[self.SINK] < 0:
                return total
            cursor = [0] * len(self.adj)
            while True:
                pushed = self._push(self.SOURCE, math.inf, depth, cursor, eps)
                if pushed <= eps:
                    break
                total += pushed

    def _levels(self, eps: float) -> list[int]:
        depth = [-1] * len(self.adj)
        depth[self.SOURCE] = 0
        queue = [self.SOURCE]
        for v in queue:
            for e in self.adj[v]:
                if self.cap[e] > eps and depth[self.to[e]] < 0:
                    depth[self.to[e]] = depth[v] + 1
                    queue.append(self.to[e])
        return depth

    def _push(self, v: int, limit: float, depth: list[int], cursor: list[int], eps: float) -> float:
        if v == self.SINK:
            return limit
        while cursor[v] < len(self.adj[v]):
            e = self.adj[v][cursor[v]]
            w = self.to[e]
            if self.cap[e] > eps and depth[w] == depth[v] + 1:
                pushed = self._push(w, min(limit, self.cap[e]), depth, cursor, eps)
                if pushed > eps:
                    self.cap[e] -= pushed
                    self.cap[e ^ 1] += pushed
                    return pushed
            cursor[v] += 1
        return 0.0

    def reaching(self, target: int, tol: float) -> set[int]:
        """The nodes with a residual path (of more than `tol` on every edge) to `target`, not through
        the source: each could send more to `target` without taking from what the source sends."""
        reached = {target}
        queue = [target]
        for v in queue:
            for e in self.adj[v]:
                u = self.to[e]
                if u != self.SOURCE and u not in reached and self.cap[e ^ 1] > tol:   # the edge u -> v
                    reached.add(u)
                    queue.append(u)
        return reached
