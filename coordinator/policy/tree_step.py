"""The weight step for a tree of weights: users' global weights from the tree, level by level, on arrays.

What it computes is hierarchical max-min as docs/tree-of-weights.md defines it, level by level: the
root's children's totals are the weighted max-min of the whole cluster, and every group's children's
totals are the weighted max-min of what the group got, resource by resource (its bytes on each
resource, shared by its children's weights, what one cannot take going to its siblings).
hierarchical_max_min.within_parents is that definition computed exactly; the step computes it with
flat steps (local_weights.py), each exact within its tolerance, and so agrees with it by construction.
Every node's row wants, on each resource, what its subtree can take there (weight_tree.node_ceilings:
its users' demands and ceilings, every group ceiling on the way).

1. Level 1: one flat step whose rows are the root's children, by their weights, over the cluster.
2. Level k > 1. The definition fixes each parent's total but not where it sits: of the splits over
   resources that give a parent the same total, (a) and (b) choose one its children's needs lead to;
   (c) is the definition's step.
   a. Informed: every node of level k as a row over the whole cluster, at e_c = w_c * L_p, where L_p is
      its parent's water level (weight_tree.water_level: the parent's total split among its children
      by weight, each up to the most it could take), what the exact reference (hierarchical_max_min)
      measures a child against across parents; a user above level k at its own total. One flat step
      (more rounds, each parent's rows scaled by what its total should be over what they got, served
      the children no better: docs/tree-of-weights.md).
   b. Re-split: level k-1 again, each parent's children within what their own parent got (the
      cluster, at level 1), warm-started from (a)'s allocation summed per parent and not moved to the
      even split: the same totals (the definition's), the split (a) asked for where the resources
      allow it.
   c. Within: every parent's children share the parent's A[p, :] by their weights (one flat step per
      parent over the resources where it got bytes, warm-started from (a)); a user above level k keeps
      its row. Every parent's total, on every resource, is then exactly what it got above.
3. The edges' weights: the users' allocation as their local weights (their own fixed point: each
   resource water-filled by them gives it back) with today's standby weights, in one fill. A user's
   standby weight comes from its due (_dues: what it may take at once where it is idle or met, at
   least its total), not its total: the control loop's next demand is what the user moved under these
   weights, and a weight of ~0 for a user idle at the tick kept it at ~0 (docs/tree-of-weights.md, "The
   control loop's feedback"). None where it was held, nor under a group with a ceiling where it takes
   bytes.

A tree of one level is exactly today's flat step (the same call, the same arrays).

What it does not do: the exact reference of the first definition (hierarchical_max_min) also
chooses each parent's split over resources, the one that makes children fairest across parents at
exactly the parents' totals. (a) and (b) lean that way; they do not search for it (its answer moves by
up to 8x for a change of 1e-6 in the parents' totals: docs/tree-of-weights.md). Group floors are split
among children by weight on each resource alone (weight_tree.pair_bounds), granted first and counted
in the totals; a group ceiling bounds its row at every level, and the edges' fill holds its users to
what the levels gave them.

Cost, per level below the first: one flat step over that level's rows, one over the
level above (warm), one per parent over its children (warm); then one fill over the users.
"""

from dataclasses import dataclass

import numpy as np

from vnode_sync.coordinator.policy.column_shards import ColumnShards
from vnode_sync.coordinator.policy.local_weights import WeightStep, iteration_budget, local_weights
from vnode_sync.coordinator.policy.water_filling import TOLERANCE as WATER_TOLERANCE
from vnode_sync.coordinator.policy.weight_tree import TreeArrays, node_ceilings, pair_bounds, water_level
from vnode_sync.errors import InvalidArgument

# A warm-started flat step ends when no row's total moves by more than its tolerance in an iteration, and
# proportional response brings a row back onto a resource where its start gave it ~nothing by only a
# small factor per iteration (one of the tests' trees: 0.013 MB/s of a parent's 5.6 where the max-min
# gives it 1.8). A step that ends with a row holding bytes a row this much lower per weight wants is
# taken again from the cold start.
UNFAIR = 0.01


@dataclass(frozen=True)
class TreeStep:
    """The tree step's output."""

    step: WeightStep            # the users' flat step (rows = demand's rows): weights for the edges
    totals: np.ndarray          # per tree node (TreeArrays order): its total
    steps: int                  # flat steps taken

    @property
    def allocation(self) -> np.ndarray:
        return self.step.allocation

    def user_totals(self) -> np.ndarray:
        return self.step.totals()


def tree_weights(capacity: np.ndarray, tree: TreeArrays, demand: np.ndarray, previous: TreeStep | None = None,
                 dtype: type = np.float32, shards: ColumnShards | None = None,
                 held: np.ndarray | None = None) -> TreeStep:
    """One step of the center for a tree: `demand[u, r]` bytes/s (inf = takes all), users in the
    tree's rows; `capacity[r]` bytes/s. `previous`: the last step for the same users and resources,
    a warm start for a tree of one level (today's step); a deeper tree starts from its own levels.
    `held[u, r]`: the user waited there (local_weights: its demand is a lower bound); it keeps no
    standby weight there."""
    capacity = np.ascontiguousarray(capacity, dtype=np.float64)
    demand = np.asarray(demand)
    if demand.shape != (len(tree.leaf), len(capacity)):
        raise InvalidArgument(f"shapes: demand {demand.shape} must be the tree's {len(tree.leaf)} users x "
                              f"{len(capacity)} resources")
    if previous is not None and previous.step.weight.shape != demand.shape:
        raise InvalidArgument("previous: a step for other users or resources")
    shards = shards if shards is not None else ColumnShards(demand.shape)
    users = tree.leaf
    if tree.height == 1:   # today's step, unchanged
        step = local_weights(capacity, tree.weight[users], demand, tree.floor[users], tree.ceiling[users],
                             previous=None if previous is None else previous.step.weight, held=held,
                             previous_level=None if previous is None else previous.step.level,
                             dtype=dtype, shards=shards)
        return TreeStep(step, _node_totals(tree, step.totals()), 1)
    if np.isnan(demand).any() or (demand < 0).any():
        raise InvalidArgument("demand must be >= 0 (inf = takes all it gets), not NaN or negative")
    bounds = _Bounds(tree, capacity, demand)
    levels = _Levels(tree, capacity, bounds, dtype, shards)
    static = _static_shares(tree, float(capacity.sum()))
    levels.within(1, None)
    for level in range(2, tree.height + 1):
        informed = levels.informed(level, static)
        levels.within(level - 1, informed)     # the re-split
        levels.within(level, informed)
    allocation = bounds.in_rows(levels.given[tree.height])
    totals = allocation.sum(axis=1, dtype=np.float64)
    # The edges' fill: its local weights are the allocation (bytes/s: every resource's level is 1). Its global
    # weights only set the trace (TRACE * W, W <= 1: under a byte, so the fill gives the levels' allocation
    # back) and held users' ceilings. A user's standby weight (W[u] * min(1, C[r] / T[u]) in the flat step)
    # comes from its due, in bytes/s: what it may take at once where it was idle or met. Its total instead
    # (0 for a user idle at the tick) gave a user back from idle a weight of ~0: it moved ~nothing, so its
    # next demand (what it moved, grown) was ~nothing, and so was its next weight: a fixed point at zero.
    weight = np.maximum(totals, 1e-9 * max(float(capacity.max(initial=0.0)), 1.0))
    weight = weight / weight.max()
    due = _dues(tree, _node_totals(tree, totals), static)[users]
    ceiling = bounds.at_the_edges(allocation)
    standby = due
    if bounds.capped:
        # A weight edge knows no group ceiling: a user under one keeps, where it takes bytes, the weight the
        # levels gave it (with its due it would take its group past its ceiling); where idle, its due. Nor is
        # it held in the fill, which would raise its ceiling there to its weighted share of the resource.
        under = bounds.under_a_ceiling
        standby = np.repeat(due[:, None], len(capacity), axis=1)
        standby[under] = np.where(ceiling[under] > 0, 0.0, standby[under])
        if held is not None:
            held = held & ~under[:, None]
    reservation = bounds.in_rows(bounds.floor) if bounds.floor is not None else np.zeros(len(users))
    step = local_weights(capacity, weight, ceiling, reservation, np.full(len(users), np.inf),
                         previous=allocation, held=held, max_iterations=0, dtype=dtype, shards=shards,
                         even_split=False, standby=standby)
    return TreeStep(step, _node_totals(tree, step.totals()), levels.steps)


class _Bounds:
    """Per user and resource its ceiling and floor (weight_tree.pair_bounds), users in the tree's
    pre-order (so every node's users are a run of rows), and per node the most its subtree can take on
    each resource (weight_tree.node_ceilings: every group ceiling on the way)."""

    def __init__(self, tree: TreeArrays, capacity: np.ndarray, demand: np.ndarray):
        self.tree = tree
        self.order = tree.row[tree.row >= 0]                    # per pre-order position: the user's row
        self.in_order = bool(np.array_equal(self.order, np.arange(len(self.order))))
        self.first = np.empty(tree.nodes, dtype=np.int64)       # per node: the position of its first user
        position = np.argsort(self.order)
        for node in range(tree.nodes):
            self.first[node] = position[tree.members[node]].min(initial=len(self.order))
        self.capped = bool(np.isfinite(tree.ceiling[tree.row < 0]).any())
        if (tree.floor > 0).any() or np.isfinite(tree.ceiling).any():
            ceiling, floor = pair_bounds(tree, capacity, demand)
            floor = floor if floor.any() else None
        else:   # weights only (the common case): what pair_bounds gives, without its passes over floors
            ceiling, floor = np.minimum(demand, capacity[None, :]), None
        self.rows_ceiling = ceiling
        self.ceiling = ceiling if self.in_order else ceiling[self.order]
        self.floor = floor if floor is None or self.in_order else floor[self.order]
        # Only where a group has a ceiling does a group's reach differ from its users' summed.
        self.node_reach = node_ceilings(tree, capacity, demand) if self.capped else None
        self.under_a_ceiling = np.zeros(len(self.order), dtype=bool)    # per row: under a group with a ceiling
        for group in np.flatnonzero((tree.row < 0) & np.isfinite(tree.ceiling)):
            self.under_a_ceiling[tree.members[group]] = True

    def summed(self, per_user: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """Per node of `nodes` (a level's rows: runs of users that cover them all, in order), the sum of
        `per_user` (pre-order) over its users."""
        if len(nodes) == len(per_user):
            return per_user
        return np.add.reduceat(per_user, self.first[nodes], axis=0)

    def reach(self, nodes: np.ndarray) -> np.ndarray:
        """Per node of `nodes` (a level's rows), the most its subtree can take on each resource."""
        return self.node_reach[nodes] if self.capped else self.summed(self.ceiling, nodes)

    def in_rows(self, per_user: np.ndarray) -> np.ndarray:
        """`per_user` (pre-order) in the tree's rows."""
        if self.in_order:
            return per_user
        out = np.empty_like(per_user)
        out[self.order] = per_user
        return out

    def at_the_edges(self, allocation: np.ndarray) -> np.ndarray:
        """The users' ceilings (rows) for the edges' fill: a user under a group with a ceiling is held to
        what the levels gave it (on a resource with room to spare, the fill gives every user its ceiling,
        and its own would take the group past its ceiling there); every other user, its own."""
        if not self.capped:
            return self.rows_ceiling
        under = self.under_a_ceiling
        out = self.rows_ceiling.copy()
        out[under] = np.minimum(out[under], allocation[under])
        return out


class _Levels:
    """Per level of the tree, its rows (the nodes at it, and users above it, in pre-order; groups with
    no users left out) and their allocation. The rows under one row of the level above are a run."""

    def __init__(self, tree: TreeArrays, capacity: np.ndarray, bounds: _Bounds, dtype: type, shards: ColumnShards):
        self.tree, self.capacity, self.dtype, self.shards, self.bounds = tree, capacity, dtype, shards, bounds
        users = len(bounds.order)
        self.rows = {level: rows[bounds.first[rows] < users] for level in range(1, tree.height + 1)
                     for rows in [tree.frontier(level)]}
        self.demand = {level: bounds.reach(rows) for level, rows in self.rows.items()}
        self.floor = {level: None if bounds.floor is None else bounds.summed(bounds.floor, rows)
                      for level, rows in self.rows.items()}
        # Per level > 1: where each row of the level above starts among its rows (and the end).
        self.cuts = {level: np.searchsorted(bounds.first[self.rows[level]], bounds.first[self.rows[level - 1]])
                     for level in range(2, tree.height + 1)}
        self.given: dict[int, np.ndarray] = {}
        self.steps = 0

    def _runs(self, level: int) -> list[tuple[int, int, int]]:
        """(row of the level above or -1, first, end) of the runs of rows of `level` under one row above."""
        if level == 1:
            return [(-1, 0, len(self.rows[1]))]
        cuts = [*self.cuts[level].tolist(), len(self.rows[level])]
        return [(i, cuts[i], cuts[i + 1]) for i in range(len(cuts) - 1)]

    def informed(self, level: int, static: np.ndarray) -> np.ndarray:
        """Step 2a: the rows of `level` over the whole cluster, by e_c; their allocation."""
        tree = self.tree
        rows = self.rows[level]
        slot = np.repeat(np.arange(len(self.rows[level - 1])), np.diff([*self.cuts[level], len(rows)]))
        totals = np.zeros(tree.nodes)
        totals[self.rows[level - 1]] = self.given[level - 1].sum(axis=1, dtype=np.float64)
        anchor = self.rows[level - 1][slot]
        share = _level_shares(tree, rows, anchor, self.demand[level].sum(axis=1), totals, static)
        reservation = self.floor[level] if self.floor[level] is not None else np.zeros(len(rows))
        weight = share / share.max()      # scale-free: kept near 1, far from float32's range
        # even_split=False: the split its rows' needs lead to is what this step is for.
        step = local_weights(self.capacity, weight, self.demand[level], reservation, np.full(len(rows), np.inf),
                             dtype=self.dtype, shards=self.shards, even_split=False,
                             max_iterations=iteration_budget(self.demand[level].size))
        self.steps += 1
        return step.allocation

    def within(self, level: int, informed: np.ndarray | None) -> None:
        """Steps 1, 2b and 2c: every row of `level` within what the row above it got, by weight; warm from
        `informed` (the allocation of level `level` or of the level below it, summed up to `level`)."""
        tree = self.tree
        rows = self.rows[level]
        if informed is not None and len(informed) != len(rows):    # the level below: summed up to this one
            informed = np.add.reduceat(informed, self.cuts[level + 1], axis=0)
        resources = len(self.capacity)
        given = np.zeros((len(rows), resources), dtype=self.dtype)
        above = self.given.get(level - 1)
        for parent, first, end in self._runs(level):
            room = self.capacity if parent < 0 else above[parent].astype(np.float64)
            if parent >= 0 and tree.depth[rows[first]] < level:      # a user above: keeps its row
                given[first] = room
                continue
            columns = np.flatnonzero(room > 0)
            if len(columns) == 0:
                continue
            every = len(columns) == resources
            kids = slice(first, end)
            weight = tree.weight[rows[kids]]
            demand = self.demand[level][kids] if every else self.demand[level][kids][:, columns]
            floor = self.floor[level]
            reservation = np.zeros(end - first) if floor is None else floor[kids] if every else floor[kids][:, columns]
            previous = None
            if informed is not None:
                start = informed[kids] if every else informed[kids][:, columns]
                previous = start * (weight / np.maximum(start.sum(axis=1, dtype=np.float64), 1e-30))[:, None]
            capacity = room if every else np.ascontiguousarray(room[columns])
            shards = self.shards if every else None
            step = local_weights(capacity, weight, demand, reservation, np.full(end - first, np.inf), previous=previous,
                                 dtype=self.dtype, shards=shards, even_split=previous is None)
            self.steps += 1
            if previous is not None and _short_of_max_min(step, weight):
                step = local_weights(capacity, weight, demand, reservation, np.full(end - first, np.inf),
                                     dtype=self.dtype, shards=shards)
                self.steps += 1
            if every:
                given[kids] = step.allocation
            else:
                given[kids, columns] = step.allocation
        self.given[level] = given


def _short_of_max_min(step: WeightStep, weight: np.ndarray) -> bool:
    """Whether some resource gives bytes above its floor to a row whose total per weight is more than
    UNFAIR above that of a row that wants more there: an exchange the weighted max-min would make."""
    level = step.totals() / weight
    resolution = (WATER_TOLERANCE * step.capacity).astype(step.allocation.dtype)
    floor = step.floor if step.floor is not None else 0.0
    holds = step.allocation > floor + resolution
    wants = step.allocation < step.ceiling - resolution
    high = np.where(holds, level[:, None], -np.inf).max(axis=0, initial=-np.inf)
    low = np.where(wants, level[:, None], np.inf).min(axis=0, initial=np.inf)
    return bool((high > low * (1 + UNFAIR)).any())


def _level_shares(tree: TreeArrays, rows: np.ndarray, anchor: np.ndarray, reach: np.ndarray, totals: np.ndarray,
                  static: np.ndarray) -> np.ndarray:
    """e_c per row: w_c times its parent's water level (weight_tree.water_level: the parent's total
    split by weight, each child up to the most it could take); a user above the level, its own total.
    A parent with no total: its static part of the cluster instead, so every weight is above 0 and an
    idle subtree comes back at the weight its place in the tree gives it."""
    share = np.empty(len(rows))
    for a in np.unique(anchor):
        mine = np.flatnonzero(anchor == a)
        if rows[mine[0]] == a:          # a user above the level
            share[mine] = totals[a] if totals[a] > 0 else static[a]
            continue
        weight = tree.weight[rows[mine]]
        level = water_level(float(totals[a]), weight, reach[mine]) if totals[a] > 0 else 0.0
        if not np.isfinite(level):      # its children take all they want
            level = float(totals[a]) / float(weight.sum())
        share[mine] = weight * (level if level > 0 else static[a] / weight.sum())
    return share


def _dues(tree: TreeArrays, totals: np.ndarray, static: np.ndarray) -> np.ndarray:
    """Per node, what it is due whatever it wants now (at least its own total): its weight times the most
    any of its siblings got per weight, or its part by weight of what its parent is due, whichever is
    more (a parent whose children want less than it is due has more for any one of them that wants
    more); under the root, its part of the cluster (`static`) where no sibling got anything."""
    weight = tree.weight
    per_weight = np.zeros(tree.nodes + 1)       # per parent (0: the root): the most a child got per weight
    siblings = np.zeros(tree.nodes + 1)         # per parent: its children's weights summed
    np.maximum.at(per_weight, tree.parent + 1, totals / weight)
    np.add.at(siblings, tree.parent + 1, weight)
    due = np.empty(tree.nodes)
    for node in range(tree.nodes):              # pre-order: a parent's due is known before its children's
        parent = int(tree.parent[node])
        level = per_weight[parent + 1]
        if parent >= 0:
            level = max(level, due[parent] / siblings[parent + 1])
        due[node] = weight[node] * level if level > 0 else static[node]
    return due


def _static_shares(tree: TreeArrays, total: float) -> np.ndarray:
    """Per node: its part of `total` by weight among all its siblings, down the tree."""
    part = np.zeros(tree.nodes)
    for node in range(tree.nodes):
        p = tree.parent[node]
        siblings = tree.children(p)
        part[node] = (part[p] if p >= 0 else total) * tree.weight[node] / tree.weight[siblings].sum()
    return np.maximum(part, 1e-30)


def _node_totals(tree: TreeArrays, user_totals: np.ndarray) -> np.ndarray:
    return np.array([user_totals[tree.members[n]].sum() for n in range(tree.nodes)])
