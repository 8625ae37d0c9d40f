"""One leader among several coordinators, elected through ZooKeeper (issue 28, docs/ha.md).

Each coordinator holds a ZooKeeper session and a contender znode in `<root>/leader` (kazoo's Lock
recipe: ephemeral and sequential; the lowest leads) whose data is the address it advertises.
The leader's store changes are fenced on that znode: once its session is gone, so is the znode,
and ZooKeeper refuses its writes. Until it leads, a coordinator's gRPC calls are refused by the
LeaderGate with UNAVAILABLE and the leader's address in the trailing metadata (clients follow it).

A leader whose connection to ZooKeeper drops (SUSPENDED: it cannot tell whether its session
lives) stops publishing at once: the gate closes and every agent stream ends. If the connection
comes back with the session (CONNECTED), it goes on; if the session is lost, or the connection is
not back within the session timeout (by then ZooKeeper has expired the session and a standby may
lead), `on_lost` is called and the process ends: the service manager starts it again as a standby.
"""

import logging
import threading
from collections.abc import Callable

import grpc
from grpc import aio
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import CancelledError, KazooException
from kazoo.recipe.watchers import ChildrenWatch
from kazoo.security import make_acl, make_digest_acl

from vnode_sync.coordinator.config import ZooKeeperSettings
from vnode_sync.errors import Unavailable
from vnode_sync.supervision import LoopFailed, run_passes
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire.leader import LEADER_KEY

log = logging.getLogger(__name__)

# A DIGEST-MD5 login that ZooKeeper rejects once (seen once in a loaded CI run, never in 225 tries
# here) is tried again; a wrong password fails every time.
LOGIN_ATTEMPTS = 3


def _password(path: str, key: str) -> str:
    try:
        with open(path) as f:
            return f.readline().strip()
    except OSError as e:
        raise Unavailable(f"zookeeper.{key} {path}: {e.strerror}") from e


def connect(settings: ZooKeeperSettings) -> KazooClient:
    """A started ZooKeeper client as `settings` say (TLS; a digest or SASL identity, and the ACL that
    lets it alone read or change what it creates), whose identity the server has accepted."""
    auth, acl, sasl = None, None, None
    if settings.digest_user:
        password = _password(settings.digest_password_file, "digest_password_file")
        auth = [("digest", f"{settings.digest_user}:{password}")]
        acl = [make_digest_acl(settings.digest_user, password, all=True)]
    elif settings.sasl_user:
        sasl = {"mechanism": "DIGEST-MD5", "username": settings.sasl_user,
                "password": _password(settings.sasl_password_file, "sasl_password_file")}
        acl = [make_acl("sasl", settings.sasl_user, all=True)]
    tls = {}
    if settings.tls is not None:
        # The server's certificate must chain to the CA and name the host dialled.
        tls = {"use_ssl": True, "ca": settings.tls.ca, "certfile": settings.tls.cert, "keyfile": settings.tls.key,
               "check_hostname": True}
    refusal = ""
    for _ in range(LOGIN_ATTEMPTS):
        client = KazooClient(hosts=settings.hosts, timeout=settings.session_timeout_seconds, auth_data=auth,
                             sasl_options=dict(sasl) if sasl else None, default_acl=acl, **tls)
        try:
            client.start(timeout=max(5.0, 2 * settings.session_timeout_seconds))
        except Exception as e:  # noqa: BLE001 - kazoo raises its own timeout or socket errors
            client.close()
            raise Unavailable(f"ZooKeeper at {settings.hosts} not reachable ({type(e).__name__}: {e})") from e
        try:
            # kazoo reports CONNECTED before its SASL login; a refused login ends the session (and kazoo's
            # connection thread), which the first request then meets.
            client.exists("/")
            return client
        except KazooException as e:
            refusal = f"{type(e).__name__}: {e}".rstrip(": ")
            client.stop()
            client.close()
    hint = "; check zookeeper.sasl_user and its password file" if sasl else ""
    raise Unavailable(f"ZooKeeper at {settings.hosts} ended the session at login {LOGIN_ATTEMPTS} times "
                      f"(last: {refusal}){hint}")


class LeaderGate(aio.ServerInterceptor):
    """Refuses every call while this coordinator does not lead (or has paused), naming the leader."""

    def __init__(self, hint: Callable[[], str]):
        self._open = False
        self._hint = hint
        self._refusals: dict[str, grpc.RpcMethodHandler] = {}

    @property
    def is_open(self) -> bool:
        return self._open

    def open(self) -> None:
        self._open = True

    def close(self) -> None:
        self._open = False

    async def intercept_service(self, continuation, handler_call_details):
        if self._open:
            return await continuation(handler_call_details)
        return self._refusal(handler_call_details.method)

    def _refusal(self, method: str) -> grpc.RpcMethodHandler | None:
        handler = self._refusals.get(method)
        if handler is None:
            kind = _method_kind(method)
            if kind is None:
                return None   # not ours: UNIMPLEMENTED
            gate = self

            async def refuse(request, context):
                leader = gate._hint()
                await context.abort(grpc.StatusCode.UNAVAILABLE,
                                    f"this coordinator is a standby; the leader is at {leader}" if leader
                                    else "this coordinator does not lead and no leader is known yet",
                                    trailing_metadata=((LEADER_KEY, leader),))
            make = {(False, False): grpc.unary_unary_rpc_method_handler,
                    (False, True): grpc.unary_stream_rpc_method_handler,
                    (True, False): grpc.stream_unary_rpc_method_handler,
                    (True, True): grpc.stream_stream_rpc_method_handler}[kind]
            handler = self._refusals[method] = make(refuse)
        return handler


def _method_kind(method: str) -> tuple[bool, bool] | None:
    """(client streaming, server streaming) of "/package.Service/Method" of our protocol."""
    _, service, name = method.split("/") if method.count("/") == 2 else ("", "", "")
    for described in pb.DESCRIPTOR.services_by_name.values():
        if described.full_name == service:
            found = described.methods_by_name.get(name)
            return (found.client_streaming, found.server_streaming) if found else None
    return None


class Election:
    """This coordinator's candidacy; `leader()` names the current leader (from a watch, never blocking)."""

    def __init__(self, client: KazooClient, settings: ZooKeeperSettings, on_failure: Callable[[str], None]):
        """`on_failure(reason)`: the leader hint cannot be kept up to date (the process should exit)."""
        self.client = client
        self.settings = settings
        self.path = f"{settings.root}/leader"
        self._lock = client.Lock(self.path, identifier=settings.advertise)
        self._leader = ""
        self._changed = threading.Event()
        self._changed.set()   # the first pass reads the contenders
        self._stopped = threading.Event()
        client.ensure_path(self.path)
        self._refresher = threading.Thread(target=self._refresh, args=(on_failure,), name="leader-hint", daemon=True)
        self._refresher.start()
        ChildrenWatch(client, self.path, self._contenders_changed)

    def leader(self) -> str:
        return self._leader

    def _contenders_changed(self, _children) -> bool:
        self._changed.set()
        return not self._stopped.is_set()

    def _refresh(self, on_failure: Callable[[str], None]) -> None:
        try:
            run_passes("leader-hint", f"election under {self.path}", self._read_leader, self._stopped,
                       wait=self._changed.wait)
        except LoopFailed as e:
            on_failure(str(e))

    def _read_leader(self) -> float:
        """One pass: the first contender leads; then wait (at most an hour) for the next change."""
        self._changed.clear()
        contenders = self._lock.contenders()
        self._leader = contenders[0] if contenders else ""
        return 3600.0

    def campaign(self, stop: threading.Event) -> bool:
        """Block until this coordinator leads (True), or `stop` is set (False). The contender znode
        stays in place while waiting: its place in the queue is kept."""
        stopping = threading.Thread(target=lambda: stop.wait() or self._lock.cancel(), name="campaign-stop",
                                    daemon=True)
        stopping.start()
        while not stop.is_set():
            try:
                if self._lock.acquire(blocking=True):
                    self._leader = self.settings.advertise
                    return not stop.is_set()
            except CancelledError:
                return False
            except KazooException as e:
                log.warning("leader election: %s; trying again", type(e).__name__)
                stop.wait(1.0)
        return False

    @property
    def fence(self) -> str:
        """The znode every change of this leader checks (gone with its session)."""
        return f"{self.path}/{self._lock.node}"

    def stop(self) -> None:
        self._stopped.set()
        self._changed.set()
        self._lock.cancel()


class LeaderGuard:
    """Watches the leader's ZooKeeper connection: `pause` at once when it drops, `resume` if it comes
    back with the session, `on_lost` when the session is lost or not back within its timeout."""

    def __init__(self, client: KazooClient, session_timeout: float, pause: Callable[[], None],
                 resume: Callable[[], None], on_lost: Callable[[str], None]):
        self.client = client
        self.session_timeout = session_timeout
        self._pause, self._resume, self._on_lost = pause, resume, on_lost
        self._suspended = threading.Event()
        self._back = threading.Event()
        self._lost = False
        client.add_listener(self._state_changed)

    def _state_changed(self, state: str) -> None:
        # Called on kazoo's connection thread: no blocking here, and no ZooKeeper calls.
        if self._lost:
            return
        if state == KazooState.SUSPENDED:
            log.warning("ZooKeeper connection lost: publishing stopped until it is back (session timeout %.0f s)",
                        self.session_timeout)
            self._back.clear()
            self._suspended.set()
            self._pause()
            threading.Thread(target=self._wait_for_connection, name="leader-guard", daemon=True).start()
        elif state == KazooState.LOST:
            self._lose("the ZooKeeper session expired")
        elif state == KazooState.CONNECTED and self._suspended.is_set():
            self._suspended.clear()
            self._back.set()
            log.info("ZooKeeper connection back with the session: publishing again")
            self._resume()

    def _wait_for_connection(self) -> None:
        if not self._back.wait(self.session_timeout) and self._suspended.is_set():
            self._lose(f"ZooKeeper not reachable for the session timeout ({self.session_timeout:.0f} s)")

    def _lose(self, why: str) -> None:
        if not self._lost:
            self._lost = True
            self._pause()
            self._on_lost(f"lost leadership: {why}")
