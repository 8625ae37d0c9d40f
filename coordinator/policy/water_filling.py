"""What the edges do, as a fluid: each resource shared by weights between floors and ceilings.

On every resource (a column: one device of one node, one direction), the users that want bytes
share it in proportion to their local weights, each between its floor (reservation) and its
ceiling (the least of its demand, its limit and the capacity), and what one does not take goes to
the others: `allocation[u] = clip(weight[u] * level, floor[u], ceiling[u])`, with the level chosen
so that the column adds up to the capacity, or every user at its ceiling where they all fit. This
is the fixed point a per-packet weighted scheduler (BFQ, start-time fair queueing, DWRR, mClock's
weight tags) reaches with backlogged users; the weight step predicts the edges with it, and the
site simulation plays the edges with it.

Every column is solved alone, by Newton's method on its level, safeguarded by bisection: a
column's sum is piecewise linear in its level, so a warm start (the previous levels) settles in one
to three rounds. The rounds are compiled (compiled_passes.fill): one sweep of the arrays each.
"""

import numpy as np

from vnode_sync.coordinator.policy import compiled_passes
from vnode_sync.coordinator.policy.column_shards import ColumnShards

# A column is settled when its sum is within this fraction of its capacity.
TOLERANCE = 1e-4
MAX_ROUNDS = 60


def water_fill(weight: np.ndarray, capacity: np.ndarray, ceiling: np.ndarray, floor: np.ndarray | None = None,
               level: np.ndarray | None = None, out: np.ndarray | None = None,
               shards: ColumnShards | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(allocation[u, r], level[r]) for local weights `weight[u, r]` (> 0 where ceiling > 0).

    `capacity[r]`: bytes/s of each resource. `ceiling[u, r]`: the most user u takes there (0 where it
    wants nothing). `floor[u, r]` <= ceiling: what it gets first (their sum must fit the capacity;
    None: no floors). `level`: the previous levels, a warm start. A resource whose ceilings all fit
    gives everyone its ceiling; its level is returned as inf. `out` (C-contiguous, of the weights'
    dtype) receives the allocation. `shards`: fill their blocks of columns at once (the same result:
    every column is filled alone)."""
    weight, ceiling = np.ascontiguousarray(weight), np.ascontiguousarray(ceiling)
    floor = None if floor is None else np.ascontiguousarray(floor)
    capacity = np.ascontiguousarray(capacity, dtype=np.float64)
    allocation = np.empty_like(weight) if out is None else out
    levels = np.empty(capacity.shape, dtype=weight.dtype)

    def fill(columns: slice) -> None:
        levels[columns] = fill_columns(columns, weight, capacity, ceiling, floor, level, allocation)[0]

    (shards or ColumnShards(weight.shape, 1)).map(fill)
    return allocation, levels


def fill_columns(columns: slice, weight: np.ndarray, capacity: np.ndarray, ceiling: np.ndarray,
                 floor: np.ndarray | None, level: np.ndarray | None,
                 out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """water_fill of these columns of C-contiguous arrays (capacity: float64), into the same columns
    of `out`: (their levels, per-user sums of what they give)."""
    if level is not None:
        level = np.ascontiguousarray(level, dtype=np.float64)
    return compiled_passes.fill(weight, capacity, ceiling, floor, level, out, columns.start, columns.stop,
                                TOLERANCE, MAX_ROUNDS)
