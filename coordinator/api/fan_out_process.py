"""A fan-out process of the coordinator: serves the desired-state streams and usage report
streams of one share of the storage nodes, on an ephemeral port of the coordinator's listen host.

Started and supervised by the coordinator (fan_out/processes.py), with the coordinator's config:
the same server certificate and CA (mutual TLS), the same access rules for WatchDesiredState and
StreamUsage (a node's certificate watches and reports only as its own node), the same audit log.
It serves nothing else. It reads its nodes' stream messages, already serialized by the
coordinator, as FanOutBatch frames on stdin, and tells the coordinator on stdout its port, each
stream opened and closed, and the reports taken, in batches (every REPORT_BATCH_SECONDS). It ends
when stdin closes (the coordinator is gone) or at SIGTERM/SIGINT.

    python -m vnode_sync.coordinator.api.fan_out_process --config FILE --host HOST --index K --of N
"""

import argparse
import asyncio
import logging
import signal
import sys

from grpc import aio

from vnode_sync import validation
from vnode_sync.coordinator.config import load_config
from vnode_sync.coordinator.fan_out.changes import NodeChanges, send_changes
from vnode_sync.coordinator.fan_out.pipe import frame, read_frame, share_of
from vnode_sync.coordinator.heap import tune_for_streams
from vnode_sync.coordinator.api.rpc import abort, refuse_missing, service_handlers
from vnode_sync.coordinator.api.server import SERVER_OPTIONS
from vnode_sync.errors import NotFound, Unavailable, VNodeSyncError
from vnode_sync.logs import configure
from vnode_sync.security.audit import send_audit_to
from vnode_sync.security.authorization import AccessPolicy, OpenAccess
from vnode_sync.security.identity import caller_of
from vnode_sync.security.tls import server_credentials
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

STOP_GRACE_SECONDS = 0.5
# Reports are handed to the coordinator this often, in one frame: one wake-up of its loop for many.
REPORT_BATCH_SECONDS = 0.01


def _no_user_calls(user: str) -> int:
    raise Unavailable("a fan-out process answers no user calls")


class StreamsOfShare(pb_grpc.AgentLinkServicer):
    """WatchDesiredState for the nodes of share `index` of `processes`, StreamUsage for any
    configured node; every other call is UNIMPLEMENTED."""

    def __init__(self, index: int, processes: int, nodes: set[str], access: AccessPolicy | OpenAccess, tell):
        """`nodes`: the storage nodes served, shared with `access` and updated in place as the
        coordinator's batches say."""
        self.index, self.processes = index, processes
        self.nodes = nodes
        self.access = access
        self.tell = tell     # tell(FanOutEvent): to the coordinator
        self.changes = NodeChanges()
        self.granting = asyncio.Event()   # clear while the coordinator learns (docs/ha.md): streams wait
        self.granting.set()
        self.messages: dict[str, bytes] = {}
        self.generation = 0
        self._reports: list[pb.UsageReport] = []

    def take(self, batch: pb.FanOutBatch) -> None:
        """New messages: only the streams of nodes whose message changed send (as on the coordinator)."""
        self.generation = max(self.generation, batch.generation)
        if batch.HasField("gate"):
            self._take_gate(batch.gate)
        if batch.HasField("nodes"):
            gone = self.nodes - set(batch.nodes.node_ids)
            self.nodes.clear()
            self.nodes.update(batch.nodes.node_ids)
            for node_id in gone:
                self.messages.pop(node_id, None)
            self.changes.move(sorted(gone))   # a removed node's streams end
        changed = set()
        for state in batch.states:
            if self.messages.get(state.node_id) != state.message:
                self.messages[state.node_id] = state.message
                changed.add(state.node_id)
        self.changes.wake(changed)

    def _take_gate(self, gate: pb.FanOutGate) -> None:
        """As the coordinator's FanOut: closed ends every stream (and a stream opened meanwhile ends at
        once); learning holds the streams before they send."""
        if gate.closed:
            self.changes.close()
        else:
            self.changes.closing = False
        if gate.learn_seconds > 0:
            self.granting.clear()
            asyncio.get_running_loop().call_later(gate.learn_seconds, self.granting.set)

    async def WatchDesiredState(self, request, context):
        await refuse_missing(context, request, "WatchDesiredState")
        try:
            self.access.authorize("WatchDesiredState", caller_of(context), request, context.peer())
            validation.node_id(request.node_id)
            if request.node_id not in self.nodes:
                raise NotFound(f"storage node {request.node_id!r} is not configured on the coordinator")
            if share_of(request.node_id, self.processes) != self.index:
                raise Unavailable(f"node {request.node_id!r} is not served by this fan-out process: register again")
        except VNodeSyncError as e:
            await abort(context, "WatchDesiredState", e)
        await self.granting.wait()
        self.tell(pb.FanOutEvent(opened=request.node_id))
        try:
            await send_changes(context, request.node_id, self.changes, self.messages.get)
        finally:
            self.tell(pb.FanOutEvent(closed=request.node_id))

    async def StreamUsage(self, reports, context):
        """Each report authorized as the coordinator's StreamUsage does, then handed on in a batch;
        the checks the coordinator would refuse a report for (a node not configured, a name that
        cannot be a user) are made here, so such a report ends the call here as it would there."""
        caller, peer = caller_of(context), context.peer()
        async for report in reports:
            await refuse_missing(context, report, "StreamUsage", "UsageReport")
            try:
                self.access.authorize("StreamUsage", caller, report, peer)
                if report.node_id not in self.nodes:
                    raise NotFound(f"storage node {report.node_id!r} is not configured on the coordinator")
                for name in set(report.demand.users) - {""}:
                    validation.user_name(name)
            except VNodeSyncError as e:
                await abort(context, "StreamUsage", e)
            if not self._reports:
                asyncio.get_running_loop().call_later(REPORT_BATCH_SECONDS, self._hand_on_reports)
            self._reports.append(report)
        return pb.ReportAck(generation=self.generation)

    def _hand_on_reports(self) -> None:
        reports, self._reports = self._reports, []
        self.tell(pb.FanOutEvent(reports=reports))


async def serve(config_path: str, host: str, index: int, processes: int) -> int:
    config = load_config(config_path)
    configure("coordinator", config.log_format)
    if config.audit_log:
        send_audit_to(config.audit_log)
    credentials = server_credentials(config.security.tls) if config.security.tls else None
    # The file's nodes until the coordinator's first batch says the store's.
    nodes = {n.node_id for n in config.storage_nodes}
    access = AccessPolicy(nodes, _no_user_calls) if credentials else OpenAccess()
    loop = asyncio.get_running_loop()
    # Buffered on the loop: a coordinator busy for a moment does not stall this process's streams.
    out, _ = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout.buffer)

    def tell(event: pb.FanOutEvent) -> None:
        out.write(frame(event.SerializeToString()))

    streams = StreamsOfShare(index, processes, nodes, access, tell)
    server = aio.server(options=SERVER_OPTIONS)
    address = f"{host}:0"
    port = server.add_insecure_port(address) if credentials is None else server.add_secure_port(address, credentials)
    server.add_generic_rpc_handlers((service_handlers("AgentLink", streams, raw_responses=("WatchDesiredState",)),))
    await server.start()
    tune_for_streams()   # as the coordinator: thousands of streams, a burst of objects per change
    tell(pb.FanOutEvent(port=port))
    log.info("fan-out process %d of %d serving streams on port %d", index + 1, processes, port)

    reader = asyncio.StreamReader(limit=1 << 30)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    async def read_batches() -> None:
        while (payload := await read_frame(reader)) is not None:
            streams.take(pb.FanOutBatch.FromString(payload))
    reading = asyncio.create_task(read_batches())
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait((reading, stopping), return_when=asyncio.FIRST_COMPLETED)
    streams.changes.close()
    await server.stop(STOP_GRACE_SECONDS)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vnode-coordinator fan-out process", description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--host", required=True)
    parser.add_argument("--index", type=int, required=True)
    parser.add_argument("--of", type=int, required=True, dest="processes")
    args = parser.parse_args(argv)
    return asyncio.run(serve(args.config, args.host, args.index, args.processes))


if __name__ == "__main__":
    sys.exit(main())
