"""What the edges do, as a fluid: each resource shared by weights between floors and ceilings.

On every resource (a column: one device of one node, one direction), the users that want bytes
share it in proportion to their local weights, each between its floor (reservation) and its
ceiling (the least of its demand, its limit and the capacity), and what one does not take goes to
the others: `allocation[u] = clip(weight[u] * level, floor[u], ceiling[u])`, with the level chosen
so that the column adds up to the capacity, or every user at its ceiling where they all fit. This
is the fixed point a per-packet weighted scheduler (BFQ, start-time fair queueing, DWRR, mClock's
weight tags) reaches with backlogged users; the weight step predicts the edges with it, and the
site simulation plays the edges with it.

All columns are solved at once on arrays (users x resources), by Newton's method on each column's
level, safeguarded by bisection: the columns' sums are piecewise linear in their levels, so a warm
start (the previous levels) settles in one to three passes.
"""

import numpy as np

from vnode_sync.coordinator.policy.column_shards import ColumnShards

# A column is settled when its sum is within this fraction of its capacity.
TOLERANCE = 1e-4
MAX_ROUNDS = 60
# Once fewer than 1/SUBSET_FRACTION of the columns are unsettled, they are solved apart.
SUBSET_FRACTION = 8


def water_fill(weight: np.ndarray, capacity: np.ndarray, ceiling: np.ndarray, floor: np.ndarray | None = None,
               level: np.ndarray | None = None, out: np.ndarray | None = None,
               scratch: tuple[np.ndarray, np.ndarray] | None = None,
               shards: ColumnShards | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(allocation[u, r], level[r]) for local weights `weight[u, r]` (> 0 where ceiling > 0).

    `capacity[r]`: bytes/s of each resource. `ceiling[u, r]`: the most user u takes there (0 where it
    wants nothing). `floor[u, r]` <= ceiling: what it gets first (their sum must fit the capacity;
    None: no floors). `level`: the previous levels, a warm start. A resource whose ceilings all fit
    gives everyone its ceiling; its level is returned as inf. `out` receives the allocation and
    `scratch` is two more arrays of the same shape and type (a caller that fills often reuses them:
    fresh pages cost as much as a pass). `shards`: fill their blocks of columns at once (the same
    result: every column is filled alone)."""
    if shards is not None and len(shards) > 1:
        return _fill_blocks(shards, weight, capacity, ceiling, floor, level, out, scratch)
    dtype = weight.dtype
    capacity = capacity.astype(dtype, copy=False)
    full = ceiling.sum(axis=0) > capacity * (1 + TOLERANCE)
    column_weight = weight.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        guess = capacity / column_weight
        if level is not None:
            guess = np.where(np.isfinite(level) & (level > 0), level, guess)
    current = np.where(full, guess, np.inf).astype(dtype)
    low = np.zeros_like(current)
    high = np.full_like(current, np.inf)
    allocation = np.empty_like(weight) if out is None else out
    x, free = scratch if scratch is not None else (np.empty_like(weight), np.empty_like(weight))
    with np.errstate(invalid="ignore", over="ignore"):
        for _ in range(MAX_ROUNDS):
            np.multiply(weight, current, out=x)         # inf where the column is not full
            np.fmin(x, ceiling, out=allocation)          # fmin: 0 * inf (no weight, no ceiling) gives 0
            if floor is not None:
                np.fmax(allocation, floor, out=allocation)
            error = capacity - allocation.sum(axis=0)
            pending = full & (np.abs(error) > TOLERANCE * capacity)
            unsettled = np.flatnonzero(pending)
            if unsettled.size == 0:
                break
            if unsettled.size * SUBSET_FRACTION < pending.size:
                # Few columns left: solve those alone rather than pass over every column again.
                part, part_level = water_fill(weight[:, unsettled], capacity[unsettled], ceiling[:, unsettled],
                                              None if floor is None else floor[:, unsettled], current[unsettled])
                allocation[:, unsettled] = part
                current[unsettled] = part_level
                break
            low = np.where(pending & (error > 0), current, low)
            high = np.where(pending & (error < 0), current, high)
            # The slope of a column's sum in its level: the weights of the users strictly between floor and ceiling.
            np.less(x, ceiling, out=free)
            if floor is not None:
                free *= x > floor
            free *= weight
            slope = free.sum(axis=0)
            with np.errstate(divide="ignore"):
                newton = current + error / slope
            safe = (slope > 0) & (newton >= low) & (newton <= high)
            bisect = np.where(np.isfinite(high), (low + high) / 2, 2 * current)
            current = np.where(pending, np.where(safe, newton, bisect), current).astype(dtype)
    return allocation, current


def fill_columns(columns: slice, weight: np.ndarray, capacity: np.ndarray, ceiling: np.ndarray,
                 floor: np.ndarray | None, level: np.ndarray | None, out: np.ndarray,
                 scratch: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """water_fill of these columns of the arrays, into the same columns of `out`; their levels."""
    return water_fill(weight[:, columns], capacity[columns], ceiling[:, columns],
                      None if floor is None else floor[:, columns], None if level is None else level[columns],
                      out=out[:, columns], scratch=(scratch[0][:, columns], scratch[1][:, columns]))[1]


def _fill_blocks(shards: ColumnShards, weight, capacity, ceiling, floor, level, out, scratch):
    allocation = np.empty_like(weight) if out is None else out
    scratch = scratch if scratch is not None else (np.empty_like(weight), np.empty_like(weight))
    levels = np.empty(capacity.shape, dtype=weight.dtype)

    def fill(columns: slice) -> None:
        levels[columns] = fill_columns(columns, weight, capacity, ceiling, floor, level, allocation, scratch)

    shards.map(fill)
    return allocation, levels
