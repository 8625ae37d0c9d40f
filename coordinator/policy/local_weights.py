"""The global weight step: users' priorities (global weights) in, every resource's local weights out.

The edges share each resource by local weights at every instant (water_filling.py is their fluid
model). The center chooses those weights so that what the edges then give adds up, per user and
over the whole cluster, to the weighted max-min fair totals that exact_max_min.py computes
exactly and slowly: a user whose demand sits on a crowded resource gets weight moved there from
resources where it needs less, as Pisces (OSDI'12) moves each tenant's local weights to where its
demand is.

The step is proportional response: every user's local weight on a resource is its global weight
times the part of its total it got there (`b[u, r] = W[u] * a[u, r] / T[u]`), each resource
water-fills by those weights, and again. Its fixed point is the allocation that maximises
sum(W * log T) over what the resources and ceilings allow (Wu and Zhang, STOC'07; Birnbaum,
Devanur and Xiao, EC'11: proportional response is mirror descent on that problem), and on this
feasible set (a polymatroid: users x resources, capacities, floors and ceilings) that maximiser is
the weighted max-min fair one (Fujishige, Math. of OR 5(2), 1980: the lexicographically optimal
base minimises every separable convex function of the totals over weights, so both coincide).
Nesterov's momentum with adaptive restart (O'Donoghue and Candes, FoCM 2015) needs about a
quarter of the iterations for the same accuracy on random clusters; the previous step's weights are
a warm start. Every step is a few passes over users x resources arrays: no per-pair Python.

Weights where the step has no say are set so that nothing waits for it: a user that wants nothing
on a resource, or is given all it wants there, keeps its standby weight, W[u] * min(1, C[r] / T[u])
(the most it could weigh there were that whole resource its share): its next packet there is served
at that weight at once, and what it does not use goes to the others meanwhile.
"""

import math
import time
from dataclasses import dataclass

import numpy as np

from vnode_sync.coordinator.policy import compiled_passes
from vnode_sync.coordinator.policy.column_shards import ColumnShards
from vnode_sync.coordinator.policy.water_filling import fill_columns, water_fill
from vnode_sync.errors import InvalidArgument

# Stop when no user's total moved by more than this fraction in one iteration.
TOLERANCE = 1e-4
# Iterations per step: as many as WORK_PER_STEP (users x resources x iterations) allows, between these.
# ~25 iterations come within 2% of the optimum on dense clusters (1,000 x 10,000 in ~1.5 s of a core);
# small clusters can afford the tail (a user whose share must grow from its trace on a resource).
MIN_ITERATIONS = 25
MAX_ITERATIONS = 200
WORK_PER_STEP = 4e7
# Where users want several resources alike, many splits of the same totals are max-min and the step
# ends in whichever its history leads to. When the split the edges make with no center (every user's
# global weight on every resource it wants) gives each user at least this much less than the step's
# total, the step's weights split each global weight by that allocation instead: it does not depend on
# the last steps, and a replicated write, whose pipeline moves at the pace of its slowest node, gets
# its share on every node rather than more on one and less on another.
EVEN_SPLIT_SLACK = 0.01
# A user's weight on a resource where the optimum gives it nothing (it is better served elsewhere)
# stays at this fraction of its mean local weight, so it can come back there within a few steps.
TRACE = 1e-3
# A held user's demand is a lower bound (what it moved, grown), and the step counts on at least its
# weighted share of the resource among the users that want it there. Where it moved only a trickle
# (a writer just back, its first bytes at the end of the span), a weight for the trickle would have
# the edge serve one 64 KiB packet of it in seconds (measured: 1/3,157 of the other writer's weight, a
# packet held 3.7 s); and held at a small local weight it moves little, so a demand of 4x that little
# kept the weight small: proportional response holds such a corner, which max-min allows where users
# want several resources alike (measured: two readers on two DataNodes, 0.58 : 7.42 on one and the
# reverse on the other, one moving ~2 MB/s there for ~6 s). A fixed part of the resource (5 %, tried
# first) was far above a user's share at a node with many users, and the site no longer settled.


@dataclass(frozen=True)
class WeightStep:
    """The step's output, users x resources."""

    weight: np.ndarray       # local weights (> 0; only ratios among the users of one resource matter)
    allocation: np.ndarray   # bytes/s the edges give with those weights, if the demands hold (rates for cap-only backends)
    level: np.ndarray        # per resource: the water-filling level (inf where all demands fit)
    iterations: int
    converged: bool
    ceiling: np.ndarray                 # what each user takes at most on each resource (demand, limit, capacity)
    floor: np.ndarray | None            # reservations where there is demand
    capacity: np.ndarray

    def totals(self) -> np.ndarray:
        return self.allocation.sum(axis=1, dtype=np.float64)

    def realised(self, weight: np.ndarray) -> np.ndarray:
        """What the edges give, for the same demands, with other weights (e.g. those a node has now)."""
        return water_fill(weight.astype(self.weight.dtype, copy=False), self.capacity, self.ceiling, self.floor,
                          self.level, shards=ColumnShards(self.weight.shape))[0]


def local_weights(capacity: np.ndarray, weight: np.ndarray, demand: np.ndarray, reservation: np.ndarray,
                  limit: np.ndarray, previous: np.ndarray | None = None, held: np.ndarray | None = None,
                  max_iterations: int | None = None, tolerance: float = TOLERANCE,
                  dtype: type = np.float32, previous_level: np.ndarray | None = None,
                  seconds: float | None = None, shards: ColumnShards | None = None,
                  even_split: bool = True, standby: np.ndarray | None = None) -> WeightStep:
    """One step of the center.

    `capacity[r]` bytes/s of each resource (a (node, device, direction)); `weight[u]` each user's
    global weight (priority, > 0); `demand[u, r]` bytes/s (>= 0, inf = takes all it gets);
    `reservation[u]` a floor on each resource where it has demand (or `reservation[u, r]`, one per
    resource: a tree's floors split down its groups); `limit[u]` a ceiling on each
    (inf = none). `previous`: the weights the last step returned for the same users and resources
    (a warm start). `held[u, r]`: the user was held there (it had bytes waiting while others were
    served), so its demand is only a lower bound (at least its weighted share of the resource where it
    moved anything): it gets no standby weight there, or it would take more than the step planned.
    `max_iterations`: None = iteration_budget(users x resources).
    `previous_level`: the last step's levels for the same resources (a warm start for the first fill).
    `seconds`: the iterations stop once they have used this much CPU time of the calling thread (after
    one at least; the passes before and after them come on top): a control loop's step then ends in
    time at any size, and the next resumes from its weights. CPU rather than wall time, so a
    descheduled step on a busy host still does its work; the calling thread's, which works one block
    like every other thread. `shards`: the blocks of resources that threads work at once
    (column_shards.py; None: one per core, where the arrays are large enough to pay for them).
    `even_split`: False keeps the split the iterations found from `previous` even where the even
    split (EVEN_SPLIT_SLACK) is as fair (the tree step keeps a split its users' needs chose).
    `standby[u]` (or `standby[u, r]`): the global weight a user's standby weights come from, in the local
    weights' units (None: `weight`; the tree step's last fill, whose local weights are bytes/s, gives
    each user's due, and 0 where a group's ceiling must hold it to what the levels gave it)."""
    capacity, weight, demand, reservation, limit = _checked(capacity, weight, demand, reservation, limit, previous)
    if previous_level is not None and np.shape(previous_level) != capacity.shape:
        raise InvalidArgument(f"previous levels {np.shape(previous_level)} must be one per resource {capacity.shape}")
    if max_iterations is None:
        max_iterations = iteration_budget(demand.size)
    shards = shards if shards is not None else ColumnShards(demand.shape)
    if shards.columns != demand.shape[1]:
        raise InvalidArgument(f"column shards for {shards.columns} resources, not the {demand.shape[1]} of demand")
    passes = _Passes(capacity, demand, limit, dtype, held, weight)
    wanted, wanted_bytes = shards.row_sums(passes.bound)
    floor = passes.floor = _floors(passes.ceiling, reservation, capacity, dtype)
    trace = passes.trace = (TRACE * weight / np.maximum(wanted, 1)).astype(dtype)
    # The first weights: the last step's, or Pisces' start (the global weight split in proportion to demand).
    start_scale = (weight / np.maximum(wanted_bytes, 1e-30)).astype(dtype)[:, None]
    shards.map(lambda columns: passes.start(columns, previous, start_scale))
    ceiling, local, level, stretch = passes.ceiling, passes.local, passes.level, passes.stretch
    given, spare = np.empty_like(ceiling), np.empty_like(ceiling)
    totals = shards.row_sums(lambda columns: passes.fill(columns, local, given, previous_level))
    extrapolated, extrapolated_totals, momentum = given, totals, 1.0
    objective = _objective(weight, totals)
    scale = max(float(capacity.max(initial=0.0)), 1.0)
    began = time.thread_time()
    converged = False
    iterations = 0
    for iterations in range(1, max_iterations + 1):
        at = extrapolated_totals / weight        # each user's total per weight
        response = (1 / np.maximum(at, 1e-30)).astype(dtype)
        new_totals = shards.row_sums(lambda columns: passes.respond(columns, extrapolated, response, spare))
        new = spare
        new_objective = _objective(weight, new_totals)
        moved = float(np.max(np.abs(new_totals - totals) / np.maximum(new_totals, 1e-9 * scale), initial=0.0))
        if new_objective < objective:
            momentum = 1.0      # adaptive restart: the momentum overshot
        following = (1 + math.sqrt(1 + 4 * momentum * momentum)) / 2
        beta = (momentum - 1) / following
        if beta > 0:
            extrapolated_totals = shards.row_sums(lambda columns: passes.overshoot(columns, new, given, beta))
            extrapolated = stretch
        else:
            extrapolated, extrapolated_totals = new, new_totals
        momentum = following
        spare, given, totals, objective = given, new, new_totals, new_objective
        if moved <= tolerance:
            converged = True
            break
        if seconds is not None and time.thread_time() - began >= seconds:
            break
    # A step cut short by its time budget is mid-way (the next resumes it): the even split, which costs
    # two more fills, is tried by steps that got to their end.
    if even_split and (converged or iterations == max_iterations):
        local, given, level, totals = _even_if_as_fair(weight, ceiling, trace, capacity, floor, shards,
                                                       (local, given, level, totals))
    weights = np.empty_like(local)
    standby = weight if standby is None else np.asarray(standby, dtype=np.float64)
    shards.map(lambda columns: _with_standby(columns, weights, local, ceiling, level, standby, totals, capacity, held))
    return WeightStep(weights, given, level, iterations, converged, ceiling, floor, capacity)


class _Passes:
    """The step's passes over users x resources, each over one block of resources (column_shards.py),
    and the arrays they share, allocated once per step. A pass that returns gives what its block adds
    to the per-user sums the step needs next."""

    def __init__(self, capacity: np.ndarray, demand: np.ndarray, limit: np.ndarray, dtype: type,
                 held: np.ndarray | None = None, weight: np.ndarray | None = None):
        self.capacity, self.demand, self.held, self.weight = capacity, demand, held, weight
        self.row_limit = limit.astype(dtype)[:, None]
        self.ceiling = np.empty(demand.shape, dtype=dtype)
        self.local, self.stretch = np.empty_like(self.ceiling), np.empty_like(self.ceiling)
        self.level = np.empty(capacity.shape, dtype=dtype)
        self.floor: np.ndarray | None = None
        self.trace: np.ndarray | None = None

    def bound(self, columns: slice) -> np.ndarray:
        """Each user's ceiling on these columns; per user, how many it wants and how much in all."""
        part = self.ceiling[:, columns]
        np.minimum(self.demand[:, columns], self.capacity[columns], out=part, casting="unsafe")
        if self.held is not None:   # a held user: at least its weighted share there
            wants = part > 0
            weight = self.weight.astype(part.dtype)
            wanted_weight = (weight @ wants).astype(part.dtype)   # 0 where nobody wants the resource
            per_weight = np.divide(self.capacity[columns].astype(part.dtype), wanted_weight,
                                   out=np.zeros_like(wanted_weight), where=wanted_weight > 0)
            np.maximum(part, weight[:, None] * per_weight, out=part, where=self.held[:, columns] & wants)
        np.minimum(part, self.row_limit, out=part)
        return np.stack([(part > 0).sum(axis=1), part.sum(axis=1, dtype=np.float64)])

    def start(self, columns: slice, previous: np.ndarray | None, scale: np.ndarray) -> None:
        """The first weights on these columns: the last step's, else `scale` times the ceilings."""
        part = self.local[:, columns]
        if previous is not None:
            np.copyto(part, previous[:, columns], casting="unsafe")
        else:
            np.multiply(self.ceiling[:, columns], scale, out=part)
        np.maximum(part, self.trace[:, None], out=part)

    def fill(self, columns: slice, weights: np.ndarray, out: np.ndarray, start_level: np.ndarray | None) -> np.ndarray:
        """Water-fill these columns by `weights` into `out` (their levels into `level`); per-user sums."""
        self.level[columns], sums = fill_columns(columns, weights, self.capacity, self.ceiling, self.floor,
                                                 start_level, out)
        return sums

    def respond(self, columns: slice, extrapolated: np.ndarray, scale: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Proportional response on these columns: every user's weight where it got bytes, then the fill."""
        compiled_passes.respond(extrapolated, scale, self.trace, self.local, columns.start, columns.stop)
        return self.fill(columns, self.local, out, self.level)

    def overshoot(self, columns: slice, new: np.ndarray, old: np.ndarray, beta: float) -> np.ndarray:
        """Nesterov's extrapolation on these columns, kept within floors and ceilings; per-user sums."""
        return compiled_passes.overshoot(new, old, beta, self.ceiling, self.floor, self.stretch, columns.start,
                                         columns.stop)


def _even_if_as_fair(weight: np.ndarray, ceiling: np.ndarray, trace: np.ndarray, capacity: np.ndarray,
                     floor: np.ndarray | None, shards: ColumnShards,
                     step: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]) -> tuple:
    """The step's (weights, allocation, level, totals), or those of the even split (EVEN_SPLIT_SLACK)."""
    local, _, level, totals = step
    enough = (1 - EVEN_SPLIT_SLACK) * totals
    even_given = _even_split(weight, ceiling, trace, capacity, floor, shards, level, local)
    if not np.all(even_given.sum(axis=1) >= enough):
        return step
    even = _split_by(weight, even_given, trace)
    even_given, even_level = water_fill(even, capacity, ceiling, floor, _rescaled(level, local, even), shards=shards)
    even_totals = even_given.sum(axis=1)
    return (even, even_given, even_level, even_totals) if np.all(even_totals >= enough) else step


def _even_split(weight: np.ndarray, ceiling: np.ndarray, trace: np.ndarray, capacity: np.ndarray,
                floor: np.ndarray | None, shards: ColumnShards, level: np.ndarray, local: np.ndarray) -> np.ndarray:
    """What the edges give with every user's global weight on every resource it wants (its trace
    elsewhere), as the edges share with no center. `level` under the `local` weights: a warm start."""
    plain = (ceiling > 0) * weight.astype(ceiling.dtype)[:, None]
    np.maximum(plain, trace[:, None], out=plain)
    return water_fill(plain, capacity, ceiling, floor, _rescaled(level, local, plain), shards=shards)[0]


def _rescaled(level: np.ndarray, weight: np.ndarray, other: np.ndarray) -> np.ndarray:
    """A guess at each resource's level under `other` weights from its level under `weight`: the
    same bytes over the other column's total weight (exact where no one is at a floor or ceiling).
    A fill warm-started from it settles in a pass or two rather than the six of a cold one."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return level * (weight.sum(axis=0, dtype=np.float64) / other.sum(axis=0, dtype=np.float64))


def _split_by(weight: np.ndarray, given: np.ndarray, trace: np.ndarray) -> np.ndarray:
    """Each user's global weight split over the resources in proportion to what it is given there
    (Pisces' local weights; the step's fixed point has this form)."""
    totals = given.sum(axis=1)
    local = given * (weight / np.maximum(totals, 1e-30)).astype(given.dtype)[:, None]
    return np.maximum(local, trace[:, None], out=local)


def compile_passes() -> None:
    """Compile the step's passes (compiled_passes.py) for what the control loop gives them: float32,
    with floors and without, cold and warm; or load them from numba's cache. A coordinator calls it
    as it starts, so that its first tick, or a standby's first after a failover, does not spend
    seconds compiling on a host whose cache is cold."""
    demand = np.array([[4e6, np.inf, 1e6], [np.inf, 2e6, 3e6], [5e5, 8e6, np.inf]])
    for reservation in (np.zeros(3), np.full(3, 1e5)):
        args = (np.full(3, 6e6), np.array([1.0, 2.0, 8.0]), demand, reservation, np.full(3, np.inf))
        cold = local_weights(*args, max_iterations=MIN_ITERATIONS, tolerance=0.0)
        warm = local_weights(*args, previous=cold.weight, previous_level=cold.level, max_iterations=3, tolerance=0.0)
        warm.realised(cold.weight)


def iteration_budget(pairs: int) -> int:
    """The iterations a step may take on `pairs` (users x resources)."""
    return int(min(MAX_ITERATIONS, max(MIN_ITERATIONS, WORK_PER_STEP // max(pairs, 1))))


def _with_standby(columns: slice, out: np.ndarray, local: np.ndarray, ceiling: np.ndarray, level: np.ndarray,
                  weight: np.ndarray, totals: np.ndarray, capacity: np.ndarray, held: np.ndarray | None) -> None:
    """The step's weights on these columns into `out`, raised to the standby weight where a user is at
    its ceiling (all it wants, or nothing): that changes nothing the edges give while the demands hold.
    A user held where it moved nothing (its bound is 0: it waited the whole span) keeps its standby
    weight too, or the trace weight the step gives it there would keep it moving nothing, held, for good."""
    dtype = local.dtype
    part, local, ceiling = out[:, columns], local[:, columns], ceiling[:, columns]
    with np.errstate(invalid="ignore", over="ignore"):
        settled = np.multiply(local, level[columns], out=part) >= ceiling
    if held is not None:
        settled &= ~(held[:, columns] & (ceiling > 0))
    # standby = W[u] * min(1, C[r] / T[u]) = min(W[u], W[u] / T[u] * C[r]), where settled (0 elsewhere)
    weight = weight[:, None] if weight.ndim == 1 else weight[:, columns]
    # W[u] / T[u] kept finite (a user with no total: the largest, and the min gives W[u]), so a resource
    # of no capacity gives 0, not inf * 0
    per_total = np.minimum(weight / np.maximum(totals, 1e-30)[:, None], np.finfo(dtype).max).astype(dtype)
    with np.errstate(over="ignore"):
        np.multiply(per_total, capacity[columns].astype(dtype), out=part)
    np.minimum(part, weight.astype(dtype), out=part)
    part *= settled
    np.maximum(part, local, out=part)


def _objective(weight: np.ndarray, totals: np.ndarray) -> float:
    with np.errstate(divide="ignore"):
        return float(np.sum(weight * np.log(np.maximum(totals, 1e-30))))


def _floors(ceiling: np.ndarray, reservation: np.ndarray, capacity: np.ndarray, dtype: type) -> np.ndarray | None:
    """Each user's reservation on every resource where it has demand (at most its ceiling there), scaled
    down alike on a resource where they add up to more than it has (admission should prevent that)."""
    if not (reservation > 0).any():
        return None
    per_pair = reservation.astype(dtype)
    floor = np.minimum(ceiling, per_pair if per_pair.ndim == 2 else per_pair[:, None])
    booked = floor.sum(axis=0, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(booked > capacity, capacity / booked, 1.0)
    floor *= scale.astype(dtype)
    return floor


def _checked(capacity, weight, demand, reservation, limit, previous):
    capacity, weight, reservation, limit = (np.ascontiguousarray(a, dtype=np.float64)
                                            for a in (capacity, weight, reservation, limit))
    demand = np.asarray(demand)
    if demand.ndim != 2 or capacity.shape != (demand.shape[1],) or any(
            a.shape != (demand.shape[0],) for a in (weight, limit)) or reservation.shape not in (
            (demand.shape[0],), demand.shape):
        raise InvalidArgument(f"shapes: demand {demand.shape} must be users x resources, capacity {capacity.shape} "
                              f"one per resource, weight {weight.shape} and limit {limit.shape} one per user, "
                              f"reservation {reservation.shape} one per user or per user and resource")
    if previous is not None and np.shape(previous) != demand.shape:
        raise InvalidArgument(f"previous weights {np.shape(previous)} must match demand {demand.shape}")
    for name, values in (("capacity", capacity), ("reservation", reservation), ("limit", limit)):
        bad = ~(values >= 0) | (np.isinf(values) if name != "limit" else False)
        if bad.any():
            raise InvalidArgument(f"{name} must be finite and >= 0 (a limit may be inf): got {values[bad][:3].tolist()}")
    bad = ~((weight > 0) & np.isfinite(weight))
    if bad.any():
        raise InvalidArgument(f"global weights must be finite and above 0: got {weight[bad][:3].tolist()}")
    if np.isnan(demand).any() or (demand < 0).any():
        raise InvalidArgument("demand must be >= 0 (inf = takes all it gets), not NaN or negative")
    return capacity, weight, demand, reservation, limit
