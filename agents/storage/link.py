"""The agent's connection to the coordinator: register, watch desired state, report usage.

The agent dials out and listens on nothing, so only the coordinator it was configured
with can give it instructions. While the coordinator is unreachable the agent keeps
the last state it had and retries with capped, jittered exponential backoff.

A coordinator with fan-out processes answers Register with the port of the process that serves
this node's streams (same host, same TLS identity); the desired state is watched and usage is
reported there, and Register, if the stream breaks, tells the port anew.

Usage reports go on one long-lived StreamUsage call (a report is then one message to the
coordinator, not a call), from a thread of their own; a report not yet sent is replaced by a
newer one (its counters are newer), which takes in the older one's demand summary entries.
"""

import logging
import threading
from collections.abc import Callable

import grpc

from vnode_sync.agents.storage.demand_summary import merged
from vnode_sync.security.tls import TlsFiles, secure_channel
from vnode_sync.supervision import Backoff
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc
from vnode_sync.wire.leader import dial, split_addresses

log = logging.getLogger(__name__)

RPC_TIMEOUT_SECONDS = 5.0
# Heal fast: the agent's own jittered backoff is capped at ~2 s and gRPC's channel backoff
# (which would stack on it, up to 120 s by default) is kept as short.
RECONNECT_FIRST_SECONDS = 0.2
RECONNECT_CAP_SECONDS = 2.0
CHANNEL_OPTIONS = (("grpc.initial_reconnect_backoff_ms", 200), ("grpc.min_reconnect_backoff_ms", 200),
                   ("grpc.max_reconnect_backoff_ms", int(RECONNECT_CAP_SECONDS * 1000)))


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
        self.credentials = credentials
        # With TLS, only a peer whose certificate the CA issued for the coordinator is believed.
        self.channel = dial(address, self._channel)
        self.stub = pb_grpc.AgentLinkStub(self.channel)
        self._stream_channel: tuple[int, grpc.Channel | None, pb_grpc.AgentLinkStub] = (0, None, self.stub)
        self._stream = None
        self._stop = threading.Event()
        self.known_generation = 0
        self._unreachable_logged = False
        self.state = CONNECTING
        self._reports = threading.Condition()
        self._latest_report: pb.UsageReport | None = None
        self._report_call = 0   # which StreamUsage call takes reports now (an older one's iterator ends)

    def _backoff(self) -> Backoff:
        return Backoff(first=RECONNECT_FIRST_SECONDS, cap=RECONNECT_CAP_SECONDS)

    def _channel(self, address: str) -> grpc.Channel:
        # With TLS, only a peer whose certificate the CA issued for the coordinator is believed.
        return (secure_channel(address, self.credentials, CHANNEL_OPTIONS) if self.credentials
                else grpc.insecure_channel(address, options=CHANNEL_OPTIONS))

    @property
    def stream_port(self) -> int:
        """The port the desired state is watched at: 0, the coordinator's address; else a fan-out process's."""
        return self._stream_channel[0]

    def _stream_stub(self, port: int) -> pb_grpc.AgentLinkStub:
        """Where the desired state is watched: the coordinator (0) or its fan-out process at `port`."""
        current_port, channel, stub = self._stream_channel
        if len(split_addresses(self.address)) > 1:
            return self.stub   # several coordinators (docs/ha.md) serve no fan-out processes
        if port != current_port:
            if channel is not None:
                channel.close()
            channel = self._channel(f"{self.address.rpartition(':')[0]}:{port}") if port else None
            stub = pb_grpc.AgentLinkStub(channel) if channel else self.stub
            self._stream_channel = (port, channel, stub)
            with self._reports:   # the report call moves there too
                self._report_call += 1
                self._reports.notify_all()
        return stub

    def run(self) -> None:
        """Register and follow the desired-state stream until stopped, reconnecting with backoff
        whenever the coordinator is out of reach (never giving up: the last state stays in force)."""
        backoff = self._backoff()
        while not self._stop.is_set():
            request = self.register()
            try:
                registered = self.stub.Register(request, timeout=RPC_TIMEOUT_SECONDS)
                self._stream = self._stream_stub(registered.stream_port).WatchDesiredState(
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

    def report(self, report: pb.UsageReport) -> None:
        """Send `report` on the report stream (replacing one not yet sent, whose demand summary it takes in)."""
        with self._reports:
            unsent = self._latest_report
            if unsent is not None and unsent.HasField("demand") and report.HasField("demand"):
                report.demand.CopyFrom(merged(unsent.demand, report.demand))
            self._latest_report = report
            self._reports.notify_all()

    def _reports_of_call(self, call: int):
        """The request iterator of one StreamUsage call: ends when stopping or when a newer call took over."""
        while True:
            with self._reports:
                while self._latest_report is None and call == self._report_call and not self._stop.is_set():
                    self._reports.wait()
                if call != self._report_call or self._stop.is_set():
                    return
                report, self._latest_report = self._latest_report, None
            yield report

    def send_reports(self) -> None:
        """Send reports on one StreamUsage call after another until stopped (on a thread of its own)."""
        backoff = self._backoff()
        while not self._stop.is_set():
            with self._reports:
                self._report_call += 1
                call = self._report_call
                self._reports.notify_all()   # the previous call's iterator ends
            try:
                self._stream_channel[2].StreamUsage(self._reports_of_call(call))   # where the stream is
                backoff.reset()
            except grpc.RpcError as e:
                if self._stop.is_set():
                    break
                log.debug("usage reports not delivered (%s); a new report stream follows", e.code().name)
                self._stop.wait(backoff.next())

    def stop(self) -> None:
        self._stop.set()
        with self._reports:
            self._reports.notify_all()
        if self._stream is not None:
            self._stream.cancel()
        if self._stream_channel[1] is not None:
            self._stream_channel[1].close()
        self.channel.close()   # ends a report call still open
