"""The exact hierarchical weighted max-min over a tree of weights: the reference the tree step is measured against.

Pure policy: numbers in, numbers out, no I/O. It extends exact_max_min.py (the flat reference, which
a tree of one level reproduces) from users to a tree (weight_tree.py), level by level, and is as
slow: a bisection of max-flows per level and per freezing round, in Python (0.1-0.6 s for a tree of
50 users x 20 resources, depth 1-3, here; the cost grows with users x resources x levels).

The definition. Users u want d[u, r] bytes/s of resources r (capacity C[r]); an allocation x[u, r]
is feasible when 0 <= x[u, r] <= min(d[u, r], the user's ceiling), every group's users together
take at most the group's ceiling on every resource, every resource gives at most C[r], and every
user gets at least its floor (weight_tree.pair_bounds: users' and groups' floors, split down the
tree by weight on each resource, granted first and counted in the totals). T_v(x) is node v's total
over the cluster: the sum of x over its users and all resources.

- Level 1: the totals of the root's children are weighted max-min fair by their weights w among all
  feasible allocations (progressive filling: a common level t rises, every child not yet frozen
  is given w * t in total wherever its users have demand, a max-flow decides where; a child is
  frozen when its users cannot take more without taking from another's total). This is
  exact_max_min.weighted_max_min with the root's children as its users; it is unique (the set of
  the children's feasible totals is a polymatroid: Fujishige 1980).
- Level k > 1: among the feasible allocations that give every node above level k its total T*
  (the levels above fixed them), the totals of the nodes at level k are max-min fair in the level
  T_c / e_c, with e_c = w_c * L_p: L_p is c's parent's water level, the level at which its total
  T*_p, split among its children by weight each up to the most it could take, is all given
  (weight_tree.water_level), so e_c is what c is due of its parent's total. Within one parent that
  is plain weighted max-min by w (siblings share what their parent gets by weight; a child that takes
  less, because its demand is met or its users' resources are full, leaves the rest to its siblings,
  and only what none of them can take goes up the tree, as it was at the level above). Across
  parents, no group's children come first: each child's level is the fraction of its due that it
  got. A user above level k keeps its total.
The allocation is the one at the deepest level: users' totals fixed, spread as a max-flow finds.

That definition also chooses where each parent's total sits over the resources (the split that
makes children fairest across parents at exactly their parents' totals), and its answer for a user
can move by up to 8x when the parents' totals move by 1e-6 (docs/tree-of-weights.md). The definition
the tree step is held to fixes each node's total given its parent's bytes, resource by resource, and
within_parents computes it exactly: the root's children's totals are the weighted max-min of the
cluster (the same as level 1 above), and every group's children's totals are the weighted max-min of
what the group holds on each resource in a given allocation (exact_max_min.weighted_max_min with the
group's bytes as the capacities, each child taking at most what its subtree can take there). Unique,
and continuous in the group's bytes (the children's feasible totals form a polymatroid).

Each level is one progressive filling in a flow network: source -> every node of the level (its
total as the level rises) and -> every parent's slack (what of its fixed total its children have
not been given yet) -> the users under them -> (user, resource), capped at the pair's ceiling ->
the chain of the user's groups with a ceiling, on that resource -> the resource -> sink. A child can
grow while some residual path takes bytes from its own parent's slack, not from another's total.
"""

import math
from dataclasses import dataclass

import numpy as np

from vnode_sync.coordinator.policy.exact_max_min import weighted_max_min
from vnode_sync.coordinator.policy.flow_network import FlowNetwork
from vnode_sync.coordinator.policy.weight_tree import TreeArrays, node_ceilings, pair_bounds, water_level
from vnode_sync.errors import InvalidArgument

_BISECTIONS = 60


@dataclass(frozen=True)
class HierarchicalShares:
    allocation: np.ndarray   # users x resources, bytes/s
    totals: np.ndarray       # per tree node (TreeArrays order): its total over the cluster

    def user_totals(self) -> np.ndarray:
        return self.allocation.sum(axis=1)


def hierarchical_max_min(capacity: np.ndarray, tree: TreeArrays, demand: np.ndarray,
                         lower_level_one: float = 0.0) -> HierarchicalShares:
    """The exact hierarchical weighted max-min allocation (module docstring) for `demand[u, r]` bytes/s
    (inf: takes all it gets), users in the tree's rows, `capacity[r]` bytes/s. `lower_level_one`: the
    levels below the first are filled from the root's children's totals lowered by this fraction
    (still feasible), to measure how much the users' answer hangs on them (benchmarks/tree_step.py)."""
    capacity = np.asarray(capacity, dtype=np.float64)
    demand = np.asarray(demand, dtype=np.float64)
    if demand.shape != (len(tree.leaf), len(capacity)):
        raise InvalidArgument(f"shapes: demand {demand.shape} must be the tree's {len(tree.leaf)} users x "
                              f"{len(capacity)} resources")
    if np.isnan(demand).any() or (demand < 0).any() or not (np.isfinite(capacity) & (capacity >= 0)).all():
        raise InvalidArgument("demand must be >= 0 (inf allowed) and capacity finite and >= 0")
    ceiling, floor = pair_bounds(tree, capacity, demand)
    problem = _Problem(tree, capacity, ceiling, floor)
    totals = np.full(tree.nodes, np.nan)
    graph = None
    for level in range(1, tree.height + 1):
        graph = problem.fill_level(level, totals)
        if level == 1 and lower_level_one:
            top = tree.frontier(1)
            totals[top] = problem.offset[top] + (totals[top] - problem.offset[top]) * (1 - lower_level_one)
    allocation = floor.copy()
    if graph is not None:
        for (u, r), e in graph.pair_edge.items():
            allocation[u, r] += graph.flow(e)
    return HierarchicalShares(allocation, totals)


def within_parents(capacity: np.ndarray, tree: TreeArrays, demand: np.ndarray, allocation: np.ndarray) -> np.ndarray:
    """Per tree node (TreeArrays order): its exact total by the definition level by level (module
    docstring), given what its parent holds on each resource in `allocation` (users x resources, e.g. a
    step's): the weighted max-min among its siblings of their parent's bytes (the cluster's capacities
    for the root's children). Floors (pair_bounds) are granted first, as in the step."""
    capacity = np.asarray(capacity, dtype=np.float64)
    allocation = np.asarray(allocation, dtype=np.float64)
    if allocation.shape != (len(tree.leaf), len(capacity)):
        raise InvalidArgument(f"shapes: allocation {allocation.shape} must be the tree's {len(tree.leaf)} users x "
                              f"{len(capacity)} resources")
    _, floor = pair_bounds(tree, capacity, demand)
    reach = node_ceilings(tree, capacity, demand)
    held = tree.subtree_sum(allocation, np.arange(tree.nodes))
    floors = tree.subtree_sum(floor, np.arange(tree.nodes))
    totals = np.zeros(tree.nodes)
    for parent in (-1, *np.flatnonzero(tree.row < 0).tolist()):
        kids = tree.children(parent)
        if not len(kids):
            continue
        room = np.maximum((capacity if parent < 0 else held[parent]) - floors[kids].sum(axis=0), 0.0)
        extra = np.maximum(reach[kids] - floors[kids], 0.0)
        caps = {(str(c), str(r)): float(extra[i, r]) for i, c in enumerate(kids)
                for r in np.flatnonzero((extra[i] > 0) & (room > 0))}
        offset = {str(c): float(floors[c].sum()) for c in kids}
        given = weighted_max_min({str(r): float(v) for r, v in enumerate(room)},
                                 {str(c): float(tree.weight[c]) for c in kids}, caps, offset)
        totals[kids] = floors[kids].sum(axis=1)
        for (c, _), v in given.items():
            totals[int(c)] += v
    return totals


class _Problem:
    """The bounds that stay the same at every level: floors taken off, what is left above them."""

    def __init__(self, tree: TreeArrays, capacity: np.ndarray, ceiling: np.ndarray, floor: np.ndarray):
        self.tree, self.capacity = tree, capacity
        self.extra = np.maximum(ceiling - floor, 0.0)                  # what each pair may take above its floor
        self.room = np.maximum(capacity - floor.sum(axis=0), 0.0)
        self.offset = np.array([floor[tree.members[n]].sum() for n in range(tree.nodes)])
        # Above its floors, a group with a ceiling may take at most this on each resource.
        self.group_room = {int(g): np.maximum(tree.ceiling[g] - floor[tree.members[g]].sum(axis=0), 0.0)
                           for g in np.flatnonzero((tree.row < 0) & np.isfinite(tree.ceiling))}
        self.reach = np.array([np.minimum(self.extra[tree.members[n]].sum(axis=0), self.room).sum()
                               for n in range(tree.nodes)])
        scale = max(float(capacity.max(initial=0.0)), 1.0)
        self.tol = scale * 1e-9           # feasibility: what a max-flow may leave unrouted
        self.slack = scale * 1e-7         # room that lets a node grow

    def fill_level(self, level: int, totals: np.ndarray) -> "_LevelFlow":
        """Progressive filling of the nodes at `level`; their totals (and those of users above it) into
        `totals`. Returns the network, holding the flow of the last fill."""
        tree = self.tree
        frontier = tree.frontier(level)
        rising = [int(c) for c in frontier if tree.depth[c] == level]
        parents = sorted({int(tree.parent[c]) for c in rising if tree.parent[c] >= 0})
        share = self._shares(rising, totals)
        graph = _LevelFlow(self, [int(c) for c in frontier], parents)
        frozen: dict[int, float] = {int(c): totals[c] - self.offset[c] for c in frontier if tree.depth[c] < level}
        for c in rising:
            if self.reach[c] <= self.slack:
                frozen[c] = 0.0
        slack_of = {p: totals[p] - self.offset[p] for p in parents}
        kids = {p: [int(c) for c in tree.children(p)] for p in parents}

        def want_at(t: float) -> dict[int, float]:
            want = dict(frozen)
            for c in rising:
                if c not in frozen:
                    want[c] = min(self.reach[c], max(0.0, share[c] * t - self.offset[c]))
            return want

        def feasible(want: dict[int, float]) -> bool:
            left = {p: slack_of[p] - sum(want[c] for c in kids[p]) for p in parents}
            if any(v < -self.tol for v in left.values()):
                return False
            return graph.feasible(want, {p: max(0.0, v) for p, v in left.items()}, self.tol)

        t = 0.0
        asked: dict[int, float] = {}
        while len(frozen) < len(frontier):
            live = [c for c in rising if c not in frozen]
            top = max((self.offset[c] + self.reach[c]) / share[c] for c in live)
            if feasible(want_at(top)):
                t = top
            else:
                low, high = t, top
                for _ in range(_BISECTIONS):
                    mid = (low + high) / 2
                    if feasible(want_at(mid)):
                        low = mid
                    else:
                        high = mid
                    if high - low <= 1e-12 * max(1.0, high):
                        break
                t = low
            want = want_at(t)
            feasible(want)
            growable = graph.growable(level == 1, self.slack)
            newly = [c for c in live if want[c] >= self.reach[c] - self.slack or c not in growable]
            if not newly:     # numerically stuck: freeze the rest where they are
                newly = live
            routed = graph.routed()
            for c in list(frozen):
                if c in rising:
                    frozen[c] = min(frozen[c], routed[c])
            for c in newly:
                frozen[c], asked[c] = min(want[c], routed[c]), want[c]
            for p in parents:
                # Children frozen a crumb above their parent's total (each within the flows' tolerance)
                # would leave the parent's slack below 0 and every later round infeasible.
                given = sum(frozen.get(c, 0.0) for c in kids[p])
                if all(c in frozen for c in kids[p]) and given > slack_of[p] > 0:
                    for c in kids[p]:
                        frozen[c] *= slack_of[p] / given
                        asked[c] = min(asked.get(c, frozen[c]), frozen[c])
        final = {c: (asked[c] if c in asked else v) for c, v in frozen.items()}
        left = {p: max(0.0, slack_of[p] - sum(final[c] for c in kids[p])) for p in parents}
        graph.feasible(final, left, self.tol)
        # What the flow carries, not what was asked: the next level routes these totals again, and asked
        # ones a crumb above what fits would make every level below them infeasible.
        for c, carried in graph.routed().items():
            totals[c] = self.offset[c] + carried
        return graph

    def _shares(self, rising: list[int], totals: np.ndarray) -> dict[int, float]:
        """e_c: at level 1 the weight; below, w_c times its parent's water level (module docstring).
        Never 0: the children of a parent given nothing rise at a crumb, and are frozen at once."""
        tree = self.tree
        share: dict[int, float] = {}
        for c in rising:
            if tree.parent[c] < 0:
                share[c] = float(tree.weight[c])
        for p in sorted({int(tree.parent[c]) for c in rising if tree.parent[c] >= 0}):
            kids = tree.children(p)
            level = water_level(float(totals[p]), tree.weight[kids], self.offset[kids] + self.reach[kids])
            if not math.isfinite(level):    # all its children can take is less than its total: they take it all
                level = float(totals[p]) / float(tree.weight[kids].sum())
            for c in kids:
                share[int(c)] = max(float(tree.weight[c]) * level, 1e-9 * float(tree.weight[c]))
        return share


class _LevelFlow(FlowNetwork):
    """One level's network (module docstring)."""

    def __init__(self, problem: _Problem, frontier: list[int], parents: list[int]):
        super().__init__()
        tree = problem.tree
        users, resources = problem.extra.shape
        resource_node = [self.node() for _ in range(resources)]
        for r in range(resources):
            self.edge(resource_node[r], self.SINK, float(problem.room[r]))
        user_node = [self.node() for _ in range(users)]
        chain: dict[tuple[int, int], int] = {}

        def gate(group: int, r: int) -> int:
            """The node every byte of `group`'s users to resource r passes (its ceiling there)."""
            if (group, r) not in chain:
                chain[(group, r)] = self.node()
                self.edge(chain[(group, r)], above(int(tree.parent[group]), r), float(problem.group_room[group][r]))
            return chain[(group, r)]

        def above(node: int, r: int) -> int:
            while node >= 0 and node not in problem.group_room:
                node = int(tree.parent[node])
            return resource_node[r] if node < 0 else gate(node, r)

        self.pair_edge: dict[tuple[int, int], int] = {}
        for u in range(users):
            for r in np.flatnonzero(problem.extra[u] > 0):
                r = int(r)
                self.pair_edge[(u, r)] = self.edge(user_node[u], above(int(tree.parent[tree.leaf[u]]), r),
                                                   float(problem.extra[u, r]))
        self.source_edge: dict[int, int] = {}
        for c in frontier:
            entry = self.node()
            self.source_edge[c] = self.edge(self.SOURCE, entry, 0.0)
            for u in tree.members[c]:
                self.edge(entry, user_node[u], math.inf)
        self.slack_edge: dict[int, int] = {}
        self.slack_node: dict[int, int] = {}
        for p in parents:
            self.slack_node[p] = self.node()
            self.slack_edge[p] = self.edge(self.SOURCE, self.slack_node[p], 0.0)
            for u in tree.members[p]:
                self.edge(self.slack_node[p], user_node[u], math.inf)
        self.parent = tree.parent
        self.entry = {c: self.to[e] for c, e in self.source_edge.items()}

    def feasible(self, want: dict[int, float], slack: dict[int, float], tol: float) -> bool:
        """Can every node get `want`, and every parent's slack be placed, at once? Leaves that flow."""
        for c, e in self.source_edge.items():
            self.base[e] = max(0.0, want.get(c, 0.0))
        for p, e in self.slack_edge.items():
            self.base[e] = slack.get(p, 0.0)
        asked = sum(self.base[e] for e in (*self.source_edge.values(), *self.slack_edge.values()))
        return self.max_flow(tol / 1000) >= asked - tol

    def growable(self, to_sink: bool, tol: float) -> set[int]:
        """The nodes that could take more: at level 1 from free room (a residual path to the sink);
        below, from their own parent's slack (a residual path back into its slack node)."""
        if to_sink:
            reached = self.reaching(self.SINK, tol)
            return {c for c, n in self.entry.items() if n in reached}
        out: set[int] = set()
        for p, node in self.slack_node.items():
            reached = self.reaching(node, tol)
            out.update(c for c, n in self.entry.items() if self.parent[c] == p and n in reached)
        return out

    def routed(self) -> dict[int, float]:
        return {c: self.flow(e) for c, e in self.source_edge.items()}
