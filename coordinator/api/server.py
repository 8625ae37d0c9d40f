"""The coordinator's gRPC server: its lifecycle (bind, serve, start, stop) on its own event loop thread.

Served by grpc.aio on one event loop; calls that touch the durable store run one at a time on one
store thread, in arrival order. Binding comes first, before any state is opened, so a second
coordinator on a taken address refuses having changed nothing.
"""

import asyncio
import errno
import logging
import socket
import threading
from collections.abc import Awaitable, Callable

import grpc
from grpc import aio

from vnode_sync.coordinator.api.admin_api import AdminService
from vnode_sync.coordinator.api.agent_link import AgentLinkService
from vnode_sync.coordinator.state.call_threads import EncodingThreads, StoreThread
from vnode_sync.coordinator.cluster import Cluster
from vnode_sync.coordinator.api.control_loop import allocation_loop
from vnode_sync.coordinator.fan_out.changes import FanOut
from vnode_sync.coordinator.fan_out.processes import FanOutCommand, FanOutProcesses
from vnode_sync.coordinator.api.rpc import service_handlers
from vnode_sync.errors import Unavailable
from vnode_sync.security.authorization import AccessPolicy, OpenAccess
from vnode_sync.supervision import Loops

log = logging.getLogger(__name__)

# How long each step of a stop (background tasks ending, gRPC confirming the shutdown) may take.
STOP_STEP_SECONDS = 5.0
SERVER_OPTIONS = (
    # A second process may not bind the same address (gRPC's default allows it).
    ("grpc.so_reuseport", 0),
    # Calls that arrived but that the server has not yet taken up wait in gRPC core's pending queue;
    # beyond 1,000 it cancels new calls at random and beyond 3,000 all of them (its defaults). A
    # cluster's agents reconnecting at once (each: Register, WatchDesiredState, StreamUsage) exceed
    # that from ~1,000 nodes on: with the defaults, 10,000 agents never all connected (every retried
    # Register was cancelled, and so were admin calls). They wait instead; gRPC still cancels any
    # call pending 30 s.
    ("grpc.server.max_pending_requests", 100_000),
    ("grpc.server.max_pending_requests_hard_limit", 100_000),
)

# At start, the fan-out processes get this long to serve before the coordinator does (it serves
# their nodes' streams itself meanwhile, and hands them over when they come).
FAN_OUT_READY_SECONDS = 10.0

Task = Callable[[], Awaitable[None]]


def address_in_use(address: str) -> Unavailable:
    return Unavailable(f"cannot listen on {address!r}: in use by another process (is another coordinator running?)")


class _Services(grpc.GenericRpcHandler):
    """The services' handlers, registered before the server starts and filled in by `serve`: a standby
    (docs/ha.md) listens before it has state to serve, and its gate refuses every call until then."""

    def __init__(self):
        self.handlers: tuple[grpc.GenericRpcHandler, ...] = ()

    def service(self, handler_call_details):
        for handlers in self.handlers:
            found = handlers.service(handler_call_details)
            if found is not None:
                return found
        return None


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
                    raise address_in_use(address) from None


class CoordinatorServer:
    """The gRPC server on its own event loop thread; start/stop from any thread.

    Binding comes first (`__init__`), before any state is opened, so a second coordinator on a
    taken address refuses having changed nothing; `serve(cluster)` then adds the services.
    Its loops (fan-out publishers, the control loop, `background` tasks such as job expiry) run on
    the same event loop under `loops`; if one ends (it cannot continue), `failed` is set, `failure`
    says why, and the owner should stop the process non-zero.
    """

    def __init__(self, address: str, credentials: grpc.ServerCredentials | None,
                 interceptors: tuple[aio.ServerInterceptor, ...] = (), slow_callback_seconds: float | None = None):
        """`slow_callback_seconds`: run the event loop in asyncio's debug mode, which logs (logger
        "asyncio", WARNING) every callback that holds the loop longer than this."""
        self.failed = threading.Event()
        self.loops = Loops(on_failure=self.failed.set)
        self._interceptors = interceptors
        self._credentials = credentials
        self._background: tuple[Task, ...] = ()
        self._store_thread = StoreThread()
        self._encoding_threads = EncodingThreads()
        self._loop = asyncio.new_event_loop()
        if slow_callback_seconds is not None:
            self._loop.set_debug(True)
            self._loop.slow_callback_duration = slow_callback_seconds
        self._thread = threading.Thread(target=self._loop.run_forever, name="grpc-loop", daemon=True)
        self._thread.start()
        self._stopped = threading.Event()
        self._cluster: Cluster | None = None
        self._listening = False
        self.fan_out: FanOut | None = None
        self.fan_out_processes: FanOutProcesses | None = None
        try:
            self.port = self._call(self._bind(address, credentials))
        except BaseException:
            self._close_loop()
            raise

    @property
    def failure(self) -> str:
        return self.loops.failure or ""

    def _call(self, coroutine, timeout: float | None = 30):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    async def _bind(self, address: str, credentials: grpc.ServerCredentials | None) -> int:
        _refuse_if_taken(address)
        self._server = aio.server(options=SERVER_OPTIONS, interceptors=self._interceptors)
        self._services = _Services()
        self._server.add_generic_rpc_handlers((self._services,))
        try:
            port = (self._server.add_insecure_port(address) if credentials is None
                    else self._server.add_secure_port(address, credentials))
        except RuntimeError:
            port = 0
        if port == 0:
            _refuse_if_taken(address)   # taken since the check above (a second coordinator won the race): same words
            raise Unavailable(f"cannot listen on {address!r} (not a host:port this host can listen on)")
        return port

    def serve(self, cluster: Cluster, background: tuple[Task, ...] = (),
              fan_out_command: FanOutCommand | None = None) -> None:
        """Add the Admin and AgentLink services for `cluster` (before `start`); with a command for more
        than one fan-out process, the agents' streams are served by those processes."""
        self._call(self._add_services(cluster, fan_out_command))
        self._background = background

    async def _add_services(self, cluster: Cluster, fan_out_command: FanOutCommand | None = None) -> None:
        access = (AccessPolicy(cluster.publishing.nodes, lambda user: cluster.store.user(user).priority)
                  if self._credentials else OpenAccess())
        self._cluster = cluster
        self.fan_out = FanOut(cluster, self._store_thread)
        cluster.on_nodes_changed(
            lambda node_ids, removed: self._loop.call_soon_threadsafe(self._nodes_changed, node_ids, removed))
        stream_port = lambda node_id: 0  # noqa: E731 - streams are served here
        if fan_out_command is not None and fan_out_command.processes > 1:
            self.fan_out_processes = FanOutProcesses(fan_out_command, cluster.publishing, cluster.runtime)
            self.fan_out.on_wake(self.fan_out_processes.publish)
            self.fan_out_processes.on_ready(self.fan_out.changes.move)
            stream_port = self.fan_out_processes.port_for
        self._services.handlers = (
            service_handlers("Admin", AdminService(cluster, access, self._store_thread, self._encoding_threads),
                             raw_responses=("Status",)),
            service_handlers("AgentLink", AgentLinkService(cluster, access, self.fan_out, stream_port),
                             raw_responses=("WatchDesiredState",)))

    def _nodes_changed(self, node_ids: list[str], removed: set[str]) -> None:
        """Storage nodes added or removed at runtime (on the loop, before their generation's wake): a
        removed node's streams end (its agent's next Register is refused), and the fan-out processes
        take the new list."""
        if self.fan_out_processes is not None:
            self.fan_out_processes.set_nodes(node_ids)
        self.fan_out.changes.move(sorted(removed))

    def start(self) -> None:
        self._call(self._start())

    def listen(self) -> None:
        """Start answering calls before `serve` (a standby: its gate refuses them)."""
        self._call(self._listen())

    async def _listen(self) -> None:
        if not self._listening:
            self._listening = True
            await self._server.start()

    def pause_streams(self) -> None:
        """End every agent stream and open no new one until `resume_streams` (from any thread)."""
        self._loop.call_soon_threadsafe(self._close_streams, True)

    def learn_for(self, seconds: float) -> None:
        """Streams send nothing for `seconds` (from any thread; before the gate opens)."""
        self._call(self._learn_for(seconds))

    async def _learn_for(self, seconds: float) -> None:
        self.fan_out.learn_for(seconds)
        if self.fan_out_processes:
            self.fan_out_processes.learn_for(seconds)

    def resume_streams(self) -> None:
        self._loop.call_soon_threadsafe(self._close_streams, False)

    def _close_streams(self, closed: bool) -> None:
        """Here and in the fan-out processes (on the loop)."""
        if self.fan_out:
            if closed:
                self.fan_out.close_streams()
            else:
                self.fan_out.closing = False
        if self.fan_out_processes:
            self.fan_out_processes.close_streams(closed)

    def fail(self, reason: str) -> None:
        """Stop the process as a failed background task does (from any thread)."""
        self.loops.fail(reason)

    async def store_call(self, fn: Callable, *args):
        """Run a blocking store call on the store thread, in order with the RPCs' (from the loop)."""
        return await self._store_thread.run(fn, *args)

    async def _start(self) -> None:
        await self.fan_out.prime()
        cluster, fan_out = self._cluster, self.fan_out
        processes = self.fan_out_processes.supervisors() if self.fan_out_processes else ()
        for name, task in processes:
            self.loops.start_task(name, task)
        if self.fan_out_processes and not await self.fan_out_processes.wait_ready(FAN_OUT_READY_SECONDS):
            log.warning("not every fan-out process serves yet: the coordinator serves their nodes' streams meanwhile")
        await self._listen()

        async def allocation() -> None:
            await allocation_loop(cluster, fan_out, self._store_thread)
        allocations = (("allocation", allocation),) if cluster.weights is not None else ()
        for name, loop in (("publisher", fan_out.publisher), ("connections", fan_out.connection_publisher),
                           *allocations, *((t.__name__, t) for t in self._background)):
            self.loops.start_task(name, loop)

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
        self.loops.stopping()
        if self.fan_out:
            self.fan_out.close_streams()
        # The fan-out processes end their streams while this server ends its own.
        processes_stopped = asyncio.create_task(self.fan_out_processes.stop()) if self.fan_out_processes else None
        tasks = self.loops.tasks
        for task in tasks:
            task.cancel()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=STOP_STEP_SECONDS)
            if pending:
                log.warning("stopping: background tasks %s did not end within %.0f s of being cancelled",
                            sorted(t.get_name() for t in pending), STOP_STEP_SECONDS)
        try:
            async with asyncio.timeout((grace or 0) + STOP_STEP_SECONDS):
                await self._server.stop(grace)
        except TimeoutError:
            log.warning("stopping: gRPC did not confirm the server's shutdown within %.0f s of its grace; "
                        "going on without it", STOP_STEP_SECONDS)
        if processes_stopped is not None:
            await processes_stopped

    def _close_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._store_thread.close()
        self._encoding_threads.close()
        if not self._thread.is_alive():
            # Closed here, not by its finalizer at exit, which may find its self-pipe already gone and
            # print a traceback after a one-line refusal (a second coordinator on a taken address).
            self._loop.close()


def create_server(cluster: Cluster, address: str, credentials: grpc.ServerCredentials | None = None,
                  background: tuple[Task, ...] = (),
                  interceptors: tuple[aio.ServerInterceptor, ...] = (),
                  slow_callback_seconds: float | None = None,
                  fan_out_command: FanOutCommand | None = None) -> tuple[CoordinatorServer, int]:
    """A server bound to `address` (port 0 picks one), not yet started; returns (server, port).

    With credentials (mutual TLS) the access policy is enforced; without, every caller may do
    everything (lab).
    """
    server = CoordinatorServer(address, credentials, interceptors, slow_callback_seconds)
    server.serve(cluster, background, fan_out_command)
    return server, server.port
