"""What the coordinator knows of the storage agents since it started, in memory, never persisted:
registrations, open streams, usage reports (a short window of counters per node and user, from
which measured rates come) and the compute agents' reported connections."""

import collections
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from vnode_sync import validation
from vnode_sync.coordinator.allocation import Allocator
from vnode_sync.coordinator.pressure import PressureBook
from vnode_sync.coordinator.publishing import Publishing
from vnode_sync.errors import InvalidArgument
from vnode_sync.wire import vnode_pb2 as pb

log = logging.getLogger(__name__)

# Measured rates are taken over this many seconds of usage reports: long enough to
# smooth the throttle's time slices, short enough to follow a priority change.
USAGE_WINDOW_SECONDS = 2.0


@dataclass
class NodeRuntime:
    """What the coordinator knows of a storage node's agent since it started (not persisted)."""

    backend: str = ""
    limitations: list[str] = field(default_factory=list)
    devices: list[pb.Device] = field(default_factory=list)
    applied_generation: int = 0
    last_seen: float = 0.0
    streams: int = 0
    errors: list[str] = field(default_factory=list)
    # user -> deque of (sampled_at, read_bytes, write_bytes), summed over devices
    usage: dict[str, collections.deque] = field(default_factory=dict)
    held_at_limit: set[str] = field(default_factory=set)  # users the backend saw at their limit


@dataclass(frozen=True)
class UserNodeRate:
    read_bps: float
    write_bps: float


def second_agent(streams: int) -> str:
    """What a node with more than one live desired-state stream is flagged with (log, vnodectl nodes)."""
    return (f"{streams} agents hold a desired-state stream as this node: is a second vnode-agent running with "
            "this node id? (one per host is enforced by a lock; another host is not)")


class NodeRuntimes:
    """Every storage node's runtime and every reporter's connections; one owner: `self._lock`."""

    def __init__(self, publishing: Publishing, allocator: Allocator | None, pressure: PressureBook):
        self.publishing = publishing
        self.allocator = allocator
        self.pressure = pressure
        self.allocation_wanted: Callable[[], None] = lambda: None   # set by the control loop: tick now
        self._lock = threading.RLock()
        self._nodes: dict[str, NodeRuntime] = {n.node_id: NodeRuntime()
                                               for n in publishing.config.storage_nodes}
        self._connections: dict[str, list[pb.ConnectionOwner]] = {}  # reporter -> its connections
        self._connections_changed = False
        self._unknown_users_logged: set[str] = set()

    # ---- storage agents ----------------------------------------------------------

    def register_node(self, node_id: str, devices: list[pb.Device], backend: str, limitations: list[str]) -> int:
        node = self.publishing.nodes[node_id]
        configured = {d.name for d in node.devices}
        for device in devices:
            if device.name not in configured:
                raise InvalidArgument(f"device {device.name!r} is not configured for node {node_id!r} "
                                      f"(configured: {', '.join(sorted(configured))})")
        with self._lock:
            runtime = self._nodes[node_id]
            runtime.backend, runtime.limitations, runtime.devices = backend, list(limitations), list(devices)
            runtime.last_seen = time.time()
        for note in limitations:
            log.info("node %s (%s) cannot: %s", node_id, backend, note)
        return self.publishing.generation()

    def stream_opened(self, node_id: str) -> int:
        """Returns the node's live streams: more than one means two agents run as this node."""
        self.publishing.nodes[node_id]
        with self._lock:
            self._nodes[node_id].streams += 1
            self._nodes[node_id].last_seen = time.time()
            return self._nodes[node_id].streams

    def stream_closed(self, node_id: str) -> None:
        with self._lock:
            self._nodes[node_id].streams -= 1

    def _known_users(self, names, what: str) -> set[str]:
        """The names among `names` that are users; unknown ones are logged once each and ignored,
        names that cannot be users refused (InvalidArgument)."""
        known = self.publishing.refresh_snapshot().names  # read once per generation, not per report
        for name in set(names) - known - {""}:
            validation.user_name(name)   # garbage is refused; known names were checked when added
            if name not in self._unknown_users_logged:
                self._unknown_users_logged.add(name)
                log.warning("%s names unknown user %r: ignored (logged once)", what, name)
        return known

    def report_usage(self, report: pb.UsageReport) -> int:
        """Kept in memory (no generation); usage of users the coordinator does not know is ignored."""
        self.publishing.nodes[report.node_id]
        known = self._known_users([u.user for u in report.usage], f"usage report from {report.node_id}")
        if any(u.user and u.user not in known for u in report.usage):
            kept = [u for u in report.usage if not u.user or u.user in known]
            report = pb.UsageReport.FromString(report.SerializeToString())   # the caller's stays as sent
            del report.usage[:]
            report.usage.extend(kept)
        totals: dict[str, list[int]] = {}
        for u in report.usage:
            t = totals.setdefault(u.user, [0, 0])
            t[0] += u.read_bytes
            t[1] += u.write_bytes
        sampled_at = report.sampled_at_unix or time.time()
        if self.allocator is not None and self.allocator.observe(report):
            self.allocation_wanted()
        self.pressure.observe(report, known)
        with self._lock:
            runtime = self._nodes[report.node_id]
            runtime.applied_generation = report.applied_generation
            runtime.last_seen = time.time()
            runtime.errors = list(report.errors)
            runtime.held_at_limit = {u.user for u in report.usage if u.held_at_limit}
            for user, (read, write) in totals.items():
                samples = runtime.usage.setdefault(user, collections.deque())
                if samples and (read < samples[-1][1] or write < samples[-1][2]):
                    samples.clear()  # counters restarted: the VNode was made anew
                samples.append((sampled_at, read, write))
                while len(samples) > 2 and samples[0][0] < sampled_at - USAGE_WINDOW_SECONDS:
                    samples.popleft()
            for gone in set(runtime.usage) - set(totals):
                del runtime.usage[gone]
        return self.publishing.generation()

    # ---- compute agents ----------------------------------------------------------

    def report_connections(self, reporter: str, connections: list[pb.ConnectionOwner]) -> int:
        """Kept in memory; `take_connections` hands any number of changes on at once."""
        validation.node_id(reporter)
        for c in connections:
            validation.user_name(c.user)
            if not c.client_address or not 0 < c.client_port < 65536:
                raise InvalidArgument(f"invalid connection {c.client_address!r}:{c.client_port}")
            if c.server_address and (not _normalised_address(c.server_address) or not 0 < c.server_port < 65536):
                raise InvalidArgument(f"invalid storage end {c.server_address!r}:{c.server_port} of connection "
                                      f"{c.client_address}:{c.client_port}: need a normalised IP address "
                                      "and a port 1..65535")
        known = self._known_users([c.user for c in connections], f"connection report from {reporter}")
        connections = [c for c in connections if c.user in known]
        with self._lock:
            if self._connections.get(reporter, []) != list(connections):
                self._connections[reporter] = list(connections)
                self._connections_changed = True
        return self.publishing.generation()

    def connections_changed(self) -> bool:
        with self._lock:
            return self._connections_changed

    def take_connections(self) -> list[pb.ConnectionOwner] | None:
        """Every reporter's connections if any changed since the last call, else None."""
        with self._lock:
            if not self._connections_changed:
                return None
            self._connections_changed = False
            return [c for owners in self._connections.values() for c in owners]

    # ---- reading -------------------------------------------------------------------

    def node_runtime(self, node_id: str) -> NodeRuntime:
        """A copy, consistent at the time of the call."""
        with self._lock:
            r = self._nodes[node_id]
            return NodeRuntime(r.backend, list(r.limitations), list(r.devices), r.applied_generation, r.last_seen,
                               r.streams, list(r.errors), {}, set(r.held_at_limit))

    def measured_rates(self, node_id: str) -> dict[str, UserNodeRate]:
        """Every user's measured rate on this node that is not zero."""
        now = time.time()
        with self._lock:
            usage = {user: list(samples) for user, samples in self._nodes[node_id].usage.items()}
        rates = {user: _rate(samples, now) for user, samples in usage.items()}
        return {user: rate for user, rate in rates.items() if rate.read_bps or rate.write_bps}


def _normalised_address(text: str) -> bool:
    """The one spelling compute agents report (and `endpoints` are matched in)."""
    try:
        return validation.ip_address(text) == text
    except InvalidArgument:
        return False


def _rate(samples: list, now: float) -> UserNodeRate:
    if len(samples) < 2 or samples[-1][0] <= samples[0][0] or samples[-1][0] < now - 3 * USAGE_WINDOW_SECONDS:
        return UserNodeRate(0.0, 0.0)
    (t0, r0, w0), (t1, r1, w1) = samples[0], samples[-1]
    return UserNodeRate((r1 - r0) / (t1 - t0), (w1 - w0) / (t1 - t0))
