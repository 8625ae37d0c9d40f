"""The weight step for a tree of weights: users' global weights from the tree, level by level, on arrays.

The flat step (local_weights.py) makes users' totals weighted max-min fair by their global weights
W, and the edges share each resource by the local weights it returns. For a tree, the step works
down the levels with flat steps whose rows are the nodes of one level (a group's row wants, on each
resource, what its users want there together, within its ceiling), keeping every node's allocation
on every resource, A[v, r]:

1. Level 1: the root's children by their weights. Their totals are the weighted max-min of the
   groups' totals, as in the exact reference (up to the flat step's own error: a group's users can
   use what the group could, resource by resource, so the groups' feasible totals are the same).
2. Level k > 1:
   a. Informed: every node of level k as a row over the whole cluster, at e_c = w_c * L_p, where
      L_p is its parent's water level (weight_tree.water_level: the parent's total split among its
      children by weight, each up to the most it could take), what the exact reference measures a
      child against; a user above level k at its own total. INFORMED_ROUNDS flat steps, each parent's
      rows scaled by what its total should be over what they got, warm-started from the last.
   b. Re-split: level k-1 again, each parent's children within what their own parent got (the
      cluster, at level 1), warm-started from (a)'s allocation summed per parent and not moved to
      the even split: of the splits over resources that give level k-1 the same totals, the one its
      children's needs lead to.
   c. Within: every parent's children share the parent's A[p, :] by their weights (one flat step
      per parent over the resources where it got bytes, warm-started from (a)); a user above level k
      keeps its row. Every parent's total, on every resource, is then exactly what it got above.
3. The users' allocation: (a)'s at the last level where its parents' totals came within SELECT of
   theirs (its trades between parents are the exact reference's), else (c)'s (parents' totals
   exact, the split over resources as (b) left it). The edges' weights: one more flat step over the
   users with W = their totals, started from that allocation as local weights (its fixed point), so
   they come with today's standby weights and predictions.

A tree of one level is exactly today's flat step (the same call, the same arrays).

What it guarantees, and where it approximates:
- Level 1 (groups under the root) is the flat step: the groups' totals within its accuracy of the
  weighted max-min. Within a parent, children share by weight, and what an idle or met child leaves
  goes to its siblings first (a flat max-min among them, in (a) by e_c, in (c) within A[p, :]).
- Across parents, the exact reference moves a parent's bytes between resources when that lets
  children be fairer at the same totals. (a) trades by the exact reference's measure but holds
  parents' totals only as closely as its rounds bring them; (c) holds them exactly but keeps the
  split (b) found. Where neither fits (parents' children pinned to different resources, competing
  with other parents' there) users may get well below their exact totals: measured by
  benchmarks/tree_step.py (benchmarks/results/tree-step.txt), and short of 0.95 on some trees.
- A group's ceiling (and floor) bounds its users' sum on each resource; the step splits it among
  its children by weight on each resource alone, each up to what it wants there
  (weight_tree.split_down), as a nested scheduler on that resource would: exact on one resource,
  not moved between resources.
- Cost, per level below the first: INFORMED_ROUNDS flat steps over that level's rows (the later ones
  warm, a quarter of the iterations), one over the level above (warm), one per parent over its
  children; then the users' last step (LAST_ITERATIONS).
"""

from dataclasses import dataclass

import numpy as np

from vnode_sync.coordinator.policy.column_shards import ColumnShards
from vnode_sync.coordinator.policy.local_weights import WeightStep, iteration_budget, local_weights
from vnode_sync.coordinator.policy.weight_tree import TreeArrays, node_ceilings, pair_bounds, split_down, water_level
from vnode_sync.errors import InvalidArgument

# Rounds of step 2a: each brings parents' totals closer to theirs (8: within 2% on most random trees).
INFORMED_ROUNDS = 8
# A warm-started round moves weights a little: it takes a quarter of a cold step's iterations, at least these.
ROUND_ITERATIONS = 10
# Step 2a's allocation is taken where every parent's total came within this fraction of its own.
SELECT = 0.02
# The users' last step starts at its fixed point (their allocation as local weights): a few iterations.
LAST_ITERATIONS = 10


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
                 dtype: type = np.float32, shards: ColumnShards | None = None) -> TreeStep:
    """One step of the center for a tree: `demand[u, r]` bytes/s (inf = takes all), users in the
    tree's rows; `capacity[r]` bytes/s. `previous`: the last step for the same users and resources,
    a warm start for a tree of one level (today's step); a deeper tree starts from its own levels."""
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
                             previous=None if previous is None else previous.step.weight,
                             previous_level=None if previous is None else previous.step.level,
                             dtype=dtype, shards=shards)
        return TreeStep(step, _node_totals(tree, step.totals()), 1)
    if np.isnan(demand).any() or (demand < 0).any():
        raise InvalidArgument("demand must be >= 0 (inf = takes all it gets), not NaN or negative")
    ceiling, floor = _user_bounds(tree, capacity, demand)
    levels = _Levels(tree, capacity, ceiling, floor, dtype, shards)
    static = _static_shares(tree, float(capacity.sum()))
    levels.within(1, None)
    for level in range(2, tree.height + 1):
        informed = levels.informed(level, static)
        levels.within(level - 1, informed)     # the re-split
        levels.within(level, informed)
    rows, allocation = levels.rows[tree.height], levels.given[tree.height]
    if levels.informed_miss[tree.height] <= SELECT:
        allocation = informed
    order = np.argsort(tree.row[rows])
    allocation = allocation[order]
    totals = allocation.sum(axis=1)
    weight = np.maximum(totals, 1e-9 * max(float(capacity.max(initial=0.0)), 1.0))
    weight = weight / weight.max()
    reservation = floor if floor is not None else np.zeros(len(users))
    step = local_weights(capacity, weight, ceiling, reservation, np.full(len(users), np.inf),
                         previous=np.ascontiguousarray(allocation, dtype=dtype), max_iterations=LAST_ITERATIONS,
                         dtype=dtype, shards=shards, even_split=False)
    return TreeStep(step, _node_totals(tree, step.totals()), levels.steps + 1)


class _Levels:
    """Per level of the tree, its rows (the nodes at it, and users above it) and their allocation."""

    def __init__(self, tree: TreeArrays, capacity: np.ndarray, ceiling: np.ndarray, floor: np.ndarray | None,
                 dtype: type, shards: ColumnShards):
        self.tree, self.capacity, self.dtype, self.shards = tree, capacity, dtype, shards
        self.rows = {level: tree.frontier(level) for level in range(1, tree.height + 1)}
        self.demand = {level: tree.subtree_sum(ceiling, rows) for level, rows in self.rows.items()}
        self.floor = {level: None if floor is None else tree.subtree_sum(floor, rows)
                      for level, rows in self.rows.items()}
        self.given: dict[int, np.ndarray] = {}
        self.informed_miss: dict[int, float] = {}
        self.steps = 0

    def _parent_slot(self, level: int) -> tuple[np.ndarray, np.ndarray]:
        """Per row of `level`: the row of level - 1 it is under (itself, for a user above), or -1 at level 1."""
        rows = self.rows[level]
        if level == 1:
            return rows, np.full(len(rows), -1)
        above = np.where(self.tree.depth[rows] == level, self.tree.parent[rows], rows)
        index = {int(n): i for i, n in enumerate(self.rows[level - 1])}
        return rows, np.array([index[int(a)] for a in above])

    def informed(self, level: int, static: np.ndarray) -> np.ndarray:
        """Step 2a: the rows of `level` over the whole cluster, by e_c; their allocation."""
        tree = self.tree
        rows, slot = self._parent_slot(level)
        totals = np.zeros(tree.nodes)
        totals[self.rows[level - 1]] = self.given[level - 1].sum(axis=1)
        anchor = self.rows[level - 1][slot]
        reach = np.minimum(self.demand[level], self.capacity).sum(axis=1)
        share = _level_shares(tree, rows, anchor, reach, totals, static)
        reservation = self.floor[level] if self.floor[level] is not None else np.zeros(len(rows))
        target = totals[self.rows[level - 1]]
        scale = np.ones(len(target))
        previous = None
        for _ in range(INFORMED_ROUNDS):
            weight = share * scale[slot]
            weight = weight / weight.max()      # scale-free: kept near 1, far from float32's range
            budget = iteration_budget(self.demand[level].size)
            step = local_weights(self.capacity, weight, self.demand[level], reservation, np.full(len(rows), np.inf),
                                 previous=previous, dtype=self.dtype, shards=self.shards,
                                 max_iterations=budget if previous is None else max(ROUND_ITERATIONS, budget // 4))
            self.steps += 1
            got = np.bincount(slot, weights=step.totals(), minlength=len(target))
            move = np.where((got > 0) & (target > 0), target / np.maximum(got, 1e-30), 1.0)
            # A parent whose children took more than it has here gives way where they compete with others.
            scale *= move
            previous = step.weight * move[slot].astype(step.weight.dtype)[:, None]
        self.informed_miss[level] = float(np.max(np.abs(got / np.maximum(target, 1e-30) - 1)[target > 0], initial=0.0))
        return step.allocation.astype(np.float64)

    def within(self, level: int, informed: np.ndarray | None) -> None:
        """Steps 1, 2b and 2c: every row of `level` within what the row above it got, by weight; warm from
        `informed` (the allocation of level `level` or of the level below it, summed up to `level`)."""
        tree = self.tree
        rows, slot = self._parent_slot(level)
        if informed is not None and len(informed) != len(rows):    # the level below: summed up to this one
            below, below_slot = self._parent_slot(level + 1)
            informed = np.stack([informed[below_slot == i].sum(axis=0) for i in range(len(rows))])
        given = np.zeros((len(rows), len(self.capacity)))
        above = self.given.get(level - 1)
        for parent in np.unique(slot):
            kids = np.flatnonzero(slot == parent)
            room = self.capacity if parent < 0 else above[parent]
            if parent >= 0 and tree.depth[rows[kids[0]]] < level:      # a user above: keeps its row
                given[kids[0]] = room
                continue
            columns = np.flatnonzero(room > 0)
            if len(columns) == 0:
                continue
            weight = tree.weight[rows[kids]]
            demand = np.ascontiguousarray(self.demand[level][kids][:, columns])
            floor = self.floor[level]
            reservation = np.zeros(len(kids)) if floor is None else np.ascontiguousarray(floor[kids][:, columns])
            previous = None
            if informed is not None:
                start = informed[kids][:, columns]
                previous = start * (weight / np.maximum(start.sum(axis=1), 1e-30))[:, None]
            step = local_weights(np.ascontiguousarray(room[columns]), weight, demand, reservation,
                                 np.full(len(kids), np.inf), previous=previous, dtype=self.dtype,
                                 shards=self.shards if len(columns) == len(self.capacity) else None,
                                 even_split=informed is None)
            self.steps += 1
            given[np.ix_(kids, columns)] = step.allocation
        self.given[level] = given


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


def _user_bounds(tree: TreeArrays, capacity: np.ndarray, demand: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """(ceiling, floor or None) per user and resource: pair_bounds, with every group ceiling split down
    by weight on each resource (module docstring)."""
    ceiling, floor = pair_bounds(tree, capacity, demand)
    groups_capped = (tree.row < 0) & np.isfinite(tree.ceiling)
    if groups_capped.any():
        reach = node_ceilings(tree, capacity, demand)
        top = tree.children(-1)
        ceiling = np.minimum(ceiling, split_down(tree, reach[top], reach)[tree.leaf])
        floor = np.minimum(floor, ceiling)
    return ceiling, (floor if floor.any() else None)


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
