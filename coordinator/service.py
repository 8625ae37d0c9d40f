"""The coordinator's gRPC face: Admin (vnodectl, batch hooks) and AgentLink (storage agents).

Served by grpc.aio on one event loop, so a storage agent's long-lived desired-state stream
holds no thread: it waits on the current generation's event and sends bytes serialized once
per node and generation. Calls that touch the durable store (every Admin call) run one at a time
on one store thread, in arrival order; usage and connection reports are in-memory and answered
on the loop.
"""

import asyncio
import collections
import concurrent.futures
import errno
import functools
import logging
import socket
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import grpc
from google.protobuf.message import DecodeError
from grpc import aio

from vnode_sync import validation
from vnode_sync.coordinator.cluster import Cluster, NodeRuntime
from vnode_sync.coordinator.pressure import rank, window_of
from vnode_sync.coordinator.serialized import field_entry
from vnode_sync.coordinator.store import UserRecord
from vnode_sync.errors import InvalidArgument, NotFound, Unavailable, VNodeSyncError
from vnode_sync.security.authorization import (AccessPolicy, OpenAccess, PermissionDenied, Unauthenticated,
                                               readable_by)
from vnode_sync.security.identity import caller_of
from vnode_sync.supervision import set_within
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

# Changed connections are published at most this often: one send per node for a burst of reports.
CONNECTIONS_PUBLISH_SECONDS = 0.05
# How long each step of a stop (background tasks ending, gRPC confirming the shutdown) may take.
STOP_STEP_SECONDS = 5.0
SERVER_OPTIONS = (
    # A second process may not bind the same address (gRPC's default allows it).
    ("grpc.so_reuseport", 0),
    # Calls that arrived but that the server has not yet taken up wait in gRPC core's pending queue;
    # beyond 1,000 it cancels new calls at random and beyond 3,000 all of them (its defaults). A
    # cluster's agents reconnecting at once (each: Register, WatchDesiredState, ReportUsage) exceed
    # that from ~1,000 nodes on: with the defaults, 10,000 agents never all connected (every retried
    # Register was cancelled, and so were admin calls). They wait instead; gRPC still cancels any
    # call pending 30 s.
    ("grpc.server.max_pending_requests", 100_000),
    ("grpc.server.max_pending_requests_hard_limit", 100_000),
)

_STATUS_OF = [
    (Unauthenticated, grpc.StatusCode.UNAUTHENTICATED),
    (PermissionDenied, grpc.StatusCode.PERMISSION_DENIED),
    (InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT),
    (NotFound, grpc.StatusCode.NOT_FOUND),
    (Unavailable, grpc.StatusCode.UNAVAILABLE),
    (VNodeSyncError, grpc.StatusCode.FAILED_PRECONDITION),
]


async def _abort(context, name: str, error: VNodeSyncError):
    code = next(c for kind, c in _STATUS_OF if isinstance(error, kind))
    if not isinstance(error, (Unauthenticated, PermissionDenied)):  # those are in the audit log already
        log.info("%s refused: %s", name, error)
    await context.abort(code, str(error))


class StoreThread:
    """One thread for every call that reads or writes the durable store: calls run in arrival order."""

    def __init__(self):
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="store")

    async def run(self, fn: Callable, *args):
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def _admin_rpc(method):
    """Authorize, run the call on the store thread, map vnode-sync errors to gRPC codes, in one place."""

    @functools.wraps(method)
    async def wrapper(self, request, context):
        if request is None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{method.__name__}: not a valid request message")
        caller_identity, peer = caller_of(context), context.peer()

        def call():
            caller = self.access.authorize(method.__name__, caller_identity, request, peer)
            return method(self, request, caller)
        try:
            return await self.store_thread.run(call)
        except VNodeSyncError as e:
            await _abort(context, method.__name__, e)

    return wrapper


def _loop_rpc(method):
    """Authorize and answer on the event loop: in-memory calls only."""

    @functools.wraps(method)
    async def wrapper(self, request, context):
        if request is None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{method.__name__}: not a valid request message")
        try:
            caller = self.access.authorize(method.__name__, caller_of(context), request, context.peer())
            return method(self, request, caller)
        except VNodeSyncError as e:
            await _abort(context, method.__name__, e)

    return wrapper


_USER_STATUS_NODES = pb.UserStatus.DESCRIPTOR.fields_by_name["nodes"].number
_STATUS_USERS = pb.StatusResponse.DESCRIPTOR.fields_by_name["users"].number


def user_message(record: UserRecord) -> pb.User:
    return pb.User(name=record.name, uid=record.uid, priority=record.effective_priority,
                   active=record.active, running_jobs=record.running_jobs,
                   reservation_bps=record.effective_reservation, limit_bps=record.effective_limit)


def _priority(value: int) -> int:
    return validation.priority(value)


@dataclass(frozen=True)
class _NodeView:
    """What Status shows of one node, read once per call."""

    node_id: str
    runtime: NodeRuntime
    targets: dict        # user -> (read, write) bytes/s of Algorithm 1; one object per set of devices
    rates: dict          # user -> UserNodeRate, measured (only users with a rate)
    allocations: dict    # user -> the work-conserving allocation (empty under Algorithm 1)


def _entries(users: list[UserRecord], views: list[_NodeView]) -> list[bytes]:
    """Every (user, node) entry."""
    target_part: dict[tuple[int, int], bytes] = {}
    bases = [pb.UserNodeStatus(node_id=v.node_id, applied_generation=v.runtime.applied_generation).SerializeToString()
             for v in views]
    entries = []
    for record in users:
        name, pieces = record.name, []
        for base, view in zip(bases, views):
            target = view.targets.get(name, (0, 0))
            part = target_part.get(target)
            if part is None:
                part = target_part[target] = pb.UserNodeStatus(target_read_bps=target[0],
                                                               target_write_bps=target[1]).SerializeToString()
            piece = base + part
            rate, held = view.rates.get(name), name in view.runtime.held_at_limit
            if rate or held:
                # A serialized message followed by another is their merge: these fields are added.
                piece += pb.UserNodeStatus(measured_read_bps=rate.read_bps if rate else 0.0,
                                           measured_write_bps=rate.write_bps if rate else 0.0,
                                           held_at_limit=held).SerializeToString()
            given = view.allocations.get(name)
            if given:
                piece += pb.UserNodeStatus(allocated_read_bps=given.allocated_read_bps,
                                           allocated_write_bps=given.allocated_write_bps,
                                           demand_read_bps=given.demand_read_bps,
                                           demand_write_bps=given.demand_write_bps).SerializeToString()
            pieces.append(field_entry(_USER_STATUS_NODES, piece))
        user_status = pb.UserStatus(user=user_message(record)).SerializeToString() + b"".join(pieces)
        entries.append(field_entry(_STATUS_USERS, user_status))
    return entries


def _summaries(users: list[UserRecord], views: list[_NodeView]) -> list[bytes]:
    """One summary per user, from the nodes' distinct target sets and their (sparse) measurements:
    O(users x sets of devices), not O(users x nodes)."""
    target_sets = list({id(v.targets): v.targets for v in views}.values())
    measured: dict[str, list[float]] = {}
    held: collections.Counter = collections.Counter()
    for view in views:
        for name, rate in view.rates.items():
            total = measured.setdefault(name, [0.0, 0.0])
            total[0] += rate.read_bps
            total[1] += rate.write_bps
        held.update(view.runtime.held_at_limit)
    applied = min((v.runtime.applied_generation for v in views), default=0)
    entries = []
    for record in users:
        name = record.name
        targets = [t.get(name, (0, 0)) for t in target_sets] or [(0, 0)]
        reads, writes = [t[0] for t in targets], [t[1] for t in targets]
        read, write = measured.get(name, (0.0, 0.0))
        summary = pb.UserSummary(nodes=len(views), target_read_bps_min=min(reads), target_read_bps_max=max(reads),
                                 target_write_bps_min=min(writes), target_write_bps_max=max(writes),
                                 measured_read_bps=read, measured_write_bps=write, applied_generation_min=applied,
                                 nodes_held_at_limit=held[name])
        entries.append(field_entry(_STATUS_USERS, pb.UserStatus(user=user_message(record),
                                                               summary=summary).SerializeToString()))
    return entries


class AdminService(pb_grpc.AdminServicer):
    def __init__(self, cluster: Cluster, access: AccessPolicy | OpenAccess, store_thread: StoreThread):
        self.cluster = cluster
        self.access = access
        self.store_thread = store_thread

    @_admin_rpc
    def AddUser(self, request, caller):
        return user_message(self.cluster.add_user(request.user, request.uid, _priority(request.priority),
                                                  request.active, caller.actor))

    @_admin_rpc
    def SetPriority(self, request, caller):
        return user_message(self.cluster.set_priority(request.user, _priority(request.priority),
                                                      caller.actor))

    @_admin_rpc
    def SetReservation(self, request, caller):
        return user_message(self.cluster.set_reservation(request.user, request.bps, caller.actor))

    @_admin_rpc
    def SetLimit(self, request, caller):
        return user_message(self.cluster.set_limit(request.user, request.bps, caller.actor))

    @_admin_rpc
    def SetActive(self, request, caller):
        return user_message(self.cluster.set_active(request.user, request.active, caller.actor))

    @_admin_rpc
    def RemoveUser(self, request, caller):
        self.cluster.remove_user(request.user, caller.actor)
        return pb.RemoveUserResponse(user=request.user)

    @_admin_rpc
    def ListUsers(self, request, caller):
        return pb.ListUsersResponse(users=[user_message(u) for u in readable_by(caller, self.cluster.users())],
                                    generation=self.cluster.generation())

    def _nodes(self) -> list[pb.StorageNode]:
        nodes = []
        updates = self.cluster.allocator.updates if self.cluster.allocator else {}
        for node in self.cluster.config.storage_nodes:
            runtime = self.cluster.node_runtime(node.node_id)
            registered = {d.name: d for d in runtime.devices}
            devices = [pb.Device(name=d.name, major=registered.get(d.name, pb.Device()).major,
                                 minor=registered.get(d.name, pb.Device()).minor, read_bps=d.read_bps,
                                 write_bps=d.write_bps, read_iops=d.read_iops, write_iops=d.write_iops)
                       for d in node.devices]
            nodes.append(pb.StorageNode(node_id=node.node_id, devices=devices, backend=runtime.backend,
                                        applied_generation=runtime.applied_generation,
                                        last_seen_unix=runtime.last_seen, connected=runtime.streams > 0,
                                        limitations=runtime.limitations, errors=runtime.errors,
                                        allocation_updates=updates.get(node.node_id, 0),
                                        not_enforcing=runtime.not_enforcing))
        return nodes

    @_admin_rpc
    def ListNodes(self, request, caller):
        return pb.ListNodesResponse(nodes=self._nodes(), generation=self.cluster.generation())

    @_admin_rpc
    def Status(self, request, caller) -> bytes:
        """Users x nodes entries (10,000 x 100 is a million): written as serialized pieces built once
        per node and per (user, target), joined, instead of a million message objects; or, above
        `request.max_entries`, one summary per user."""
        users = readable_by(caller, self.cluster.users())
        if request.user:
            validation.user_name(request.user)
            users = [u for u in users if u.name == request.user]
            if not users:
                raise NotFound(f"unknown user {request.user!r}")
        nodes = self.cluster.config.storage_nodes
        if request.node:
            nodes = [n for n in nodes if n.node_id == request.node]
            if not nodes:
                raise NotFound(f"unknown storage node {request.node!r}")
        self.cluster.refresh_snapshot()
        allocator = self.cluster.allocator
        views = [_NodeView(node.node_id, self.cluster.node_runtime(node.node_id), self.cluster.targets(node.node_id),
                           self.cluster.measured_rates(node.node_id),
                           allocator.status(node.node_id) if allocator else {}) for node in nodes]
        summarise = not (request.user or request.node) and (
            request.summarise or 0 < request.max_entries < len(users) * len(views))
        entries = _summaries(users, views) if summarise else _entries(users, views)
        policy = self.cluster.config.policy
        shown = {n.node_id for n in nodes}
        head = pb.StatusResponse(generation=self.cluster.generation(), mode=policy.mode,
                                 nodes=[n for n in self._nodes() if n.node_id in shown],
                                 allocation=policy.allocation).SerializeToString()
        return head + b"".join(entries)

    @_admin_rpc
    def Pressure(self, request, caller):
        window = window_of(request.window_seconds)
        self.cluster.refresh_snapshot()
        users = [(u.name, u.effective_priority) for u in readable_by(caller, self.cluster.snapshot().users)]
        book = self.cluster.pressure
        now = book.now()
        return pb.PressureResponse(generation=self.cluster.generation(),
                                   allocation=self.cluster.config.policy.allocation, window_seconds=window,
                                   covered_seconds=min(window, now - book.started), sampled_at_unix=now,
                                   users=rank(users, self.cluster.share_views(), book, window, request.limit, now))

    @_admin_rpc
    def StartJob(self, request, caller):
        record, priority = self.cluster.start_job(request.job_id, request.user, request.uid, request.node,
                                                  request.account, request.queue, request.requested_priority,
                                                  caller.actor, request.reservation_bps, request.limit_bps)
        return pb.JobResponse(user=user_message(record), effective_priority=priority,
                              generation=self.cluster.generation())

    @_admin_rpc
    def EndJob(self, request, caller):
        record = self.cluster.end_job(request.job_id, request.node, caller.actor)
        return pb.JobResponse(user=user_message(record) if record else None,
                              generation=self.cluster.generation())

    @_admin_rpc
    def ReconcileJobs(self, request, caller):
        dropped = self.cluster.reconcile_jobs(request.source, set(request.job_ids), caller.actor)
        return pb.RunningJobsResponse(expired_job_ids=dropped)


class AgentLinkService(pb_grpc.AgentLinkServicer):
    def __init__(self, cluster: Cluster, access: AccessPolicy | OpenAccess, changes: "Changes"):
        self.cluster = cluster
        self.access = access
        self.changes = changes

    @_loop_rpc
    def Register(self, request, caller):
        validation.node_id(request.node_id)
        generation = self.cluster.register_node(request.node_id, list(request.devices), request.backend,
                                                list(request.limitations))
        log.info("node %s registered (backend %s)", request.node_id, request.backend)
        return pb.RegisterResponse(generation=generation)

    async def WatchDesiredState(self, request, context):
        if request is None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "WatchDesiredState: not a valid request message")
        try:
            self.access.authorize("WatchDesiredState", caller_of(context), request, context.peer())
            validation.node_id(request.node_id)
            self.cluster.stream_opened(request.node_id)
        except VNodeSyncError as e:
            await _abort(context, "WatchDesiredState", e)
        node_id, sent = request.node_id, None
        try:
            while not self.changes.closing:
                changed = self.changes.event_of(node_id)  # taken before reading the state: no change is missed
                message = self.cluster.stream_message(node_id)
                if message is not sent:
                    await context.write(message)
                    sent = message
                await changed.wait()
        finally:
            self.cluster.stream_closed(node_id)

    @_loop_rpc
    def ReportUsage(self, request, caller):
        return pb.ReportAck(generation=self.cluster.report_usage(request))

    async def StreamUsage(self, reports, context):
        """Usage reports on one call; each is authorized and taken as a ReportUsage call is."""
        caller, peer = caller_of(context), context.peer()
        generation = self.cluster.generation()
        async for report in reports:
            if report is None:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "StreamUsage: not a valid UsageReport message")
            try:
                self.access.authorize("ReportUsage", caller, report, peer)
                generation = self.cluster.report_usage(report)
            except VNodeSyncError as e:
                await _abort(context, "StreamUsage", e)
        return pb.ReportAck(generation=generation)

    @_loop_rpc
    def ReportConnections(self, request, caller):
        generation = self.cluster.report_connections(request.reporter, list(request.connections))
        self.changes.connections_reported()
        return pb.ReportAck(generation=generation)


class Changes:
    """The event loop's view of changes: one event per node that its streams wait on.

    A bump (made on the store thread) wakes `_publisher`, which reads the new snapshot once, off the
    loop, then wakes every node; bursts of bumps coalesce into one snapshot. A change of connections
    wakes only the nodes whose connections changed.
    """

    def __init__(self, cluster: Cluster, store_thread: StoreThread):
        self.cluster = cluster
        self.store_thread = store_thread
        self._events: dict[str, asyncio.Event] = {}  # node_id -> what its streams wait on now
        self.closing = False
        self._bumped = asyncio.Event()
        self._connections = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        cluster.add_listener(lambda _generation: self._loop.call_soon_threadsafe(self._bumped.set))

    async def prime(self) -> None:
        await self.store_thread.run(self.cluster.refresh_snapshot)

    def connections_reported(self) -> None:
        if self.cluster.connections_changed():
            self._connections.set()

    async def publisher(self) -> None:
        while True:
            await self._bumped.wait()
            self._bumped.clear()
            await self.store_thread.run(self.cluster.refresh_snapshot)
            self._wake()

    async def connection_publisher(self) -> None:
        while True:
            await self._connections.wait()
            self._connections.clear()
            self._wake(self.cluster.publish_connections())
            await asyncio.sleep(CONNECTIONS_PUBLISH_SECONDS)

    async def allocation_loop(self) -> None:
        """The work-conserving control loop: a tick every policy.control_seconds, and at once after an
        admin change (a new generation) or a report of a user back from idle; only the streams of
        nodes whose allocation changed send."""
        poke = asyncio.Event()
        self.cluster.add_listener(lambda _generation: self._loop.call_soon_threadsafe(poke.set))
        self.cluster.allocation_wanted = lambda: self._loop.call_soon_threadsafe(poke.set)
        period = self.cluster.config.policy.control_seconds
        while True:
            if await set_within(poke, period):
                await self.store_thread.run(self.cluster.refresh_snapshot)   # the change's users
            poke.clear()
            users = self.cluster.snapshot().users
            changed = await self._loop.run_in_executor(None, self.cluster.allocator.tick, users)
            if changed:
                self._wake()

    def event_of(self, node_id: str) -> asyncio.Event:
        event = self._events.get(node_id)
        if event is None:
            event = self._events[node_id] = asyncio.Event()
        return event

    def close_streams(self) -> None:
        self.closing = True
        self._wake()

    def _wake(self, nodes: set[str] | None = None) -> None:
        """Wake the streams of `nodes` (None: every node's)."""
        if nodes is None:
            woken, self._events = self._events, {}
            for event in woken.values():
                event.set()
            return
        for node in nodes:
            event = self._events.pop(node, None)
            if event is not None:
                event.set()


def _decoder(message_class):
    """Garbage on the wire becomes None (refused as INVALID_ARGUMENT by the call), not a server traceback."""

    def decode(data: bytes):
        try:
            return message_class.FromString(data)
        except DecodeError:
            return None
    return decode


def _handlers(service_name: str, servicer, raw_responses: tuple[str, ...] = ()) -> grpc.GenericRpcHandler:
    """The service's handlers; the responses of `raw_responses` go out already serialized."""
    handlers = {}
    for method in pb.DESCRIPTOR.services_by_name[service_name].methods:
        response = getattr(pb, method.output_type.name)
        make = {(False, False): grpc.unary_unary_rpc_method_handler, (False, True): grpc.unary_stream_rpc_method_handler,
                (True, False): grpc.stream_unary_rpc_method_handler}[method.client_streaming, method.server_streaming]
        handlers[method.name] = make(
            getattr(servicer, method.name), request_deserializer=_decoder(getattr(pb, method.input_type.name)),
            response_serializer=bytes if method.name in raw_responses else response.SerializeToString)
    return grpc.method_handlers_generic_handler(pb.DESCRIPTOR.services_by_name[service_name].full_name, handlers)


Task = Callable[[], Awaitable[None]]


def _refuse_if_taken(address: str) -> None:
    """A taken address is refused here, in one line, before gRPC core logs its own bind error
    (gRPC, with so_reuseport 0, refuses it too; this only keeps the error to one line)."""
    host, _, port = address.rpartition(":")
    if not port.isdigit() or int(port) == 0:
        return
    try:
        infos = socket.getaddrinfo(host.strip("[]") or None, int(port), type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except OSError:
        return  # not resolvable: gRPC says so
    for family, kind, proto, _, sockaddr in infos:
        with socket.socket(family, kind, proto) as probe:
            # As gRPC does: connections of a previous coordinator in TIME_WAIT do not hold the address.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(sockaddr)
            except OSError as e:
                if e.errno == errno.EADDRINUSE:
                    raise Unavailable(f"cannot listen on {address!r}: in use by another process "
                                      "(is another coordinator running?)") from None


class CoordinatorServer:
    """The gRPC server on its own event loop thread; start/stop from any thread.

    Binding comes first (`__init__`), before any state is opened, so a second coordinator on a
    taken address refuses having changed nothing; `serve(cluster)` then adds the services.
    `background` tasks (e.g. the job expiry loop) run on the same loop; if one ends (it cannot
    continue), `failed` is set with the reason and the owner should stop the process non-zero.
    """

    def __init__(self, address: str, credentials: grpc.ServerCredentials | None,
                 interceptors: tuple[aio.ServerInterceptor, ...] = ()):
        self.failed = threading.Event()
        self._interceptors = interceptors
        self.failure = ""
        self._credentials = credentials
        self._background: tuple[Task, ...] = ()
        self._store_thread = StoreThread()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="grpc-loop", daemon=True)
        self._thread.start()
        self._stopped = threading.Event()
        self._tasks: list[asyncio.Task] = []
        self.changes: Changes | None = None
        try:
            self.port = self._call(self._bind(address, credentials))
        except BaseException:
            self._close_loop()
            raise

    def _call(self, coroutine, timeout: float | None = 30):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    async def _bind(self, address: str, credentials: grpc.ServerCredentials | None) -> int:
        _refuse_if_taken(address)
        self._server = aio.server(options=SERVER_OPTIONS, interceptors=self._interceptors)
        try:
            port = (self._server.add_insecure_port(address) if credentials is None
                    else self._server.add_secure_port(address, credentials))
        except RuntimeError:
            port = 0
        if port == 0:
            raise Unavailable(f"cannot listen on {address!r} (in use by another process, or not a host:port)")
        return port

    def serve(self, cluster: Cluster, background: tuple[Task, ...] = ()) -> None:
        """Add the Admin and AgentLink services for `cluster` (before `start`)."""
        self._call(self._add_services(cluster))
        self._background = background

    async def _add_services(self, cluster: Cluster) -> None:
        access = (AccessPolicy([n.node_id for n in cluster.config.storage_nodes],
                               lambda user: cluster.store.user(user).priority) if self._credentials else OpenAccess())
        self.changes = Changes(cluster, self._store_thread)
        self._server.add_generic_rpc_handlers((
            _handlers("Admin", AdminService(cluster, access, self._store_thread), raw_responses=("Status",)),
            _handlers("AgentLink", AgentLinkService(cluster, access, self.changes),
                      raw_responses=("WatchDesiredState",))))

    def start(self) -> None:
        self._call(self._start())

    async def store_call(self, fn: Callable, *args):
        """Run a blocking store call on the store thread, in order with the RPCs' (from the loop)."""
        return await self._store_thread.run(fn, *args)

    async def _start(self) -> None:
        await self.changes.prime()
        await self._server.start()
        allocation = (("allocation", self.changes.allocation_loop),) if self.changes.cluster.allocator else ()
        for name, task in (("publisher", self.changes.publisher), ("connections", self.changes.connection_publisher),
                           *allocation, *((t.__name__, t) for t in self._background)):
            self._tasks.append(asyncio.create_task(self._watched(name, task), name=name))

    async def _watched(self, name: str, task: Task) -> None:
        try:
            await task()
            reason = f"background task {name} ended"
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - any error ends the process, logged with its context
            log.exception("background task %s cannot continue", name)
            reason = f"background task {name} failed: {e}"
        self.failure = reason
        self.failed.set()

    def stop(self, grace: float | None = 1.0) -> threading.Event:
        """End every stream, stop serving (waiting up to `grace` s for calls in flight); returns a waitable."""
        if not self._stopped.is_set() and self._thread.is_alive():
            try:
                self._call(self._stop(grace), timeout=(grace or 0) + 2 * STOP_STEP_SECONDS + 5)
            finally:
                self._close_loop()
        self._stopped.set()
        return self._stopped

    async def _stop(self, grace: float | None) -> None:
        # Each step is bounded: a stop that never returns would hold the process (or a test) forever.
        if self.changes:
            self.changes.close_streams()
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            _, pending = await asyncio.wait(self._tasks, timeout=STOP_STEP_SECONDS)
            if pending:
                log.warning("stopping: background tasks %s did not end within %.0f s of being cancelled",
                            sorted(t.get_name() for t in pending), STOP_STEP_SECONDS)
        try:
            async with asyncio.timeout((grace or 0) + STOP_STEP_SECONDS):
                await self._server.stop(grace)
        except TimeoutError:
            log.warning("stopping: gRPC did not confirm the server's shutdown within %.0f s of its grace; "
                        "going on without it", STOP_STEP_SECONDS)

    def _close_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._store_thread.close()


def create_server(cluster: Cluster, address: str, credentials: grpc.ServerCredentials | None = None,
                  background: tuple[Task, ...] = (),
                  interceptors: tuple[aio.ServerInterceptor, ...] = ()) -> tuple[CoordinatorServer, int]:
    """A server bound to `address` (port 0 picks one), not yet started; returns (server, port).

    With credentials (mutual TLS) the access policy is enforced; without, every caller may do
    everything (lab).
    """
    server = CoordinatorServer(address, credentials, interceptors)
    server.serve(cluster, background)
    return server, server.port
