"""Each storage node's desired state, built and serialized once per generation.

Every durable change bumps the generation (`published`) and tells the listeners (the server's
event loop), which refresh one snapshot of the users per generation, off the loop; a node's
desired state is then built once per generation for all nodes with the same devices, however
many times it is asked for. Connections are not part of the durable state: each node's
connection part is appended to its desired state, and `publish_connections` re-sends the state
of only the nodes whose part changed, at the same generation.

Which running jobs have VNodes is runtime state too (job_vnodes.py: those a compute agent has named
behind a connection): a job named for the first time raises the reported jobs' revision and tells
the listeners, as a bump does, so the named jobs are read again at the same generation; only if that
changes the jobs with VNodes is there a new snapshot to build and send (`Snapshot.version`). The
connection parts are charged by the snapshot they are sent with: a snapshot whose job VNodes differ
from the last one's charges them again.
"""

import itertools
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from vnode_sync.coordinator.config import CoordinatorConfig, StorageNodeConfig, WORK_CONSERVING
from vnode_sync.coordinator.control.connection_routes import ConnectionParts, ConnectionRoutes
from vnode_sync.coordinator.control.desired_state import build_desired_state
from vnode_sync.coordinator.state.groups import GroupRecord
from vnode_sync.coordinator.state.store import Store, UserRecord
from vnode_sync.coordinator.control.job_vnodes import (JobKey, JobVNode, ReportedJobs, charge_connections,
                                                       job_rows, job_vnodes)
from vnode_sync.errors import NotFound
from vnode_sync.wire import vnode_pb2 as pb

if TYPE_CHECKING:   # numpy is imported only by a work-conserving coordinator
    from vnode_sync.coordinator.control.weight_control import WeightControl


@dataclass(frozen=True)
class Snapshot:
    """What every node's desired state of one generation is built from (read once per generation)."""

    generation: int
    users: tuple[UserRecord, ...]
    names: frozenset[str] = frozenset()   # of users: reports check theirs against it, once per report
    groups: tuple[GroupRecord, ...] = ()  # the tree of weights (none: every user under the root)
    jobs: tuple[JobVNode, ...] = ()       # the running jobs a compute agent named: VNodes (job_vnodes.py)
    job_rows: tuple[UserRecord, ...] = ()  # those of active users, weighed beside them
    revision: int = 0                     # of the reported jobs (job_vnodes.ReportedJobs) it was read at
    build: int = 0                        # one per snapshot whose desired states differ

    @property
    def read_at(self) -> tuple[int, int]:
        """(generation, revision): how fresh it is."""
        return self.generation, self.revision

    @property
    def version(self) -> tuple[int, int]:
        """(generation, build): what the desired states built from it are cached by."""
        return self.generation, self.build

    @property
    def rows(self) -> tuple[UserRecord, ...]:
        """What the weight step shares among: the users and their running jobs' VNodes."""
        return self.users + self.job_rows


class StorageNodes:
    """The configured storage nodes by id; an unknown id is refused in one line that lists some known ones.
    A set of node ids too (`in`): the access policy's list of storage nodes."""

    def __init__(self, config: CoordinatorConfig):
        self.replace(config)

    def replace(self, config: CoordinatorConfig) -> None:
        """In place: whoever holds this object (the access policy) sees the new nodes."""
        self._configured = config.storage_nodes
        self._by_id = {n.node_id: n for n in config.storage_nodes}

    def __getitem__(self, node_id: str) -> StorageNodeConfig:
        node = self._by_id.get(node_id)
        if node is None:
            known = ", ".join(n.node_id for n in self._configured[:20]) or "none"
            raise NotFound(f"storage node {node_id!r} is not configured on the coordinator (configured: {known}"
                           f"{', ...' if len(self._configured) > 20 else ''})")
        return node

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._by_id


@dataclass(frozen=True)
class StreamMessage:
    """A node's stream message and the parts it was made of (the same parts: the same message)."""

    state: bytes         # the serialized desired state of its generation
    connections: bytes   # its connection part
    sequence: int        # the allocation sequence appended (0: none)
    message: bytes


class Publishing:
    """The generation, its snapshot, and every node's serialized desired state of it."""

    def __init__(self, config: CoordinatorConfig, store: Store, weights: "WeightControl | None" = None):
        self.config = config
        self.store = store
        self.weights = weights
        self.nodes = StorageNodes(config)
        self._lock = threading.RLock()
        self._listeners: list[Callable[[int], None]] = []
        self._store_id = store.store_id()
        self._generation = store.generation()
        self._snapshot = Snapshot(-1, ())
        # (generation, device class) -> serialized DesiredState without node_id; node_id -> (generation, bytes)
        self._templates: dict[tuple[int, int], tuple[pb.DesiredState, bytes]] = {}
        self._node_states: dict[str, tuple[int, bytes]] = {}
        self._messages: dict[str, StreamMessage] = {}   # node_id -> what its stream sends now
        self._targets: dict[tuple[int, int], dict[str, tuple[int, int]]] = {}
        self._connection_parts = ConnectionParts()
        self._connections: list[pb.ConnectionOwner] = []   # as reported, the parts' source
        self._charged_by: frozenset[str] = frozenset()     # the job VNodes the parts were charged by
        self.reported_jobs = ReportedJobs()
        self._builds = itertools.count(1)
        self.set_nodes(config)

    def set_nodes(self, config: CoordinatorConfig) -> None:
        """`config`'s storage nodes from now on (at start, and when they are changed at runtime, before
        the change's generation is published: the states of that generation are built on them)."""
        nodes = config.storage_nodes
        # node_id -> its devices' class: nodes with equal devices share one (compared once, here)
        classes: dict[tuple, int] = {}
        device_class = {n.node_id: classes.setdefault(n.devices, len(classes)) for n in nodes}
        with self._lock:
            self.config = config
            self.nodes.replace(config)
            self._node_id_parts = {n.node_id: pb.DesiredState(node_id=n.node_id).SerializeToString() for n in nodes}
            self._device_class = device_class
            self._routes = ConnectionRoutes(nodes)
            self._device_sets = list({n.devices: n for n in nodes}.values())   # a node of each
            # Built on the nodes as they were: of the current generation too, so dropped here.
            self._templates, self._node_states, self._targets = {}, {}, {}
            self._messages = {k: v for k, v in self._messages.items() if k in device_class}

    # ---- the generation ------------------------------------------------------

    def generation(self) -> int:
        with self._lock:
            return self._generation

    def add_listener(self, listener: Callable[[int], None]) -> None:
        """`listener(generation)` is called (from the thread that made the change) after every bump."""
        self._listeners.append(listener)

    def published(self, generation: int) -> int:
        """A durable change made `generation` current: tell the listeners (once per new generation)."""
        with self._lock:
            if generation <= self._generation:
                return self._generation
            self._generation = generation
        for listener in self._listeners:
            listener(generation)
        return generation

    def node_registered(self, node_id: str, backend: str) -> None:
        """A storage node's backend, as it registered: one that tells jobs by their own ids (Lustre TBF)
        gives every running job a VNode (job_vnodes.JOB_ID_BACKENDS)."""
        if self.reported_jobs.registered(node_id, backend):
            for listener in self._listeners:
                listener(self.generation())

    def jobs_reported(self, named: set[JobKey]) -> None:
        """A compute agent named these (user, job) behind its connections: a running job named for the
        first time gets its VNode from the next snapshot, so the listeners are told (on the event loop:
        in memory only)."""
        if not named or self.config.policy.sharing != WORK_CONSERVING:
            return
        generation = self.generation()
        if self.reported_jobs.add(named, generation):
            for listener in self._listeners:
                listener(generation)

    def refresh_snapshot(self) -> Snapshot:
        """Read users once for the current generation, and the named jobs once for the reported jobs'
        revision (a blocking store read: call it off the event loop)."""
        generation = self.generation()
        revision, reported = self.reported_jobs.read()
        installed = self.snapshot()
        if installed.read_at == (generation, revision):
            return installed
        # Only the jobs a compute agent named are read (every one where a backend tells jobs by their own
        # ids), none under static sharing, where Algorithm 1 splits by user and a job's I/O stays its user's.
        jobs = ()
        if self.config.policy.sharing == WORK_CONSERVING and (reported is None or reported):
            jobs = job_vnodes(self.store.running_jobs(of=reported))
        templates = None
        if generation == installed.generation and jobs == installed.jobs:
            # No job named anew runs (an ended job's id, one its user set): nothing new to send.
            snapshot = replace(installed, revision=revision)
        else:
            users = tuple(self.store.users())
            rows = job_rows(jobs, users)
            snapshot = Snapshot(generation, users, frozenset(u.name for u in users + rows),
                                tuple(self.store.groups()), jobs, rows, revision, next(self._builds))
            # Built here, off the event loop: a stream then only joins bytes.
            templates = {(snapshot.version, self._device_class[node.node_id]): self._build_template(snapshot, node)
                         for node in self._device_sets}
        with self._lock:
            if snapshot.read_at <= self._snapshot.read_at:   # a fresher one was installed meanwhile
                return self._snapshot
            self._snapshot = snapshot
            if templates is not None:
                self._templates = templates
        if reported:
            self.reported_jobs.found(reported, {job.key for job in jobs}, generation)
        self._charge_connections()
        return snapshot

    def snapshot(self) -> Snapshot:
        """The latest snapshot read (in memory: safe on the event loop); it may trail `generation()`."""
        with self._lock:
            return self._snapshot

    # ---- desired states --------------------------------------------------------

    def _build_template(self, snapshot: Snapshot, node: StorageNodeConfig) -> tuple[pb.DesiredState, bytes]:
        template = build_desired_state(snapshot.generation, node.model_copy(update={"id": ""}), snapshot.users,
                                       self.config.policy, jobs=snapshot.jobs, job_rows=snapshot.job_rows)
        template.store_id = self._store_id
        return template, template.SerializeToString()

    def _template(self, snapshot: Snapshot, node: StorageNodeConfig) -> tuple[pb.DesiredState, bytes]:
        """Nodes with the same devices share one desired state apart from node_id: built once."""
        key = (snapshot.version, self._device_class[node.node_id])
        with self._lock:
            if key not in self._templates:
                self._templates[key] = self._build_template(snapshot, node)
            return self._templates[key]

    def desired_state_bytes(self, node_id: str) -> tuple[tuple[int, int], bytes]:
        """This node's serialized desired state of the latest snapshot (and the snapshot's version):
        built once per snapshot."""
        with self._lock:
            snapshot = self._snapshot
            cached = self._node_states.get(node_id)
            if cached and cached[0] == snapshot.version:
                return cached
        node = self.nodes[node_id]
        with self._lock:
            snapshot = self._snapshot
            _, template = self._template(snapshot, node)
            # A serialized protobuf message followed by another is their merge: the template plus node_id.
            state = (snapshot.version, template + self._node_id_parts[node_id])
            self._node_states[node_id] = state
            return state

    def stream_message(self, node_id: str) -> bytes:
        """What the node's stream sends: its desired state with its connections and the current
        allocation appended. The same object is returned until one of them changes, so a stream
        tells "nothing new" by identity."""
        _, state = self.desired_state_bytes(node_id)
        with self._lock:
            connections = self._routes.part(self._connection_parts, node_id)
        sequence, allocation = self.weights.node_allocation(node_id) if self.weights is not None else (0, b"")
        cached = self._messages.get(node_id)
        if cached and cached.state is state and cached.connections == connections and cached.sequence == sequence:
            return cached.message
        message = state + connections + allocation if connections or allocation else state
        self._messages[node_id] = StreamMessage(state, connections, sequence, message)
        return message

    def desired_state(self, node_id: str) -> pb.DesiredState:
        self.refresh_snapshot()
        return pb.DesiredState.FromString(self.stream_message(node_id))

    def targets(self, node_id: str) -> dict[str, tuple[int, int]]:
        """user -> (read, write) ceilings, bytes/s, this node's desired state gives them over its devices,
        of the latest snapshot; computed once per generation for all nodes with the same devices."""
        snapshot = self.snapshot()
        node = self.nodes[node_id]
        key = (snapshot.version, self._device_class[node_id])
        with self._lock:
            cached = self._targets.get(key)
        if cached is None:
            template, _ = self._template(snapshot, node)
            cached = {v.user: (sum(s.read.ceiling_bps for s in v.shares if s.device),
                               sum(s.write.ceiling_bps for s in v.shares if s.device)) for v in template.vnodes}
            with self._lock:
                self._targets = {k: v for k, v in self._targets.items() if k[0] == snapshot.version}
                self._targets[key] = cached
        return cached

    # ---- connections -----------------------------------------------------------

    def publish_connections(self, connections: Iterable[pb.ConnectionOwner]) -> set[str]:
        """Every reported connection, at once: the nodes whose connection part changed. No durable
        transaction and no new generation: connections are runtime state, re-sent to the nodes they
        concern."""
        with self._lock:
            self._connections = list(connections)
        return self._charge_connections(always=True)

    def _charge_connections(self, always: bool = False) -> set[str]:
        """The parts made again from the reported connections, each charged to its job's VNode where the
        latest snapshot has one (else only when that snapshot's job VNodes are not those the parts were
        charged by): the nodes whose part changed. Built outside the lock, and again if the connections
        or the snapshot changed meanwhile."""
        while True:
            with self._lock:
                connections, snapshot, routes = self._connections, self._snapshot, self._routes
                charged = frozenset(r.name for r in snapshot.job_rows)
                if not always and charged == self._charged_by:
                    return set()
            parts = routes.parts(charge_connections(connections, snapshot.jobs, charged))
            with self._lock:
                if self._connections is connections and self._snapshot is snapshot and self._routes is routes:
                    old, self._connection_parts, self._charged_by = self._connection_parts, parts, charged
                    return routes.changed(old, parts)
