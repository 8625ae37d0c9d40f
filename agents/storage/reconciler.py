"""Level-triggered reconcile: make the cgroups match the desired state, whatever happened before.

Each pass compares desired with actual and fixes the difference: VNodes made or
removed, limits set, handler threads placed, threads no longer ours released.
"""

import collections
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from vnode_sync.agents.handlers.base import HandlerDiscovery, HandlerThread, UserDirectory, discovery_not_enforcing
from vnode_sync.agents.storage.demand import DemandEstimator, VNodeDemand
from vnode_sync.agents.storage.demand_summary import Entry, SummaryBuilder
from vnode_sync.errors import ThreadGone, VNodeSyncError
from vnode_sync.kernel.backend import (DEFAULT_VNODE, HELD_MEASURED, LimitEnforcer, ThreadPlacer, VNodeUsage,
                                       user_of_vnode, vnode_name)
from vnode_sync.kernel.devices import device_number
from vnode_sync.kernel.types import WHOLE_NODE, DeviceCapacity, DeviceLimits, DeviceNumber, Share, Shares
from vnode_sync.shares import NODE
from vnode_sync.wire import vnode_pb2 as pb

log = logging.getLogger(__name__)


def user_directory_of(state: pb.DesiredState) -> UserDirectory:
    return UserDirectory(users_by_uid={u.uid: u.name for u in state.users},
                    active_users={v.user for v in state.vnodes},
                    # A job's connection goes to its job's VNode (set by the coordinator), else its user's.
                    connections={(c.client_address, c.client_port): c.vnode or c.user for c in state.connections})


_HELD_SOURCE = {HELD_MEASURED: pb.HELD_SOURCE_MEASURED}


@dataclass(frozen=True)
class UsageSample:
    """One usage report's view of every VNode, kept for the metrics endpoint to read at scrape time."""

    sampled_at: float                         # unix seconds
    usage: dict[str, VNodeUsage]              # VNode -> its counters
    held: dict[str, VNodeDemand]              # VNodes with a limit (or a measured wait)
    demand: dict[str, VNodeDemand]            # every VNode: rates, held, demand per device and direction
    limits: dict[str, list[DeviceLimits]]     # VNode -> the limits in force (static shares or allocation)
    node_limits: dict[str, Shares]            # VNode -> its share of the node, where the backend shares the node
    threads: dict[str, int]                   # VNode -> handler threads placed there (placing backends)


@dataclass
class Reconciler:
    backend: LimitEnforcer
    discovery: HandlerDiscovery
    devices: dict[str, DeviceNumber]          # device path -> MAJ:MIN on this host
    state: pb.DesiredState | None = None
    users: UserDirectory = field(default_factory=UserDirectory)
    applied_generation: int = 0
    errors: list[str] = field(default_factory=list)
    # where we put each handler (TID, or PID on a per-process backend)
    placed: dict[int, str] = field(default_factory=dict)
    # processes a per-process backend must not move (they serve several users), with the reason
    shared_processes: dict[int, str] = field(default_factory=dict)
    # VNode -> the limits of the last pass, as the desired state gives them; and its share of the node as a
    # whole, kept where the backend shares the node (what it enforces there)
    limits: dict[str, list[DeviceLimits]] = field(default_factory=dict)
    node_limits: dict[str, Shares] = field(default_factory=dict)
    demand: DemandEstimator = field(default_factory=DemandEstimator)
    summaries: SummaryBuilder = field(default_factory=SummaryBuilder)
    last_sample: UsageSample | None = None
    passes: int = 0            # reconcile passes run, and the errors they found (cumulative, for metrics)
    errors_found: int = 0
    _placement_listeners: list[Callable[[HandlerThread], None]] = field(default_factory=list, init=False, repr=False)
    # Why the backend did not enforce the shares at the last pass (its own word); None: it did.
    not_enforcing: str | None = None
    # What it enforced with less than it should at the last pass (the backend's own lines, then the disks'
    # settings missing); []: nothing.
    degraded: list[str] = field(default_factory=list)
    # The disk settings the site requires and this host lacks, one line each (kernel/required_disk_settings.py).
    disk_checks: Callable[[], list[str]] = list

    def on_first_placement(self, listener: Callable[[HandlerThread], None]) -> None:
        """`listener(thread)` the first time each handler thread is placed (capture latency is timed there)."""
        self._placement_listeners.append(listener)

    def _device(self, name: str) -> DeviceNumber | None:
        if name not in self.devices:
            try:
                self.devices[name] = device_number(name)
            except VNodeSyncError as e:
                self.errors.append(str(e))
                return None
        return self.devices[name]

    def _limits(self, spec: pb.VNodeSpec) -> tuple[list[DeviceLimits], Shares]:
        """The spec's device shares as the kernel takes them, and its share of the node as a whole."""
        limits, node = [], Shares()
        for share in spec.shares:
            if share.device == NODE:
                node = Shares(*(Share(s.weight, s.floor_bps, s.ceiling_bps) for s in (share.read, share.write)))
                continue
            dev = self._device(share.device)
            if dev is not None:
                # BFQ's one weight for both directions (agents/storage/allocation.py made them equal).
                limits.append(DeviceLimits(dev, share.read.ceiling_bps, share.write.ceiling_bps,
                                           share.read.ceiling_iops, share.write.ceiling_iops,
                                           round(max(share.read.weight, share.write.weight))))
        return limits, node

    def _capacities(self, state: pb.DesiredState) -> list[DeviceCapacity]:
        capacities = []
        for device in state.devices:
            dev = self._device(device.name)
            if dev is not None:
                capacities.append(DeviceCapacity(dev, device.read_bps, device.write_bps))
        return capacities

    def apply(self, state: pb.DesiredState) -> None:
        """A full pass against `state` (also used for periodic resync with the same state)."""
        self.errors = []
        self.state, self.users = state, user_directory_of(state)
        desired = {vnode_name(v.user): v for v in state.vnodes}
        desired[DEFAULT_VNODE] = state.default_vnode
        self.backend.set_capacities(self._capacities(state))
        self.backend.setup()
        self.limits, self.node_limits = {}, {}
        for vnode, spec in desired.items():
            try:
                # A job's VNode carries its user's uid and its job id: a backend matching I/O by identity
                # (Lustre TBF) needs both to tell the job's I/O from its user's.
                self.backend.ensure_vnode(vnode, spec.uid if spec.user else None, job=spec.job)
                self.limits[vnode], node = self._limits(spec)
                if self.backend.shares_per_node:
                    self.node_limits[vnode] = node
                self.backend.apply_limits(vnode, self.limits[vnode], node)
            except VNodeSyncError as e:
                self.errors.append(f"{vnode}: {e}")
        self.place_handlers()
        self._release_strays(set(desired))
        for vnode in set(self.backend.vnodes()) - set(desired):
            log.info("removing VNode %s (user %s is no longer active)", vnode, user_of_vnode(vnode))
            try:
                self.backend.remove_vnode(vnode)
            except VNodeSyncError as e:
                self.errors.append(f"{vnode}: {e}")
        try:
            self.backend.commit(self.users.users_by_uid, self.users.connections)
        except VNodeSyncError as e:
            self.errors.append(f"{self.backend.name}: {e}")
        self.not_enforcing = self.backend.not_enforcing() or (
            discovery_not_enforcing(self.discovery) if self.backend.placer is not None else None)
        degraded = self.backend.degraded() + self.disk_checks()
        if degraded != self.degraded:
            for line in degraded:
                log.warning("degraded: %s", line)
            self.degraded = degraded
        if self.state.generation != self.applied_generation:
            log.info("applied generation %d: %d VNodes, %d handler threads placed, %d errors",
                     state.generation, len(desired), len(self.placed), len(self.errors))
        for error in self.errors:
            log.warning("reconcile: %s", error)
        self.passes += 1
        self.errors_found += len(self.errors)
        self.applied_generation = state.generation

    def _target(self, user: str | None) -> str:
        return vnode_name(user) if user and user in self.users.active_users else DEFAULT_VNODE

    def place_handlers(self) -> int:
        """Capture pass: put every handler thread in its user's VNode. Returns how many moved.

        Backends without a placer (Lustre TBF, the DataNode's throttler) find the user themselves."""
        placer = self.backend.placer
        if self.state is None or placer is None:
            return 0
        moved = 0
        seen = set()
        threads = self.discovery.scan(self.users)
        if not placer.places_threads:
            threads = self._movable_processes(placer, threads)
        for thread in threads:
            key = thread.tid if placer.places_threads else thread.pid
            seen.add(key)
            if thread.inherits and thread.user is None:
                target = self._inherited_target(placer, key)
            else:
                target = self._target(thread.user)
            if self.placed.get(key) == target:
                continue
            try:
                placer.place(target, key)
            except ThreadGone:
                continue  # ended while we looked
            except VNodeSyncError as e:
                self.errors.append(f"placing {key} in {target}: {e}")
                continue
            first = key not in self.placed
            self.placed[key] = target
            moved += 1
            if first:
                for listener in self._placement_listeners:
                    listener(thread)
        for gone in set(self.placed) - seen:
            del self.placed[gone]
        return moved

    def _movable_processes(self, placer: ThreadPlacer, threads: list[HandlerThread]) -> list[HandlerThread]:
        """On a per-process backend, the handler threads of processes that serve one user only.

        A process that serves several users is never moved (it would charge every user to one
        VNode); one placed earlier is released. The reason is logged once and reported."""
        targets: dict[int, set[str]] = {}
        for thread in threads:
            targets.setdefault(thread.pid, set()).add(self._target(thread.user))
        movable = []
        for thread in threads:
            shared = self.discovery.shared_process or len(targets[thread.pid] - {DEFAULT_VNODE}) > 1
            if not shared:
                movable.append(thread)
                continue
            served = sorted(user_of_vnode(t) for t in targets[thread.pid] - {DEFAULT_VNODE})
            reason = (f"process {thread.pid} serves several users ({self.discovery.name} handlers; "
                      f"seen so far: {', '.join(served) or 'none identified'}): {self.backend.name} moves "
                      f"whole processes, so it is not moved; enforce per user inside the server instead "
                      f"(backend datanode-throttle)")
            if thread.pid not in self.shared_processes:
                log.warning("%s", reason)
            self.shared_processes[thread.pid] = reason
            if self.placed.pop(thread.pid, None) is not None:
                try:
                    placer.release(thread.pid)
                except ThreadGone:
                    pass
        self.errors.extend(r for pid, r in self.shared_processes.items() if pid in targets and r not in self.errors)
        return movable

    def _inherited_target(self, placer: ThreadPlacer, key: int) -> str:
        """Where a thread that inherits its creator's VNode belongs: the one it was found in."""
        if key not in self.placed:
            for vnode in self.backend.vnodes():
                try:
                    if key in placer.members(vnode):
                        self.placed[key] = vnode  # already there: nothing to move
                        break
                except VNodeSyncError:
                    continue  # removed between listing and reading
        return self.placed.get(key, DEFAULT_VNODE)

    def _release_strays(self, desired: set[str]) -> None:
        """Threads in our VNodes that are not handlers we placed there go back to the root."""
        placer = self.backend.placer
        if placer is None:
            return
        for vnode in self.backend.vnodes():
            for member in placer.members(vnode):
                want = self.placed.get(member)
                if want == vnode:
                    continue
                try:
                    if want in desired:
                        placer.place(want, member)
                    else:
                        placer.release(member)
                except ThreadGone:
                    continue

    def usage_report(self, node_id: str, only_if_sharp: bool = False) -> pb.UsageReport | None:
        """The demand summary (what moved since the last report, or every entry when it is full), with
        the held time of those held since (all when full).
        `only_if_sharp`: None unless some user's demand moved sharply since the last report
        (demand_summary.SHARP); the demand estimate still takes the sample."""
        names = {dev: name for name, dev in self.devices.items()} | {WHOLE_NODE: NODE}
        try:
            measured_by_vnode = self.backend.usage()
        except VNodeSyncError as e:
            self.errors.append(f"reading usage: {e}")
            measured_by_vnode = {}
        now = time.monotonic()
        demand = self.demand.update(measured_by_vnode, self.limits, now, keep=not only_if_sharp)
        held = {vnode: d for vnode, d in demand.items() if d.source is not None}
        entries = {(user_of_vnode(vnode) or "", names[dev]): Entry(r.rate, w.rate, r.held, w.held, r.demand, w.demand)
                   for vnode, d in demand.items() for dev, (r, w) in d.devices.items() if dev in names}
        if only_if_sharp:
            if not self.summaries.moved_sharply(entries):
                return None
            self.demand.keep_last_look()   # reported: the next interval starts here
        summary = self.summaries.build(entries, now)
        held_listed = self.summaries.held_to_send({user_of_vnode(v) or "": h.seconds for v, h in held.items()},
                                                  summary.full)
        sampled_at = time.time()
        self.last_sample = UsageSample(sampled_at, measured_by_vnode, held, demand, dict(self.limits),
                                       dict(self.node_limits), dict(collections.Counter(self.placed.values())))
        return pb.UsageReport(node_id=node_id, applied_generation=self.applied_generation,
                              sampled_at_unix=sampled_at, errors=self.errors[:20],
                              not_enforcing=self.not_enforcing or "", degraded=self.degraded,
                              held=[pb.HeldTime(user=user_of_vnode(v) or "", held_seconds=h.seconds,
                                                source=_HELD_SOURCE.get(h.source, pb.HELD_SOURCE_ESTIMATED))
                                    for v, h in sorted(held.items()) if (user_of_vnode(v) or "") in held_listed],
                              demand=summary)
