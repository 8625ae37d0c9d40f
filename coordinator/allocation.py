"""The work-conserving control loop's state: measured usage in, per-node allocations out.

Usage reports feed per (user, node, device) rates; every tick estimates each active user's
demand there, runs the cluster-wide weighted max-min (policy.exact_max_min.allocate) for reads and for
writes, and keeps a new allocation for a node only if some user's bytes/s moved by more than
the hysteresis. Allocations are in memory: no store transaction, no generation bump; a node's
serialized Allocation is appended to its desired state (a serialized message followed by
another is their merge) and only changed nodes' streams send anything.
"""

import collections
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from vnode_sync.coordinator.config import CoordinatorConfig
from vnode_sync.coordinator.policy.exact_max_min import Claim, allocate
from vnode_sync.coordinator.store import UserRecord
from vnode_sync.coordinator.usage_ledger import Sample
from vnode_sync.wire import vnode_pb2 as pb

# A user measured at this fraction of its allocation (the mean of its last two reports), or held at
# its limit by the backend, is taken to want more than it has: its demand is unbounded until the
# max-min says otherwise (so a user given more takes it at once: work conservation).
AT_ALLOCATION = 0.85
# Below that, demand is the highest rate of the last PEAK_SECONDS plus this headroom (> 1/AT_ALLOCATION
# - 1, so a user near its allocation is not squeezed by its own measurement noise).
HEADROOM = 0.25
# Long enough that a steady reader's own noise (HDFS reads sampled every 0.25 s vary by +-20%) stays
# below AT_ALLOCATION of what its peak gave it, so its allocation does not flip between its demand
# and unbounded; short enough that a user who slows down gives the rest away within seconds.
PEAK_SECONDS = 3.0
# A user that is not idle keeps its allocation unless its demand fell below it by more than this: the
# peak of a noisy rate drifts as old reports leave the window, and each drift would be a new allocation
# for it and every user on the node.
LOWER_MARGIN = 0.2
# A user whose rates for this long were all below IDLE_LEVEL of its probe is idle: its share is lent
# out at once (a reader between two blocks or a GC pause, some milliseconds, is not; one wrongly taken
# for idle is back within a report and a tick). One report at the agents' default 1 s, two at 0.25 s.
IDLE_SECONDS = 0.5
IDLE_LEVEL = 0.25
# An idle user that reads at this fraction of its allocation (its probe) is back: unbounded at once,
# and the report that shows it starts a tick without waiting for the period (interactive readers must
# not wait a control period for their share). Only an idle user: one that reads steadily at about its
# probe is light, not back, and must not flip between its probe and its full share.
RETURNING = 0.5

# An allocation just raised is not lowered again before it was in force for this long: the
# usage reported meanwhile was measured under the old, lower one. An idle user's is: no limit
# made it stop.
RAISE_GRACE_SECONDS = 2.5

DIRECTIONS = ("read", "write")


@dataclass
class _Pending:
    """The rates reported for one (user, node, device) since the last tick."""

    rates: list = field(default_factory=list)      # (read bytes/s, write bytes/s, seconds), oldest first
    # Per direction: the agent saw the user held and it moved bytes that way (a TBF rule holds reads and
    # writes alike; an unused direction is not held).
    held: list = field(default_factory=lambda: [False, False])
    returning: list = field(default_factory=lambda: [False, False])


@dataclass
class _Estimate:
    rates: collections.deque = field(default_factory=collections.deque)   # (bytes/s, seconds), newest last
    demand: float = 0.0
    idle: bool = True
    raised_at: float = -math.inf


class DemandEstimator:
    """Demand of one (user, node, device, direction) from its measured rates and its allocation."""

    def __init__(self):
        self._state: dict[tuple, _Estimate] = {}

    def update(self, key: tuple, rates: Sequence[tuple[float, float]], allocated: float | None, held: bool,
               now: float, probe: float = 0.0, returning: bool = False) -> float:
        """`rates`: (bytes/s, seconds) of each report since the last update, oldest first; none: the
        demand stands. `probe`: the bytes/s an idle user keeps here. `returning`: a report showed the
        user, idle until then, reading at least RETURNING of its allocation."""
        est = self._state.setdefault(key, _Estimate())
        if not rates and not returning:
            return est.demand
        est.rates.extend(rates)
        span = sum(s for _, s in est.rates)
        while len(est.rates) > 1 and span - est.rates[0][1] >= PEAK_SECONDS:
            span -= est.rates.popleft()[1]
        recent = [r for r, _ in est.rates]
        latest = sum(recent[-2:]) / len(recent[-2:]) if recent else 0.0   # two reports: one noisy one is not enough
        quiet, quiet_peak = _quiet(est.rates, IDLE_LEVEL * probe)
        est.idle = False
        if held or returning or (latest > 0 and allocated is None) or \
                (allocated is not None and latest >= AT_ALLOCATION * allocated):
            est.demand = math.inf
        else:
            if quiet >= IDLE_SECONDS or (allocated is None and not any(recent)):
                est.idle = True
                est.demand = quiet_peak * (1 + HEADROOM)
            else:
                est.demand = max(recent) * (1 + HEADROOM)
                if allocated is not None and est.demand >= (1 - LOWER_MARGIN) * allocated:
                    est.demand = max(est.demand, allocated)   # not idle and not much less: keep what it has
                if allocated is not None and now - est.raised_at < RAISE_GRACE_SECONDS:
                    est.demand = max(est.demand, allocated)
        return est.demand

    def idle(self, key: tuple) -> bool:
        """Was the user idle here at the last update (so a report of it reading means it is back)?"""
        est = self._state.get(key)
        return est is None or est.idle

    def raised(self, key: tuple, now: float) -> None:
        self._state.setdefault(key, _Estimate()).raised_at = now

    def forget(self, keep: set) -> None:
        for key in set(self._state) - keep:
            del self._state[key]


def _quiet(rates: collections.deque, below: float) -> tuple[float, float]:
    """(seconds, highest rate) of the newest reports that were all below `below` bytes/s (all 0 if
    `below` is 0)."""
    seconds, peak = 0.0, 0.0
    for rate, span in reversed(rates):
        if (rate >= below) if below > 0 else (rate > 0):
            break
        seconds, peak = seconds + span, max(peak, rate)
    return seconds, peak


@dataclass(frozen=True)
class PairStatus:
    allocated_read_bps: int
    allocated_write_bps: int
    demand_read_bps: float
    demand_write_bps: float
    weight_read_share: float = 0.0     # nodes that share by weight (weight_control.py): the part sent
    weight_write_share: float = 0.0


class Allocator:
    def __init__(self, config: CoordinatorConfig, next_sequence: Callable[[], int] | None = None,
                 skips: Callable[[str], bool] = lambda node_id: False):
        """`skips(node_id)`: the node is not this allocator's (its edge shares by weight: weight_control.py)."""
        self.policy = config.policy
        self.skips = skips
        self._lock = threading.Lock()
        self._node_bytes: dict[str, tuple[int, bytes]] = {}
        self.updates: dict[str, int] = {}
        self.set_capacities(config)
        self._usage: dict[tuple[str, str, str], _Pending] = {}     # (user, node, device), since the last tick
        self._estimator = DemandEstimator()
        self._pushed: dict[tuple[str, str, str, str], int] = {}  # (direction, user, node, device) -> bytes/s
        self._demand: dict[tuple[str, str, str, str], float] = {}
        self._idle: set[tuple[str, str, str, str]] = set()   # (direction, user, node, device) idle at the last tick
        self._sequence = 0
        self._next_sequence = next_sequence

    def set_capacities(self, config: CoordinatorConfig) -> None:
        """Each device's capacity, of the nodes as they are now (added or removed at runtime too): the next
        tick allocates within them; a removed node's allocation and count are forgotten."""
        self.nodes = {n.node_id: n for n in config.storage_nodes}
        self._capacity = {d: {(n.node_id, dev.name): float(getattr(dev, f"{d}_bps"))
                              for n in config.storage_nodes for dev in n.devices} for d in DIRECTIONS}
        with self._lock:
            self._node_bytes = {k: v for k, v in self._node_bytes.items() if k in self.nodes}
            self.updates = {n: self.updates.get(n, 0) for n in self.nodes}

    # ---- input -------------------------------------------------------------

    def observe(self, node_id: str, samples: Sequence[Sample]) -> bool:
        """The rates one usage report brought (the usage ledger turns reports into samples): kept
        until the next tick. True if one shows a user that was idle reading again (tick now)."""
        returning = False
        with self._lock:
            for sample in samples:
                key = (sample.user, node_id, sample.device)
                pending = self._usage.setdefault(key, _Pending())
                rates = (sample.read_bps, sample.write_bps)
                pending.rates.append((*rates, sample.seconds))
                pending.held = [sample.read_held and rates[0] > 0, sample.write_held and rates[1] > 0]
                for index, (direction, rate) in enumerate(zip(DIRECTIONS, rates)):
                    pushed = self._pushed.get((direction, *key))
                    if pushed and rate >= RETURNING * pushed and (direction, *key) in self._idle:
                        pending.returning[index] = returning = True
        return returning

    # ---- the tick ----------------------------------------------------------

    def tick(self, users: Sequence[UserRecord], now: float | None = None) -> set[str]:
        """One control step; returns the nodes whose allocation changed (their streams must send)."""
        now = time.time() if now is None else now
        active = [u for u in users if u.active]
        claims = {u.name: Claim(weight=u.effective_priority, reservation=float(u.effective_reservation),
                                limit=float(u.effective_limit) if u.effective_limit else math.inf) for u in active}
        with self._lock:
            # Only rates reported since the last tick are news; without one, the estimate stands.
            usage = {k: (v.rates, list(v.held), list(v.returning)) for k, v in self._usage.items()
                     if v.rates or any(v.returning)}
            self._usage = {}
        new: dict[tuple[str, str, str, str], float] = {}
        keep, idle = set(), set()
        for index, direction in enumerate(DIRECTIONS):
            capacity = {r: c for r, c in self._capacity[direction].items() if c > 0 and not self.skips(r[0])}
            demand = {}
            for user in claims:
                for resource in capacity:
                    key = (direction, user, *resource)
                    rates, held, returning = [], False, False
                    if (user, *resource) in usage:
                        pending, helds, returns = usage[(user, *resource)]
                        rates, held, returning = [(r[index], r[2]) for r in pending], helds[index], returns[index]
                    elif key not in self._demand:
                        rates = [(0.0, 0.0)]     # never reported: a VNode the agent has not made yet
                    demand[(user, resource)] = self._estimator.update(
                        key, rates, self._pushed.get(key), held, now, self.policy.probe_fraction * capacity[resource],
                        returning)
                    self._demand[key] = demand[(user, resource)]
                    keep.add(key)
                    if self._estimator.idle(key):
                        idle.add(key)
            for (user, resource), value in allocate(capacity, claims, demand, self.policy.probe_fraction).items():
                new[(direction, user, *resource)] = value
        self._estimator.forget(keep)
        self._demand = {k: v for k, v in self._demand.items() if k in keep}
        with self._lock:
            self._idle = idle
        return self._publish(new, now)

    def _moved(self, key: tuple, value: float) -> bool:
        old = self._pushed.get(key)
        if old is None:
            return True
        capacity = self._capacity[key[0]].get((key[2], key[3]), 0.0)   # 0: removed since the tick began
        return abs(value - old) > max(self.policy.hysteresis * old, 0.01 * capacity)

    def _publish(self, new: dict[tuple[str, str, str, str], float], now: float) -> set[str]:
        changed = {key[2] for key, value in new.items() if self._moved(key, value)}
        changed |= {key[2] for key in self._pushed if key not in new and key[2] in self.nodes}   # a user left
        for key, value in new.items():
            if key[2] in changed:
                if value > self._pushed.get(key, 0):
                    self._estimator.raised(key, now)
        self._pushed = {k: v for k, v in self._pushed.items() if k[2] not in changed and k[2] in self.nodes}
        self._pushed.update({k: max(1, int(v)) for k, v in new.items() if k[2] in changed})
        with self._lock:
            for node in changed:
                self._sequence = self._next_sequence() if self._next_sequence else self._sequence + 1
                self._node_bytes[node] = (self._sequence, pb.DesiredState(
                    allocation=self._message(node, self._sequence)).SerializeToString())
                self.updates[node] = self.updates.get(node, 0) + 1
        return changed

    def _message(self, node: str, sequence: int) -> pb.Allocation:
        per_user: dict[str, dict[str, dict[str, int]]] = {}
        for (direction, user, n, device), value in sorted(self._pushed.items()):
            if n == node:
                per_user.setdefault(user, {}).setdefault(device, {})[f"{direction}_bps"] = value
        return pb.Allocation(sequence=sequence, fallback_seconds=self.policy.fallback_seconds, users=[
            pb.UserAllocation(user=user, shares=[pb.DeviceShare(device=device, **fields)
                                                 for device, fields in sorted(devices.items())])
            for user, devices in sorted(per_user.items())])

    # ---- output ------------------------------------------------------------

    def node_allocation(self, node_id: str) -> tuple[int, bytes]:
        """(sequence, serialized DesiredState holding only the allocation); (0, b"") before the first."""
        with self._lock:
            return self._node_bytes.get(node_id, (0, b""))

    def status(self, node_id: str) -> dict[str, PairStatus]:
        """user -> what it is given and what it is estimated to want on this node (summed over devices)."""
        out: dict[str, list[float]] = {}
        for (direction, user, node, _), value in list(self._pushed.items()):
            if node == node_id:
                out.setdefault(user, [0, 0, 0.0, 0.0])[DIRECTIONS.index(direction)] += value
        for (direction, user, node, _), value in list(self._demand.items()):
            if node == node_id and user in out:
                out[user][2 + DIRECTIONS.index(direction)] += value
        return {u: PairStatus(int(v[0]), int(v[1]), v[2], v[3]) for u, v in out.items()}
