"""The work-conserving control loop's state: measured usage in, per-node allocations out.

Usage reports feed per (user, node, device) rates; every tick estimates each active user's
demand there, runs the cluster-wide weighted max-min (fair_policy.allocate) for reads and for
writes, and keeps a new allocation for a node only if some user's bytes/s moved by more than
the hysteresis. Allocations are in memory: no store transaction, no generation bump; a node's
serialized Allocation is appended to its desired state (a serialized message followed by
another is their merge) and only changed nodes' streams send anything.
"""

import collections
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from vnode_sync.coordinator.config import CoordinatorConfig
from vnode_sync.coordinator.fair_policy import Claim, allocate
from vnode_sync.coordinator.store import UserRecord
from vnode_sync.wire import vnode_pb2 as pb

# A user measured at this fraction of its allocation (or held at its limit by the backend) is
# taken to want more than it has: its demand is unbounded until the max-min says otherwise.
AT_ALLOCATION = 0.85
# Below that, demand is the smoothed rate plus this headroom (> 1/AT_ALLOCATION - 1, so a user
# near its allocation is not squeezed by its own measurement noise).
HEADROOM = 0.25
# Demand below the allocation follows the highest of this many recent rates: one short dip (a
# reader between files, a slow packet) does not give bytes away; a user idle for this many
# reports (1.5 s at the agents' 0.5 s) is.
RECENT_RATES = 3
# A user held at its probe (idle until now) that uses this fraction of it is back: unbounded at
# once, and the report that shows it starts a tick without waiting for the period (interactive
# readers must not wait a control period to get their share).
RETURNING = 0.5
PROBE_LEVEL = 1.5    # an allocation up to this many probes is a probe

# An allocation just raised is not lowered again before it was in force for this long: the
# usage reported meanwhile was measured under the old, lower one.
RAISE_GRACE_SECONDS = 2.5

DIRECTIONS = ("read", "write")


@dataclass
class _Usage:
    sampled_at: float = 0.0
    read_bytes: int = 0
    write_bytes: int = 0
    read_bps: float = 0.0
    write_bps: float = 0.0
    held: bool = False
    pending: list = field(default_factory=list)   # (read, write) bytes/s of each report since the last tick


@dataclass
class _Estimate:
    recent: collections.deque = field(default_factory=lambda: collections.deque(maxlen=RECENT_RATES))
    demand: float = 0.0
    raised_at: float = -math.inf


class DemandEstimator:
    """Demand of one (user, node, device, direction) from its measured rate and its allocation."""

    def __init__(self):
        self._state: dict[tuple, _Estimate] = {}

    def update(self, key: tuple, rates: Sequence[float], allocated: float | None, held: bool, now: float,
               probe: float = 0.0) -> float:
        """`rates`: each report's since the last update, oldest first; none: the demand stands.
        `probe`: the bytes/s an idle user keeps here."""
        est = self._state.setdefault(key, _Estimate())
        if not rates:
            return est.demand
        est.recent.extend(rates)
        rate, latest = rates[-1], max(list(est.recent)[-2:])
        if held or (rate > 0 and allocated is None) or (allocated is not None and latest >= AT_ALLOCATION * allocated) \
                or _returning(max(rates), allocated, probe):
            est.demand = math.inf
        else:
            est.demand = max(est.recent) * (1 + HEADROOM)
            if allocated is not None and now - est.raised_at < RAISE_GRACE_SECONDS:
                est.demand = max(est.demand, allocated)
        return est.demand

    def raised(self, key: tuple, now: float) -> None:
        self._state.setdefault(key, _Estimate()).raised_at = now

    def forget(self, keep: set) -> None:
        for key in set(self._state) - keep:
            del self._state[key]


def _returning(rate: float, allocated: float | None, probe: float) -> bool:
    return allocated is not None and 0 < allocated <= PROBE_LEVEL * probe and rate >= RETURNING * allocated


@dataclass(frozen=True)
class PairStatus:
    allocated_read_bps: int
    allocated_write_bps: int
    demand_read_bps: float
    demand_write_bps: float


class Allocator:
    def __init__(self, config: CoordinatorConfig):
        self.policy = config.policy
        self.nodes = {n.node_id: n for n in config.storage_nodes}
        self._capacity = {d: {(n.node_id, dev.name): float(getattr(dev, f"{d}_bps"))
                              for n in config.storage_nodes for dev in n.devices} for d in DIRECTIONS}
        self._lock = threading.Lock()
        self._usage: dict[tuple[str, str, str], _Usage] = {}     # (user, node, device)
        self._estimator = DemandEstimator()
        self._pushed: dict[tuple[str, str, str, str], int] = {}  # (direction, user, node, device) -> bytes/s
        self._demand: dict[tuple[str, str, str, str], float] = {}
        self._sequence = 0
        self._node_bytes: dict[str, tuple[int, bytes]] = {}
        self.updates: dict[str, int] = {n: 0 for n in self.nodes}

    # ---- input -------------------------------------------------------------

    def observe(self, report: pb.UsageReport) -> bool:
        """A usage report (cumulative counters per user and device): keeps each one's latest rate.
        True if it shows a user held at its probe coming back (a tick should run now)."""
        sampled_at = report.sampled_at_unix or time.time()
        returning = False
        with self._lock:
            for u in report.usage:
                if not u.user:
                    continue
                key = (u.user, report.node_id, u.device)
                usage = self._usage.setdefault(key, _Usage())
                elapsed = sampled_at - usage.sampled_at
                if usage.sampled_at and elapsed > 0 and u.read_bytes >= usage.read_bytes \
                        and u.write_bytes >= usage.write_bytes:
                    usage.read_bps = (u.read_bytes - usage.read_bytes) / elapsed
                    usage.write_bps = (u.write_bytes - usage.write_bytes) / elapsed
                    usage.pending.append((usage.read_bps, usage.write_bps))
                    for direction, rate in zip(DIRECTIONS, (usage.read_bps, usage.write_bps)):
                        resource = (report.node_id, u.device)
                        probe = self.policy.probe_fraction * self._capacity[direction].get(resource, 0.0)
                        returning |= _returning(rate, self._pushed.get((direction, u.user, *resource)), probe)
                usage.sampled_at, usage.read_bytes, usage.write_bytes = sampled_at, u.read_bytes, u.write_bytes
                usage.held = u.held_at_limit
        return returning

    # ---- the tick ----------------------------------------------------------

    def tick(self, users: Sequence[UserRecord], now: float | None = None) -> set[str]:
        """One control step; returns the nodes whose allocation changed (their streams must send)."""
        now = time.time() if now is None else now
        active = [u for u in users if u.active]
        claims = {u.name: Claim(weight=u.effective_priority, reservation=float(u.effective_reservation),
                                limit=float(u.limit_bps) if u.limit_bps else math.inf) for u in active}
        with self._lock:
            # Only rates reported since the last tick are news; without one, the estimate stands.
            usage = {k: ([r for r, _ in v.pending], [w for _, w in v.pending], v.held)
                     for k, v in self._usage.items() if v.pending}
            for v in self._usage.values():
                v.pending = []
        new: dict[tuple[str, str, str, str], float] = {}
        keep = set()
        for index, direction in enumerate(DIRECTIONS):
            capacity = {r: c for r, c in self._capacity[direction].items() if c > 0}
            demand = {}
            for user in claims:
                for resource in capacity:
                    key = (direction, user, *resource)
                    rates, held = [], False
                    if (user, *resource) in usage:
                        measured = usage[(user, *resource)]
                        rates, held = measured[index], measured[2]
                    elif key not in self._demand:
                        rates = [0.0]     # never reported: a VNode the agent has not made yet
                    demand[(user, resource)] = self._estimator.update(
                        key, rates, self._pushed.get(key), held, now, self.policy.probe_fraction * capacity[resource])
                    self._demand[key] = demand[(user, resource)]
                    keep.add(key)
            for (user, resource), value in allocate(capacity, claims, demand, self.policy.probe_fraction).items():
                new[(direction, user, *resource)] = value
        self._estimator.forget(keep)
        self._demand = {k: v for k, v in self._demand.items() if k in keep}
        return self._publish(new, now)

    def _moved(self, key: tuple, value: float) -> bool:
        old = self._pushed.get(key)
        if old is None:
            return True
        capacity = self._capacity[key[0]][(key[2], key[3])]
        return abs(value - old) > max(self.policy.hysteresis * old, 0.01 * capacity)

    def _publish(self, new: dict[tuple[str, str, str, str], float], now: float) -> set[str]:
        changed = {key[2] for key, value in new.items() if self._moved(key, value)}
        changed |= {key[2] for key in self._pushed if key not in new}   # a user left
        for key, value in new.items():
            if key[2] in changed:
                if value > self._pushed.get(key, 0):
                    self._estimator.raised(key, now)
        self._pushed = {k: v for k, v in self._pushed.items() if k[2] not in changed}
        self._pushed.update({k: max(1, int(v)) for k, v in new.items() if k[2] in changed})
        with self._lock:
            for node in changed:
                self._sequence += 1
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
