"""The coordinator's behaviour, apart from the wire: validate, change state, publish, account.

Every durable change bumps the generation and tells the listeners (the server's event loop),
which refreshes one snapshot per generation; each storage node's desired state is then built
and serialized once per generation, however many times it is asked for. Runtime state (node
runtimes, usage, connections, the snapshot) has one owner: `self._lock`. Usage and connection
reports stay in memory. Connections are not part of the durable state: each node's connection
part is appended to its desired state, and a change (`publish_connections`, once per burst of
reports) re-sends the state of only the nodes whose part changed, at the same generation.
"""

import collections
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from vnode_sync import validation
from vnode_sync.coordinator.allocation import Allocator
from vnode_sync.coordinator.config import CoordinatorConfig, StorageNodeConfig
from vnode_sync.coordinator.connection_routes import ConnectionParts, ConnectionRoutes
from vnode_sync.coordinator.policy.admission import check_admission
from vnode_sync.coordinator.desired_state import build_desired_state
from vnode_sync.coordinator.pressure import NodeShareView, PressureBook
from vnode_sync.coordinator.store import StateStore, UserRecord
from vnode_sync.errors import InvalidArgument, NotFound
from vnode_sync.security.audit import AUDIT_LOGGER
from vnode_sync.wire import vnode_pb2 as pb

log = logging.getLogger(__name__)
audit = logging.getLogger(AUDIT_LOGGER)

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


@dataclass(frozen=True)
class Snapshot:
    """What every node's desired state of one generation is built from (read once per generation)."""

    generation: int
    users: tuple[UserRecord, ...]
    names: frozenset[str] = frozenset()   # of users: reports check theirs against it, once per report


class Cluster:
    def __init__(self, config: CoordinatorConfig, store: StateStore):
        self.config = config
        self.store = store
        self._lock = threading.RLock()
        self._nodes: dict[str, NodeRuntime] = {n.node_id: NodeRuntime() for n in config.storage_nodes}
        self._node_config_of = {n.node_id: n for n in config.storage_nodes}
        self._connections: dict[str, list[pb.ConnectionOwner]] = {}  # reporter -> its connections
        self._connections_changed = False
        self._routes = ConnectionRoutes(config.storage_nodes)
        self._connection_parts = ConnectionParts()
        self._listeners: list[Callable[[int], None]] = []
        self._store_id = store.store_id()
        self._unknown_users_logged: set[str] = set()
        # The YAML seeds a new store only; afterwards the database is the truth (no silent reseed).
        if store.created:
            self._seed_users()
        self._generation = store.generation()
        self._snapshot = Snapshot(-1, ())
        # (generation, devices) -> serialized DesiredState without node_id; node_id -> (generation, bytes)
        self._templates: dict[tuple[int, tuple], tuple[pb.DesiredState, bytes]] = {}
        self._node_states: dict[str, tuple[int, bytes]] = {}
        # node_id -> (state bytes, connection part, allocation sequence, the message a stream sends)
        self._messages: dict[str, tuple[bytes, bytes, int, bytes]] = {}
        self._node_id_parts = {n.node_id: pb.DesiredState(node_id=n.node_id).SerializeToString()
                               for n in config.storage_nodes}
        self._targets: dict[tuple[int, tuple], dict[str, tuple[int, int]]] = {}
        # The work-conserving policy's in-memory allocations (None: Algorithm 1 only, as the paper).
        self.allocator = Allocator(config) if config.policy.allocation == "work-conserving" else None
        self.allocation_wanted: Callable[[], None] = lambda: None   # set by the control loop: tick now
        self.pressure = PressureBook()   # held time per (node, user), for the Pressure RPC and metrics

    def _seed_users(self) -> None:
        for seed in self.config.users:
            if self.store.seed_user(seed.name, seed.uid, seed.priority, seed.active):
                log.info("user %s created from config (priority %d)", seed.name, seed.priority)

    # ---- publishing --------------------------------------------------------

    def generation(self) -> int:
        with self._lock:
            return self._generation

    def add_listener(self, listener: Callable[[int], None]) -> None:
        """`listener(generation)` is called (from the thread that made the change) after every bump."""
        self._listeners.append(listener)

    def _published(self, generation: int) -> int:
        with self._lock:
            if generation <= self._generation:
                return self._generation
            self._generation = generation
        for listener in self._listeners:
            listener(generation)
        return generation

    def refresh_snapshot(self) -> Snapshot:
        """Read users once for the current generation (a blocking store read: call it off the event loop)."""
        generation = self.generation()
        if self._snapshot.generation == generation:
            return self._snapshot
        users = tuple(self.store.users())
        with self._lock:
            if generation > self._snapshot.generation:
                self._snapshot = Snapshot(generation, users, frozenset(u.name for u in users))
                self._templates = {k: v for k, v in self._templates.items() if k[0] == generation}
            return self._snapshot

    def snapshot(self) -> Snapshot:
        with self._lock:
            return self._snapshot

    def _template(self, snapshot: Snapshot, node: StorageNodeConfig) -> tuple[pb.DesiredState, bytes]:
        """Nodes with the same devices share one desired state apart from node_id: built once."""
        key = (snapshot.generation, node.devices)
        with self._lock:
            if key not in self._templates:
                template = build_desired_state(snapshot.generation, node.model_copy(update={"id": ""}),
                                               snapshot.users, self.config.policy)
                template.store_id = self._store_id
                self._templates[key] = (template, template.SerializeToString())
            return self._templates[key]

    def desired_state_bytes(self, node_id: str) -> tuple[int, bytes]:
        """This node's serialized desired state of the latest snapshot: built once per generation."""
        node = self._node_config(node_id)
        with self._lock:
            snapshot = self._snapshot
            cached = self._node_states.get(node_id)
            if cached and cached[0] == snapshot.generation:
                return cached
            _, template = self._template(snapshot, node)
            # A serialized protobuf message followed by another is their merge: the template plus node_id.
            state = (snapshot.generation, template + self._node_id_parts[node_id])
            self._node_states[node_id] = state
            return state

    def stream_message(self, node_id: str) -> bytes:
        """What the node's stream sends: its desired state with its connections and the current
        allocation appended. The same object is returned until one of them changes, so a stream
        tells "nothing new" by identity."""
        _, state = self.desired_state_bytes(node_id)
        with self._lock:
            connections = self._routes.part(self._connection_parts, node_id)
        sequence, allocation = self.allocator.node_allocation(node_id) if self.allocator else (0, b"")
        cached = self._messages.get(node_id)
        if cached and cached[0] is state and cached[1] == connections and cached[2] == sequence:
            return cached[3]
        message = state + connections + allocation
        self._messages[node_id] = (state, connections, sequence, message)
        return message

    def desired_state(self, node_id: str) -> pb.DesiredState:
        self.refresh_snapshot()
        return pb.DesiredState.FromString(self.stream_message(node_id))

    def _node_config(self, node_id: str) -> StorageNodeConfig:
        node = self._node_config_of.get(node_id)
        if node is None:
            known = ", ".join(n.node_id for n in self.config.storage_nodes[:20]) or "none"
            raise NotFound(f"storage node {node_id!r} is not configured on the coordinator (configured: {known}"
                           f"{', ...' if len(self.config.storage_nodes) > 20 else ''})")
        return node

    # ---- users -------------------------------------------------------------

    def users(self) -> list[UserRecord]:
        return self.store.users()

    def add_user(self, name: str, uid: int, priority: int, active: bool, actor: str) -> UserRecord:
        validation.user_name(name)
        validation.uid(uid)
        validation.priority(priority)
        self._uid_free_for(name, uid)
        self._published(self.store.add_user(name, uid, priority, active))
        audit.info("actor=%s action=add-user user=%s uid=%d priority=%d active=%s",
                   actor, name, uid, priority, active)
        return self.store.user(name)

    def set_priority(self, name: str, priority: int, actor: str) -> UserRecord:
        validation.user_name(name)
        validation.priority(priority)
        generation, old = self.store.set_priority(name, priority)
        self._published(generation)
        audit.info("actor=%s action=set-priority user=%s old=%d new=%d generation=%d",
                   actor, name, old, priority, generation)
        return self.store.user(name)

    def set_active(self, name: str, active: bool, actor: str) -> UserRecord:
        validation.user_name(name)
        generation, old = self.store.set_active(name, active)
        self._published(generation)
        audit.info("actor=%s action=%s user=%s old=%s new=%s generation=%d", actor,
                   "activate" if active else "deactivate", name, old, active, generation)
        return self.store.user(name)

    def set_reservation(self, name: str, bps: int, actor: str) -> UserRecord:
        """A floor (bytes/s, on each node the user uses) for the work-conserving policy; admitted only
        if every user's reservations still fit each device's capacity."""
        validation.user_name(name)
        validation.bandwidth(bps, "reservation")
        if name not in {u.name for u in self.store.users()}:
            raise NotFound(f"unknown user {name!r}")
        self._admit(name, bps)
        generation, old = self.store.set_reservation(name, bps)
        self._published(generation)
        audit.info("actor=%s action=set-reservation user=%s old=%d new=%d generation=%d",
                   actor, name, old, bps, generation)
        return self.store.user(name)

    def _admit(self, name: str, bps: int) -> None:
        """Refuse a floor for `name` that would make the reservations overbook a device."""
        reservations = {u.name: u.effective_reservation for u in self.store.users() if u.name != name}
        reservations[name] = bps
        for direction in ("read_bps", "write_bps"):
            check_admission({f"{n.node_id}:{d.name}": getattr(d, direction)
                             for n in self.config.storage_nodes for d in n.devices}, reservations)

    def set_limit(self, name: str, bps: int, actor: str) -> UserRecord:
        validation.user_name(name)
        validation.bandwidth(bps, "limit")
        generation, old = self.store.set_limit(name, bps)
        self._published(generation)
        audit.info("actor=%s action=set-limit user=%s old=%d new=%d generation=%d", actor, name, old, bps, generation)
        return self.store.user(name)

    def _uid_free_for(self, name: str, uid: int) -> None:
        """A uid names one user: a second user with it would be charged to the first's VNode."""
        holder = self.store.holder_of_uid(uid, name)
        if holder is not None:
            raise InvalidArgument(f"uid {uid} is already held by user {holder!r}; "
                                  f"one uid per user (remove {holder!r} first)")

    def _known_users(self, names, what: str) -> set[str]:
        """The names among `names` that are users; unknown ones are logged once each and ignored,
        names that cannot be users refused (InvalidArgument)."""
        known = self.refresh_snapshot().names  # read once per generation, not per report
        for name in set(names) - known - {""}:
            validation.user_name(name)   # garbage is refused; known names were checked when added
            if name not in self._unknown_users_logged:
                self._unknown_users_logged.add(name)
                log.warning("%s names unknown user %r: ignored (logged once)", what, name)
        return known

    def remove_user(self, name: str, actor: str) -> None:
        validation.user_name(name)
        old = self.store.user(name)
        generation = self.store.remove_user(name)
        self._published(generation)
        audit.info("actor=%s action=remove-user user=%s old_priority=%d generation=%d",
                   actor, name, old.priority, generation)

    # ---- jobs --------------------------------------------------------------

    def job_priority(self, requested: int, account: str, queue: str) -> int | None:
        """A job's priority by policy; None means the user's own priority applies."""
        policy = self.config.policy
        if requested:
            clamped = min(max(requested, policy.job_priority_min), policy.job_priority_max)
            if clamped != requested:
                log.warning("requested job priority %d clamped to %d (allowed %d..%d)", requested, clamped,
                            policy.job_priority_min, policy.job_priority_max)
            return clamped
        if queue in policy.queue_priorities:
            return policy.queue_priorities[queue]
        if account in policy.account_priorities:
            return policy.account_priorities[account]
        return None

    def start_job(self, job_id: str, user: str, uid: int, node: str, account: str, queue: str,
                  requested_priority: int, actor: str, reservation_bps: int = 0,
                  limit_bps: int = 0) -> tuple[UserRecord, int]:
        validation.label(job_id, "job id")
        validation.user_name(user)
        validation.uid(uid)
        validation.node_id(node)
        validation.label(account, "account", required=False)
        validation.label(queue, "queue", required=False)
        if requested_priority:   # 0: the job asked for nothing
            validation.priority(requested_priority)
        validation.bandwidth(reservation_bps, "job reservation")
        validation.bandwidth(limit_bps, "job limit")
        if reservation_bps:
            try:
                self._admit(user, reservation_bps)
            except InvalidArgument as e:   # a job is never refused for its floor: it runs without it
                log.warning("job %s of user %s: its reservation is not admitted (%s); the job runs without it",
                            job_id, user, e)
                reservation_bps = 0
        self._uid_free_for(user, uid)
        priority = self.job_priority(requested_priority, account, queue)
        generation = self.store.start_job(job_id, node, user, uid, priority, self.config.policy.default_priority,
                                          reservation_bps, limit_bps)
        self._published(generation)
        record = self.store.user(user)
        audit.info("actor=%s action=start-job job=%s node=%s user=%s job_priority=%s effective=%d "
                   "job_reservation=%d job_limit=%d", actor, job_id, node, user, priority, record.effective_priority,
                   reservation_bps, limit_bps)
        return record, priority or record.priority

    def end_job(self, job_id: str, node: str, actor: str) -> UserRecord | None:
        validation.label(job_id, "job id")
        if node:   # "": the job on every node
            validation.node_id(node)
        generation, user = self.store.end_job(job_id, node)
        self._published(generation)
        audit.info("actor=%s action=end-job job=%s node=%s user=%s", actor, job_id, node, user)
        return self.store.user(user) if user else None

    def reconcile_jobs(self, node: str, running: set[str], actor: str) -> list[str]:
        if not node:
            raise InvalidArgument("ReconcileJobs needs a source (the node or batch system whose jobs these are); "
                                  "an empty source would drop every node's jobs")
        validation.node_id(node)
        for job_id in running:
            validation.label(job_id, "job id")
        dropped = self.store.confirm_running_jobs(node, running)
        if dropped:
            self._published(self.store.generation())
            audit.info("actor=%s action=reconcile-jobs node=%s dropped=%s", actor, node, ",".join(dropped))
        return dropped

    def expire_jobs(self) -> None:
        expired = self.store.expire_jobs(time.time() - self.config.policy.job_expiry_seconds)
        if expired:
            self._published(self.store.generation())
            audit.info("actor=coordinator action=expire-jobs jobs=%s",
                       ",".join(f"{j}@{n}" for j, n in expired))

    # ---- agents ------------------------------------------------------------

    def register_node(self, node_id: str, devices: list[pb.Device], backend: str, limitations: list[str]) -> int:
        node = self._node_config(node_id)
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
        return self.generation()

    def stream_opened(self, node_id: str) -> None:
        self._node_config(node_id)
        with self._lock:
            self._nodes[node_id].streams += 1
            self._nodes[node_id].last_seen = time.time()

    def stream_closed(self, node_id: str) -> None:
        with self._lock:
            self._nodes[node_id].streams -= 1

    def report_usage(self, report: pb.UsageReport) -> int:
        """Kept in memory (no generation); usage of users the coordinator does not know is ignored."""
        self._node_config(report.node_id)
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
            return self._generation

    def report_connections(self, reporter: str, connections: list[pb.ConnectionOwner]) -> int:
        """Kept in memory; `publish_connections` sends any number of changes at once."""
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
            return self._generation

    def connections_changed(self) -> bool:
        with self._lock:
            return self._connections_changed

    def publish_connections(self) -> set[str] | None:
        """Every connection change since the last call, at once: the nodes whose connection part
        changed (None: every node). No durable transaction and no new generation: connections are
        runtime state, re-sent to the nodes they concern."""
        with self._lock:
            if not self._connections_changed:
                return set()
            self._connections_changed = False
            old = self._connection_parts
            self._connection_parts = self._routes.parts(c for owners in self._connections.values() for c in owners)
            return self._routes.changed(old, self._connection_parts)

    # ---- reading -----------------------------------------------------------

    def node_runtime(self, node_id: str) -> NodeRuntime:
        """A copy, consistent at the time of the call."""
        with self._lock:
            r = self._nodes[node_id]
            return NodeRuntime(r.backend, list(r.limitations), list(r.devices), r.applied_generation, r.last_seen,
                               r.streams, list(r.errors), {}, set(r.held_at_limit))

    def measured_rate(self, node_id: str, user: str) -> UserNodeRate:
        with self._lock:
            samples = self._nodes[node_id].usage.get(user)
            return _rate(list(samples) if samples else [], time.time())

    def measured_rates(self, node_id: str) -> dict[str, UserNodeRate]:
        """Every user's measured rate on this node that is not zero."""
        now = time.time()
        with self._lock:
            usage = {user: list(samples) for user, samples in self._nodes[node_id].usage.items()}
        rates = {user: _rate(samples, now) for user, samples in usage.items()}
        return {user: rate for user, rate in rates.items() if rate.read_bps or rate.write_bps}

    def targets(self, node_id: str) -> dict[str, tuple[int, int]]:
        """user -> (read, write) bytes/s this node's desired state gives them, of the latest snapshot;
        computed once per generation for all nodes with the same devices."""
        snapshot = self.snapshot()
        node = self._node_config(node_id)
        key = (snapshot.generation, node.devices)
        with self._lock:
            cached = self._targets.get(key)
        if cached is None:
            template, _ = self._template(snapshot, node)
            cached = {v.user: (sum(s.read_bps for s in v.shares), sum(s.write_bps for s in v.shares))
                      for v in template.vnodes}
            with self._lock:
                self._targets = {k: v for k, v in self._targets.items() if k[0] == snapshot.generation}
                self._targets[key] = cached
        return cached


    def share_views(self) -> list[NodeShareView]:
        """Per node: measured rates, and what each user may use there now (allocation or target)."""
        views = []
        for node in self.config.storage_nodes:
            allowed = dict(self.targets(node.node_id))
            if self.allocator is not None:
                allowed.update({user: (given.allocated_read_bps, given.allocated_write_bps)
                                for user, given in self.allocator.status(node.node_id).items()})
            rates = {user: (r.read_bps, r.write_bps) for user, r in self.measured_rates(node.node_id).items()}
            views.append(NodeShareView(node.node_id, rates, allowed))
        return views


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
