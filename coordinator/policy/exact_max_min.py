"""The exact cluster-wide weighted max-min fair shares, with reservations and limits: the reference.

Pure policy: numbers in, numbers out, no I/O (docs/fair-shares.md explains it and its sources).
It solves by bisection of max-flows in Python, so it is exact and slow (seconds at a few hundred
users x resources): the fast weight step (local_weights.py) is measured against it
(benchmarks/weight_step_fairness.py), and the control loop uses it only at small sizes.

Each user i has a weight w_i (its priority), and on each storage node n a demand d_in
(bytes/s; math.inf = it takes whatever it is given), a reservation (a floor on every node
where it has demand) and a limit (a ceiling on every node). Each node has a capacity C_n.

The allocation is the weighted max-min fair one of the users' *totals* over the cluster, by
progressive filling: a common level t rises; every user not yet frozen is given w_i * t in
total, spread over the nodes where it has demand however the nodes' capacities allow (a
max-flow decides where); a user is frozen when it cannot grow any more (its demands or limits
are met, or every node it could use is full, even after moving other users' bytes to other
nodes). Floors (reservations, and the small probe an active user keeps on every node) are
granted first and count towards the user's total.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass

from vnode_sync.coordinator.policy.flow_network import FlowNetwork
from vnode_sync.errors import InvalidArgument

Pair = tuple[str, str]   # (user, node)

_BISECTIONS = 60
# All idle users' probes on a node take at most this fraction of it together.
IDLE_PROBES = 0.1
_BALANCE_ROUNDS = 300


@dataclass(frozen=True)
class Claim:
    """What one user is entitled to, set by the admin."""

    weight: float
    reservation: float = 0.0      # bytes/s floor on each node where the user has demand
    limit: float = math.inf       # bytes/s ceiling on each node


def allocate(capacity: Mapping[str, float], claims: Mapping[str, Claim],
             demand: Mapping[Pair, float], probe: float = 0.0) -> dict[Pair, float]:
    """Each (user, node) pair listed in `demand` gets its bytes/s.

    `probe`: the fraction of a node's capacity every listed pair keeps at least, even with no
    demand (so a user that comes back is seen, and a stream on a node the max-min leaves empty
    still moves), but never more than the pair's Algorithm 1 share (its weight's part of the node
    among the users listed there), and the probes of pairs without demand take at most
    IDLE_PROBES of a node together. A probe the user does not use is not counted in its total.
    Without a probe, pairs with no demand get nothing."""
    listed = {p: max(0.0, want) for p, want in demand.items()
              if p[0] in claims and p[1] in capacity and (want > 0 or probe > 0)}
    weight_at: dict[str, float] = {}
    for user, node in listed:
        if claims[user].weight <= 0:
            raise InvalidArgument(f"user {user}: weight must be above 0, got {claims[user].weight}")
        weight_at[node] = weight_at.get(node, 0.0) + claims[user].weight
    ceilings: dict[Pair, float] = {}
    floors: dict[Pair, float] = {}
    for (user, node), want in listed.items():
        claim = claims[user]
        ceilings[(user, node)] = min(claim.limit, capacity[node])
        keep = min(probe, claim.weight / weight_at[node]) * capacity[node]
        floors[(user, node)] = min(ceilings[(user, node)], max(min(claim.reservation, want), keep))
    floors = _fit_floors(capacity, _fit_idle_probes(capacity, floors, listed))
    pairs = {p: max(f, min(listed[p], ceilings[p])) for p, f in floors.items()}
    extra_caps = {p: pairs[p] - floors[p] for p in pairs}
    room = {n: capacity[n] - sum(f for (_, node), f in floors.items() if node == n) for n in capacity}
    fixed: dict[str, float] = {}
    for (user, node), f in floors.items():
        fixed[user] = fixed.get(user, 0.0) + min(f, listed[(user, node)])
    extra = weighted_max_min(room, {u: claims[u].weight for u in fixed}, extra_caps, fixed)
    return {p: floors[p] + extra.get(p, 0.0) for p in pairs}


def _fit_idle_probes(capacity: Mapping[str, float], floors: dict[Pair, float],
                     want: Mapping[Pair, float]) -> dict[Pair, float]:
    """The probes of pairs without demand, scaled down alike where they take more than IDLE_PROBES of
    a node: many idle users must not hold back what the busy ones could use."""
    idle: dict[str, float] = {}
    for (user, node), f in floors.items():
        if want[(user, node)] <= 0:
            idle[node] = idle.get(node, 0.0) + f
    scale = {n: min(1.0, IDLE_PROBES * capacity[n] / total) for n, total in idle.items() if total > 0}
    return {p: f * scale[p[1]] if want[p] <= 0 and p[1] in scale else f for p, f in floors.items()}


def _fit_floors(capacity: Mapping[str, float], floors: dict[Pair, float]) -> dict[Pair, float]:
    """Floors on a node that add up to more than it has are scaled down alike (admission should
    have prevented it; a node reconfigured smaller must not make the allocation infeasible)."""
    per_node: dict[str, float] = {}
    for (_, node), f in floors.items():
        per_node[node] = per_node.get(node, 0.0) + f
    return {p: f * min(1.0, capacity[p[1]] / per_node[p[1]]) if per_node[p[1]] else f for p, f in floors.items()}


def weighted_max_min(capacity: Mapping[str, float], weights: Mapping[str, float],
                     caps: Mapping[Pair, float], offset: Mapping[str, float] | None = None) -> dict[Pair, float]:
    """Progressive filling of the users' totals: user i's total is offset_i + its flow, and the
    flow grows until offset_i + flow_i = w_i * t for a common t, or the user is frozen."""
    offset = offset or {}
    users = sorted({u for u, _ in caps})
    nodes = sorted({n for _, n in caps})
    if not users:
        return {}
    graph = _FlowGraph(users, nodes, capacity, caps)
    scale = max([capacity[n] for n in nodes] + [1.0])
    tol = scale * 1e-9                   # feasibility: what a max-flow may leave unrouted
    slack = scale * 1e-7                 # room that lets a user grow (well above the flows' rounding)
    frozen: dict[str, float] = {}        # user -> its flow, fixed
    asked: dict[str, float] = {}         # user -> what it asked for when it was frozen
    reach = {u: sum(c for (user, _), c in caps.items() if user == u) for u in users}  # most it could take
    level = 0.0
    while len(frozen) < len(users):
        live = [u for u in users if u not in frozen]

        def demand_at(t: float) -> dict[str, float]:
            want = dict(frozen)
            for u in live:
                want[u] = min(reach[u], max(0.0, weights[u] * t - offset.get(u, 0.0)))
            return want

        top = max((offset.get(u, 0.0) + reach[u]) / weights[u] for u in live)
        if graph.feasible(demand_at(top), tol):
            level = top
        else:
            low, high = level, top
            for _ in range(_BISECTIONS):
                mid = (low + high) / 2
                if graph.feasible(demand_at(mid), tol):
                    low = mid
                else:
                    high = mid
                if high - low <= 1e-12 * max(1.0, high):
                    break
            level = low
        want = demand_at(level)
        graph.feasible(want, tol)
        growable = graph.can_grow(slack)
        newly = [u for u in live if want[u] >= reach[u] - slack or u not in growable]
        if not newly:   # numerically stuck: freeze the rest where they are
            newly = live
        # Frozen users are held to what the flow carries, not to what they asked: each round's wants are
        # feasible only within the tolerance, and a shortfall left on a frozen user would carry into every
        # later round and, added to theirs, stop the level early (leaving bytes unused that others want).
        routed = graph.routed()
        for u in frozen:
            frozen[u] = min(frozen[u], routed[u])
        for u in newly:
            frozen[u], asked[u] = min(want[u], routed[u]), want[u]
    graph.feasible(asked, tol)
    # What they asked where the flow carries it within the tolerance: a limit of 1 MB/s gives 1 MB/s.
    totals = {u: asked[u] if carried >= asked[u] - slack else carried for u, carried in graph.routed().items()}
    return _balanced(capacity, caps, totals, tol) or graph.flows()


def _balanced(capacity: Mapping[str, float], caps: Mapping[Pair, float], totals: Mapping[str, float],
              tol: float) -> dict[Pair, float] | None:
    """The same totals, spread over each user's nodes as evenly as capacities allow.

    Any split a max-flow returns is max-min fair in totals, but it may put a user's whole total on
    one node and starve its stream on another. Alternating scaling (users' rows to their totals,
    over-full nodes down to capacity) from an even start finds an even split; None if it does not
    settle, and the max-flow's split is used."""
    split = {p: min(c, 1.0) for p, c in caps.items() if c > 0 and totals.get(p[0], 0.0) > 0}
    rows: dict[str, list[Pair]] = {}
    cols: dict[str, list[Pair]] = {}
    for p in split:
        rows.setdefault(p[0], []).append(p)
        cols.setdefault(p[1], []).append(p)
    for _ in range(_BALANCE_ROUNDS):
        for user, pairs in rows.items():
            _fill_row(split, pairs, caps, totals[user])
        worst = 0.0
        for node, pairs in cols.items():
            used = sum(split[p] for p in pairs)
            if used > capacity[node]:
                worst = max(worst, used - capacity[node])
                for p in pairs:
                    split[p] *= capacity[node] / used
        if worst <= tol:
            for user, pairs in rows.items():
                _fill_row(split, pairs, caps, totals[user])
            if all(sum(split[p] for p in pairs) <= capacity[n] + tol for n, pairs in cols.items()):
                return {p: v for p, v in split.items() if v > 0}
    return None


def _fill_row(split: dict[Pair, float], pairs: list[Pair], caps: Mapping[Pair, float], total: float) -> None:
    """Scale one user's pairs to `total`, none above its cap (water-filling over the scale factor)."""
    base = {p: max(split[p], 1e-12) for p in pairs}
    left, free = total, list(pairs)
    while free:
        scale = left / sum(base[p] for p in free)
        over = [p for p in free if base[p] * scale > caps[p]]
        if not over:
            for p in free:
                split[p] = base[p] * scale
            return
        for p in over:
            split[p] = caps[p]
            left -= caps[p]
            free.remove(p)


class _FlowGraph(FlowNetwork):
    """source -> user (its total) -> node (pair cap) -> sink (node capacity)."""

    def __init__(self, users: list[str], nodes: list[str], capacity: Mapping[str, float],
                 caps: Mapping[Pair, float]):
        super().__init__(2 + len(users) + len(nodes))
        self.users, self.nodes = users, nodes
        self.index = {("u", u): i + 2 for i, u in enumerate(users)}
        self.index.update({("n", n): i + 2 + len(users) for i, n in enumerate(nodes)})
        self.source_edge = {u: self.edge(self.SOURCE, self.index[("u", u)], 0.0) for u in users}
        self.pair_edge = {p: self.edge(self.index[("u", p[0])], self.index[("n", p[1])], c)
                          for p, c in sorted(caps.items())}
        for n in nodes:
            self.edge(self.index[("n", n)], self.SINK, max(0.0, capacity[n]))

    def feasible(self, want: Mapping[str, float], tol: float) -> bool:
        """Can every user get `want[user]` at once? Leaves that flow in the graph."""
        for u, e in self.source_edge.items():
            self.base[e] = max(0.0, want.get(u, 0.0))
        flow = self.max_flow(tol / 1000)   # crumbs it leaves must stay far below the tolerance
        return flow >= sum(self.base[e] for e in self.source_edge.values()) - tol

    def can_grow(self, tol: float) -> set[str]:
        """Users with a path to the sink in the residual graph (not through the source): they could
        take more without taking any bytes from another user's total."""
        reached = self.reaching(self.SINK, tol)
        return {u for u in self.users if self.index[("u", u)] in reached}

    def routed(self) -> dict[str, float]:
        """Each user's flow in the graph as it stands."""
        return {u: self.flow(e) for u, e in self.source_edge.items()}

    def flows(self) -> dict[Pair, float]:
        return {p: self.flow(e) for p, e in self.pair_edge.items() if self.flow(e) > 0}
