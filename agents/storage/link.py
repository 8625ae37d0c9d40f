"""The agent's connection to the coordinator: register, watch desired state, report usage.

The agent dials out and listens on nothing, so only the coordinator it was configured
with can give it instructions. While the coordinator is unreachable the agent keeps
the last state it had and retries with capped, jittered exponential backoff.
"""

import logging
import random
import threading
from collections.abc import Callable

import grpc

from vnode_sync.security.tls import TlsFiles, secure_channel
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

RPC_TIMEOUT_SECONDS = 5.0
# Heal fast: the agent's own jittered backoff is capped at ~2 s and gRPC's channel backoff
# (which would stack on it, up to 120 s by default) is kept as short.
RECONNECT_CAP_SECONDS = 2.0
CHANNEL_OPTIONS = (("grpc.initial_reconnect_backoff_ms", 200), ("grpc.min_reconnect_backoff_ms", 200),
                   ("grpc.max_reconnect_backoff_ms", int(RECONNECT_CAP_SECONDS * 1000)))


class Backoff:
    def __init__(self, first: float = 0.2, cap: float = RECONNECT_CAP_SECONDS):
        self.first, self.cap, self.current = first, cap, first

    def next(self) -> float:
        delay = self.current * random.uniform(0.8, 1.2)
        self.current = min(self.cap, self.current * 2)
        return delay

    def reset(self) -> None:
        self.current = self.first


# CoordinatorLink.state
CONNECTING, CONNECTED, UNREACHABLE, REFUSED = "connecting", "connected", "unreachable", "refused"
LINK_STATES = (CONNECTING, CONNECTED, UNREACHABLE, REFUSED)


class CoordinatorLink:
    def __init__(self, address: str, register: Callable[[], pb.RegisterRequest],
                 on_state: Callable[[pb.DesiredState], None],
                 credentials: TlsFiles | None = None, on_disconnect: Callable[[], None] | None = None):
        self.address = address
        self.register = register
        self.on_state = on_state
        self.on_disconnect = on_disconnect or (lambda: None)
        # With TLS, only a peer whose certificate the CA issued for the coordinator is believed.
        self.channel = (secure_channel(address, credentials, CHANNEL_OPTIONS) if credentials
                        else grpc.insecure_channel(address, options=CHANNEL_OPTIONS))
        self.stub = pb_grpc.AgentLinkStub(self.channel)
        self._stream = None
        self._stop = threading.Event()
        self.known_generation = 0
        self._unreachable_logged = False
        self.state = CONNECTING
        self.coordinator_generation = 0   # as the coordinator last acknowledged a usage report

    def run(self) -> None:
        backoff = Backoff()
        while not self._stop.is_set():
            request = self.register()
            try:
                self.stub.Register(request, timeout=RPC_TIMEOUT_SECONDS)
                self._stream = self.stub.WatchDesiredState(
                    pb.WatchRequest(node_id=request.node_id, known_generation=self.known_generation))
                for state in self._stream:
                    self.state = CONNECTED
                    if self._unreachable_logged:
                        log.info("coordinator %s reachable again", self.address)
                        self._unreachable_logged = False
                    backoff.reset()
                    self.known_generation = state.generation
                    self.on_state(state)
            except grpc.RpcError as e:
                if self._stop.is_set():
                    break
                self.on_disconnect()
                delay = backoff.next()
                refused = e.code() in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT,
                                       grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED)
                self.state = REFUSED if refused else UNREACHABLE
                if refused:
                    log.error("coordinator %s refused this agent: %s; retrying in %.1fs",
                              self.address, e.details(), delay)
                elif not self._unreachable_logged:
                    log.warning("coordinator %s unreachable (%s); enforcing the last state, retrying",
                                self.address, e.code().name)
                    self._unreachable_logged = True
                self._stop.wait(delay)
            else:
                self.on_disconnect()
                self.state = UNREACHABLE
                self._stop.wait(backoff.next())  # stream ended cleanly: coordinator restarting

    def report(self, report: pb.UsageReport) -> bool:
        try:
            self.coordinator_generation = self.stub.ReportUsage(report, timeout=RPC_TIMEOUT_SECONDS).generation
            return True
        except grpc.RpcError as e:
            log.debug("usage report not delivered: %s", e.code().name)
            return False

    def stop(self) -> None:
        self._stop.set()
        if self._stream is not None:
            self._stream.cancel()
        self.channel.close()
