"""The coordinator's behaviour, apart from the wire: validate, change state, publish, account.

Every change bumps the generation and wakes the agents' desired-state streams.
"""

import collections
import logging
import threading
import time
from dataclasses import dataclass, field

from vnode_sync import validation
from vnode_sync.coordinator.config import CoordinatorConfig
from vnode_sync.coordinator.desired_state import build_desired_state
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


class Cluster:
    def __init__(self, config: CoordinatorConfig, store: StateStore):
        self.config = config
        self.store = store
        self._changed = threading.Condition()
        self._nodes: dict[str, NodeRuntime] = {n.node_id: NodeRuntime() for n in config.storage_nodes}
        self._connections: dict[str, list[pb.ConnectionOwner]] = {}  # reporter -> its connections
        self._users_at: tuple[int, list[UserRecord]] = (-1, [])
        for seed in config.users:
            if store.seed_user(seed.name, seed.uid, seed.priority, seed.active):
                log.info("user %s created from config (priority %d)", seed.name, seed.priority)

    # ---- publishing --------------------------------------------------------

    def generation(self) -> int:
        return self.store.generation()

    def _published(self, generation: int) -> int:
        with self._changed:
            self._changed.notify_all()
        return generation

    def wait_for_change(self, known_generation: int, timeout: float) -> int:
        with self._changed:
            self._changed.wait_for(lambda: self.store.generation() != known_generation, timeout)
        return self.store.generation()

    def _users_of_generation(self) -> tuple[int, list[UserRecord]]:
        """Users read once per generation, not once per node: every stream asks at the same time."""
        generation = self.store.generation()
        if self._users_at[0] != generation:
            self._users_at = (generation, self.store.users())
        return self._users_at

    def desired_state(self, node_id: str) -> pb.DesiredState:
        node = self._node_config(node_id)
        connections = [c for owners in self._connections.values() for c in owners]
        generation, users = self._users_of_generation()
        return build_desired_state(generation, node, users, self.config.policy, connections)

    def _node_config(self, node_id: str):
        node = self.config.node(node_id)
        if node is None:
            known = ", ".join(n.node_id for n in self.config.storage_nodes) or "none"
            raise NotFound(f"storage node {node_id!r} is not configured on the coordinator (configured: {known})")
        return node

    # ---- users -------------------------------------------------------------

    def users(self) -> list[UserRecord]:
        return self.store.users()

    def add_user(self, name: str, uid: int, priority: int, active: bool, actor: str) -> UserRecord:
        validation.user_name(name)
        validation.uid(uid)
        validation.priority(priority)
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
                  requested_priority: int, actor: str) -> tuple[UserRecord, int]:
        validation.user_name(user)
        validation.uid(uid)
        if not job_id or len(job_id) > 128:
            raise InvalidArgument(f"invalid job id {job_id!r}: must be 1-128 characters")
        priority = self.job_priority(requested_priority, account, queue)
        generation = self.store.start_job(job_id, node, user, uid, priority, self.config.policy.default_priority)
        self._published(generation)
        record = self.store.user(user)
        audit.info("actor=%s action=start-job job=%s node=%s user=%s job_priority=%s effective=%d",
                   actor, job_id, node, user, priority, record.effective_priority)
        return record, priority or record.priority

    def end_job(self, job_id: str, node: str, actor: str) -> UserRecord | None:
        generation, user = self.store.end_job(job_id, node)
        self._published(generation)
        audit.info("actor=%s action=end-job job=%s node=%s user=%s", actor, job_id, node, user)
        return self.store.user(user) if user else None

    def reconcile_jobs(self, node: str, running: set[str], actor: str) -> list[str]:
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
        runtime = self._nodes[node_id]
        runtime.backend, runtime.limitations, runtime.devices = backend, list(limitations), list(devices)
        runtime.last_seen = time.time()
        for note in limitations:
            log.info("node %s (%s) cannot: %s", node_id, backend, note)
        return self.store.generation()

    def stream_opened(self, node_id: str) -> None:
        self._node_config(node_id)
        self._nodes[node_id].streams += 1
        self._nodes[node_id].last_seen = time.time()

    def stream_closed(self, node_id: str) -> None:
        self._nodes[node_id].streams -= 1

    def report_usage(self, report: pb.UsageReport) -> int:
        self._node_config(report.node_id)
        runtime = self._nodes[report.node_id]
        runtime.applied_generation = report.applied_generation
        runtime.last_seen = time.time()
        runtime.errors = list(report.errors)
        totals: dict[str, list[int]] = {}
        runtime.held_at_limit = {u.user for u in report.usage if u.held_at_limit}
        for u in report.usage:
            t = totals.setdefault(u.user, [0, 0])
            t[0] += u.read_bytes
            t[1] += u.write_bytes
        sampled_at = report.sampled_at_unix or time.time()
        for user, (read, write) in totals.items():
            samples = runtime.usage.setdefault(user, collections.deque())
            if samples and (read < samples[-1][1] or write < samples[-1][2]):
                samples.clear()  # counters restarted: the VNode was made anew
            samples.append((sampled_at, read, write))
            while len(samples) > 2 and samples[0][0] < sampled_at - USAGE_WINDOW_SECONDS:
                samples.popleft()
        for gone in set(runtime.usage) - set(totals):
            del runtime.usage[gone]
        return self.store.generation()

    def report_connections(self, reporter: str, connections: list[pb.ConnectionOwner]) -> int:
        validation.node_id(reporter)
        for c in connections:
            validation.user_name(c.user)
            if not c.client_address or not 0 < c.client_port < 65536:
                raise InvalidArgument(f"invalid connection {c.client_address!r}:{c.client_port}")
        if self._connections.get(reporter) == list(connections):
            return self.store.generation()
        self._connections[reporter] = list(connections)
        return self._published(self.store.touch())

    # ---- reading -----------------------------------------------------------

    def node_runtime(self, node_id: str) -> NodeRuntime:
        return self._nodes[node_id]

    def measured_rate(self, node_id: str, user: str) -> UserNodeRate:
        samples = self._nodes[node_id].usage.get(user)
        if not samples or len(samples) < 2 or samples[-1][0] <= samples[0][0] \
                or samples[-1][0] < time.time() - 3 * USAGE_WINDOW_SECONDS:
            return UserNodeRate(0.0, 0.0)
        (t0, r0, w0), (t1, r1, w1) = samples[0], samples[-1]
        return UserNodeRate((r1 - r0) / (t1 - t0), (w1 - w0) / (t1 - t0))
