"""What the coordinator knows of the storage agents since it started, in memory, never persisted:
registrations, open streams, the compute agents' reported connections; usage reports are booked in
the usage ledger (usage_ledger.py)."""

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from vnode_sync import validation
from vnode_sync.coordinator.control.node_edge import CAPS_ONLY, Edge
from vnode_sync.coordinator.control.publishing import Publishing
from vnode_sync.coordinator.state.usage_ledger import UsageLedger
from vnode_sync.coordinator.control.job_vnodes import named_jobs
from vnode_sync.errors import InvalidArgument
from vnode_sync.wire import vnode_pb2 as pb

if TYPE_CHECKING:   # numpy is imported only by a work-conserving coordinator
    from vnode_sync.coordinator.control.weight_control import WeightControl

log = logging.getLogger(__name__)


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
    held_at_limit: set[str] = field(default_factory=set)  # users held there in its last report (from the ledger)
    not_enforcing: str = ""   # why the node's backend is not enforcing, as its last report said
    degraded: list[str] = field(default_factory=list)   # what it enforces with less than it should, as reported


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

    def __init__(self, publishing: Publishing, ledger: UsageLedger, weights: "WeightControl | None" = None):
        self.publishing = publishing
        self.ledger = ledger
        self.weights = weights
        self._lock = threading.RLock()
        self._nodes: dict[str, NodeRuntime] = {n.node_id: NodeRuntime()
                                               for n in publishing.config.storage_nodes}
        self._connections: dict[str, list[pb.ConnectionOwner]] = {}  # reporter -> its connections
        self._connections_version = 0   # bumped by every change of them
        self._compute_nodes: set[str] = set()   # every reporter since the start (status: why a job has no VNode)
        self._unknown_users_logged: set[str] = set()

    def set_nodes(self, node_ids) -> None:
        """The storage nodes changed at runtime: a new one starts unknown, a removed one is forgotten."""
        with self._lock:
            self._nodes = {node_id: self._nodes.get(node_id) or NodeRuntime() for node_id in node_ids}

    # ---- storage agents ----------------------------------------------------------

    def register_node(self, node_id: str, devices: list[pb.Device], backend: str, limitations: list[str],
                      edge: Edge = CAPS_ONLY) -> int:
        """`edge`: how the node's backend shares."""
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
        self.publishing.node_registered(node_id, backend)
        if self.weights is not None:
            self.weights.register(node_id, edge)
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
            runtime = self._nodes.get(node_id)
            if runtime is None:   # removed while its stream was open
                return
            runtime.streams -= 1
            gone = runtime.streams <= 0
        if gone and self.weights is not None:
            self.weights.unreachable([node_id])

    def unreachable(self, node_ids) -> list[str]:
        """Those of these nodes with no live stream now."""
        with self._lock:
            return [n for n in node_ids if n in self._nodes and self._nodes[n].streams <= 0]

    def _known_users(self, names, what: str) -> frozenset[str]:
        """The names among `names` that are VNodes here (users, jobs with VNodes), by the in-memory
        snapshot (no store read: this runs on the event loop); unknown ones are ignored and logged once
        each, names that cannot be VNodes refused (InvalidArgument)."""
        snapshot = self.publishing.snapshot()
        current = snapshot.generation == self.publishing.generation()
        for name in set(names) - snapshot.names - {""}:
            validation.vnode_name(name)   # garbage is refused; known names were checked when added
            if validation.JOB_VNODE_SEPARATOR in name:
                # A job's VNode outlives its job (or this coordinator's start) on the storage side until
                # that node applies the next desired state: expected, not worth a line.
                continue
            # A snapshot behind the generation may miss a user just added: logged once it is current.
            if current and name not in self._unknown_users_logged:
                self._unknown_users_logged.add(name)
                log.warning("%s names unknown user %r: ignored (logged once)", what, name)
        return snapshot.names

    def report_usage(self, report: pb.UsageReport) -> int:
        """Kept in memory (no generation); usage of users the coordinator does not know is ignored."""
        self.publishing.nodes[report.node_id]
        known = self._known_users(report.demand.users, f"usage report from {report.node_id}")
        self.ledger.observe(report, known)
        if self.weights is not None:
            self.weights.measured(report.node_id, report.measured_allocation)
        with self._lock:
            runtime = self._nodes[report.node_id]
            runtime.applied_generation = report.applied_generation
            runtime.last_seen = time.time()
            runtime.errors = list(report.errors)
            runtime.not_enforcing = report.not_enforcing
            runtime.degraded = list(report.degraded)
        return self.publishing.generation()

    # ---- compute agents ----------------------------------------------------------

    def report_connections(self, reporter: str, connections: list[pb.ConnectionOwner]) -> int:
        """Kept in memory; `connections` hands any number of changes on at once."""
        validation.node_id(reporter)
        for c in connections:
            validation.user_name(c.user)
            if c.job:
                validation.job_id(c.job)
            if not c.client_address or not 0 < c.client_port < 65536:
                raise InvalidArgument(f"invalid connection {c.client_address!r}:{c.client_port}")
            if not _normalised_address(c.server_address) or not 0 < c.server_port < 65536:
                raise InvalidArgument(f"invalid storage end {c.server_address!r}:{c.server_port} of connection "
                                      f"{c.client_address}:{c.client_port}: need a normalised IP address "
                                      "and a port 1..65535")
        known = self._known_users([c.user for c in connections], f"connection report from {reporter}")
        # Charged to their jobs' VNodes as they are published (publishing.py): a job named here for the
        # first time has none until the next snapshot.
        connections = [c for c in connections if c.user in known]
        self.publishing.jobs_reported(named_jobs(connections))
        with self._lock:
            self._compute_nodes.add(reporter)
            if self._connections.get(reporter, []) != list(connections):
                self._connections[reporter] = list(connections)
                self._connections_version += 1
        return self.publishing.generation()

    def compute_nodes(self) -> frozenset[str]:
        """The compute nodes whose agent has reported since this coordinator started."""
        with self._lock:
            return frozenset(self._compute_nodes)

    def connections_version(self) -> int:
        """How many times the reported connections changed (0: never)."""
        with self._lock:
            return self._connections_version

    def connections(self) -> tuple[int, list[pb.ConnectionOwner]]:
        """(version, every reporter's connections)."""
        with self._lock:
            return self._connections_version, [c for owners in self._connections.values() for c in owners]

    # ---- reading -------------------------------------------------------------------

    def node_runtime(self, node_id: str) -> NodeRuntime:
        """A copy, consistent at the time of the call."""
        with self._lock:
            r = self._nodes.get(node_id) or NodeRuntime()
            runtime = NodeRuntime(r.backend, list(r.limitations), list(r.devices), r.applied_generation,
                                  r.last_seen, r.streams, list(r.errors), not_enforcing=r.not_enforcing,
                                  degraded=list(r.degraded))
        runtime.held_at_limit = self.ledger.held_users(node_id)
        return runtime

    def measured_rates(self, node_id: str) -> dict[str, UserNodeRate]:
        """Every user's measured rate on this node that is not zero (from the usage ledger)."""
        return {user: UserNodeRate(read, write) for user, (read, write) in self.ledger.rates(node_id).items()}


def _normalised_address(text: str) -> bool:
    """The one spelling compute agents report (and `endpoints` are matched in)."""
    try:
        return validation.ip_address(text) == text
    except InvalidArgument:
        return False
