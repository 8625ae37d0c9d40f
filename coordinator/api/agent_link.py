"""The AgentLink service (storage and compute agents), answered on the event loop.

A storage agent's long-lived desired-state stream holds no thread: it waits on its node's event
(fan-out) and sends bytes serialized once per node and generation. Usage and connection reports
are kept in memory.
"""

import logging
from collections.abc import Callable

from vnode_sync import validation
from vnode_sync.coordinator.cluster import Cluster
from vnode_sync.coordinator.fan_out.changes import FanOut
from vnode_sync.coordinator.control.node_edge import Edge
from vnode_sync.coordinator.control.node_runtime import second_agent
from vnode_sync.coordinator.api.rpc import abort, loop_rpc, refuse_missing
from vnode_sync.errors import VNodeSyncError
from vnode_sync.security.authorization import AccessPolicy, OpenAccess
from vnode_sync.security.identity import caller_of
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)


class AgentLinkService(pb_grpc.AgentLinkServicer):
    def __init__(self, cluster: Cluster, access: AccessPolicy | OpenAccess, fan_out: FanOut,
                 stream_port: Callable[[str], int] = lambda node_id: 0):
        self.publishing = cluster.publishing
        self.runtime = cluster.runtime
        self.access = access
        self.fan_out = fan_out
        self.stream_port = stream_port   # node_id -> the port of the fan-out process serving its streams (0: here)

    @loop_rpc
    def Register(self, request, caller):
        validation.node_id(request.node_id)
        generation = self.runtime.register_node(request.node_id, list(request.devices), request.backend,
                                                list(request.limitations),
                                                Edge(request.shares_by_weight, request.shares_per_node))
        log.info("node %s registered (backend %s)", request.node_id, request.backend)
        return pb.RegisterResponse(generation=generation, stream_port=self.stream_port(request.node_id))

    async def WatchDesiredState(self, request, context):
        await refuse_missing(context, request, "WatchDesiredState")
        try:
            self.access.authorize("WatchDesiredState", caller_of(context), request, context.peer())
            validation.node_id(request.node_id)
            streams = self.runtime.stream_opened(request.node_id)
        except VNodeSyncError as e:
            await abort(context, "WatchDesiredState", e)
        if streams > 1:
            log.warning("node %s: %s (the newest from %s)", request.node_id, second_agent(streams), context.peer())
        try:
            await self.fan_out.send(context, request.node_id)
        finally:
            self.runtime.stream_closed(request.node_id)

    async def StreamUsage(self, reports, context):
        """Usage reports on one call; each is authorized and booked on its own."""
        caller, peer = caller_of(context), context.peer()
        generation = self.publishing.generation()
        async for report in reports:
            await refuse_missing(context, report, "StreamUsage", "UsageReport")
            try:
                self.access.authorize("StreamUsage", caller, report, peer)
                generation = self.runtime.report_usage(report)
            except VNodeSyncError as e:
                await abort(context, "StreamUsage", e)
        return pb.ReportAck(generation=generation)

    @loop_rpc
    def ReportConnections(self, request, caller):
        generation = self.runtime.report_connections(request.reporter, list(request.connections))
        self.fan_out.connections_reported()
        return pb.ReportAck(generation=generation)
