"""The weight step's passes over users x resources, compiled (numba): one sweep of the arrays each.

In numpy, a round of a column's Newton fill is six passes with temporaries in between (multiply,
clip, column sums, a mask, its weights, their sums). Here it is one sweep that reads the weights
and ceilings once and keeps only per-column sums: ~5x less time at 10^7 pairs.

Each function works the columns [start, stop) of whole row-major (C-contiguous) arrays: a block
that column_shards.py hands to a thread. Rows are taken as contiguous slices and swept without
branches, so the loops vectorise (a 2-D view of a block, or a branch per settled column, made them
several times slower). They let go of the GIL and sum in float64 whatever dtype the arrays hold.
Compiled on first use and cached beside this file (numba's `cache=True`), per dtype.
"""

import numpy as np
from numba import njit

# The per-user sums may be added in any order, so their loops vectorise like the rest.
SUMS_IN_ANY_ORDER = {"reassoc"}


@njit(nogil=True, cache=True, fastmath=SUMS_IN_ANY_ORDER)
def fill(weight, capacity, ceiling, floor, level, out, start, stop, tolerance, max_rounds):
    """water_filling.water_fill on columns [start, stop): the allocation into `out` there;
    (their levels, per-user sums of the allocation there). `floor` and `level` may be None.
    A column whose ceilings fit its capacity gets level inf."""
    users = weight.shape[0]
    columns = stop - start
    capacity = capacity[start:stop]
    ceiling_sum = np.zeros(columns)
    weight_sum = np.zeros(columns)
    for u in range(users):
        weights, ceilings = weight[u, start:stop], ceiling[u, start:stop]
        for r in range(columns):
            ceiling_sum[r] += ceilings[r]
            weight_sum[r] += weights[r]
    current = np.full(columns, np.inf)
    low = np.zeros(columns)
    high = np.full(columns, np.inf)
    pending = np.zeros(columns, dtype=np.bool_)
    for r in range(columns):
        if ceiling_sum[r] > capacity[r] * (1 + tolerance):
            pending[r] = True
            current[r] = capacity[r] / weight_sum[r] if weight_sum[r] > 0 else np.inf
            if level is not None and np.isfinite(level[start + r]) and level[start + r] > 0:
                current[r] = level[start + r]
    given = np.zeros(columns)
    slope = np.zeros(columns)
    for _ in range(max_rounds):
        if not pending.any():
            break
        given[:] = 0.0
        slope[:] = 0.0
        # Every column of the block, settled or not: a sweep without branches costs less than one that skips.
        for u in range(users):
            weights, ceilings = weight[u, start:stop], ceiling[u, start:stop]
            if floor is None:
                for r in range(columns):
                    w, c = weights[r], ceilings[r]
                    x = w * current[r]
                    free = x < c
                    given[r] += x if free else c
                    slope[r] += w if free else 0.0
            else:
                floors = floor[u, start:stop]
                for r in range(columns):
                    w, c, f = weights[r], ceilings[r], floors[r]
                    x = w * current[r]
                    a = x if x < c else c
                    given[r] += a if a > f else f
                    slope[r] += w if (x < c and x > f) else 0.0
        for r in range(columns):
            if not pending[r]:
                continue
            error = capacity[r] - given[r]
            if abs(error) <= tolerance * capacity[r]:
                pending[r] = False
                continue
            # The column's sum is piecewise linear in its level: Newton, kept within the bracket.
            if error > 0:
                low[r] = current[r]
            else:
                high[r] = current[r]
            newton = current[r] + error / slope[r] if slope[r] > 0 else -1.0
            if slope[r] > 0 and low[r] <= newton <= high[r]:
                current[r] = newton
            elif np.isfinite(high[r]):
                current[r] = (low[r] + high[r]) / 2
            else:
                current[r] = 2 * current[r]
    sums = np.zeros(users)
    for u in range(users):
        weights, ceilings, given_row = weight[u, start:stop], ceiling[u, start:stop], out[u, start:stop]
        total = 0.0
        for r in range(columns):
            c = ceilings[r]
            x = weights[r] * current[r]
            a = x if x < c else c       # inf, or NaN (no weight where nothing fits), gives the ceiling
            if floor is not None:
                f = floor[u, start + r]
                a = a if a > f else f
            given_row[r] = a
            total += given_row[r]
        sums[u] = total
    return current, sums


@njit(nogil=True, cache=True, fastmath=SUMS_IN_ANY_ORDER)
def respond(given, scale, least, out, start, stop):
    """out[u, r] = max(given[u, r] * scale[u], least[u]) on columns [start, stop)."""
    for u in range(given.shape[0]):
        s, m = scale[u], least[u]
        given_row, out_row = given[u, start:stop], out[u, start:stop]
        for r in range(stop - start):
            x = given_row[r] * s
            out_row[r] = x if x > m else m


@njit(nogil=True, cache=True, fastmath=SUMS_IN_ANY_ORDER)
def overshoot(new, old, beta, ceiling, floor, out, start, stop):
    """out = new + beta * (new - old) on columns [start, stop), within floor (None: 0) and ceiling;
    per-user sums there."""
    users = new.shape[0]
    sums = np.zeros(users)
    for u in range(users):
        new_row, old_row, out_row = new[u, start:stop], old[u, start:stop], out[u, start:stop]
        ceilings = ceiling[u, start:stop]
        total = 0.0
        for r in range(stop - start):
            x = new_row[r] + beta * (new_row[r] - old_row[r])
            c = ceilings[r]
            x = x if x < c else c
            f = floor[u, start + r] if floor is not None else 0.0
            out_row[r] = x if x > f else f
            total += out_row[r]
        sums[u] = total
    return sums
