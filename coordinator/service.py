"""The coordinator's gRPC face: Admin (vnodectl, batch hooks) and AgentLink (storage agents)."""

import functools
import logging
from concurrent import futures

import grpc

from vnode_sync import validation
from vnode_sync.coordinator.cluster import Cluster
from vnode_sync.coordinator.store import UserRecord
from vnode_sync.errors import InvalidArgument, NotFound, Unavailable, VNodeSyncError
from vnode_sync.security.authorization import (AccessPolicy, OpenAccess, PermissionDenied, Unauthenticated,
                                               readable_by)
from vnode_sync.security.identity import caller_of
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

# How often an idle desired-state stream checks that its agent is still there.
STREAM_IDLE_CHECK_SECONDS = 1.0

_STATUS_OF = [
    (Unauthenticated, grpc.StatusCode.UNAUTHENTICATED),
    (PermissionDenied, grpc.StatusCode.PERMISSION_DENIED),
    (InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT),
    (NotFound, grpc.StatusCode.NOT_FOUND),
    (Unavailable, grpc.StatusCode.UNAVAILABLE),
    (VNodeSyncError, grpc.StatusCode.FAILED_PRECONDITION),
]


def _abort(context, name: str, error: VNodeSyncError):
    code = next(c for kind, c in _STATUS_OF if isinstance(error, kind))
    if not isinstance(error, (Unauthenticated, PermissionDenied)):  # those are in the audit log already
        log.info("%s refused: %s", name, error)
    context.abort(code, str(error))


def _rpc(method):
    """Authorize the caller, then map vnode-sync errors to gRPC status codes, in one place."""

    @functools.wraps(method)
    def wrapper(self, request, context):
        try:
            caller = self.access.authorize(method.__name__, caller_of(context), request, context.peer())
            return method(self, request, context, caller)
        except VNodeSyncError as e:
            _abort(context, method.__name__, e)

    return wrapper


def user_message(record: UserRecord) -> pb.User:
    return pb.User(name=record.name, uid=record.uid, priority=record.effective_priority,
                   active=record.active, running_jobs=record.running_jobs)


def _priority(value: int) -> int:
    return validation.priority(value)


class AdminService(pb_grpc.AdminServicer):
    def __init__(self, cluster: Cluster, access: AccessPolicy | OpenAccess):
        self.cluster = cluster
        self.access = access

    @_rpc
    def AddUser(self, request, context, caller):
        return user_message(self.cluster.add_user(request.user, request.uid, _priority(request.priority),
                                                  request.active, caller.actor))

    @_rpc
    def SetPriority(self, request, context, caller):
        return user_message(self.cluster.set_priority(request.user, _priority(request.priority),
                                                      caller.actor))

    @_rpc
    def SetActive(self, request, context, caller):
        return user_message(self.cluster.set_active(request.user, request.active, caller.actor))

    @_rpc
    def RemoveUser(self, request, context, caller):
        self.cluster.remove_user(request.user, caller.actor)
        return pb.RemoveUserResponse(user=request.user)

    @_rpc
    def ListUsers(self, request, context, caller):
        return pb.ListUsersResponse(users=[user_message(u) for u in readable_by(caller, self.cluster.users())],
                                    generation=self.cluster.generation())

    def _nodes(self) -> list[pb.StorageNode]:
        nodes = []
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
                                        limitations=runtime.limitations, errors=runtime.errors))
        return nodes

    @_rpc
    def ListNodes(self, request, context, caller):
        return pb.ListNodesResponse(nodes=self._nodes(), generation=self.cluster.generation())

    @_rpc
    def Status(self, request, context, caller):
        users = readable_by(caller, self.cluster.users())
        desired = {n.node_id: self.cluster.desired_state(n.node_id) for n in self.cluster.config.storage_nodes}
        statuses = []
        for record in users:
            per_node = []
            for node_id, state in desired.items():
                spec = next((v for v in state.vnodes if v.user == record.name), None)
                rate = self.cluster.measured_rate(node_id, record.name)
                runtime = self.cluster.node_runtime(node_id)
                per_node.append(pb.UserNodeStatus(
                    node_id=node_id,
                    target_read_bps=sum(s.read_bps for s in spec.shares) if spec else 0,
                    target_write_bps=sum(s.write_bps for s in spec.shares) if spec else 0,
                    measured_read_bps=rate.read_bps, measured_write_bps=rate.write_bps,
                    applied_generation=runtime.applied_generation,
                    held_at_limit=record.name in runtime.held_at_limit))
            statuses.append(pb.UserStatus(user=user_message(record), nodes=per_node))
        return pb.StatusResponse(generation=self.cluster.generation(), mode=self.cluster.config.policy.mode,
                                 users=statuses, nodes=self._nodes())

    @_rpc
    def StartJob(self, request, context, caller):
        record, priority = self.cluster.start_job(request.job_id, request.user, request.uid, request.node,
                                                  request.account, request.queue, request.requested_priority,
                                                  caller.actor)
        return pb.JobResponse(user=user_message(record), effective_priority=priority,
                              generation=self.cluster.generation())

    @_rpc
    def EndJob(self, request, context, caller):
        record = self.cluster.end_job(request.job_id, request.node, caller.actor)
        return pb.JobResponse(user=user_message(record) if record else None,
                              generation=self.cluster.generation())

    @_rpc
    def ReconcileJobs(self, request, context, caller):
        dropped = self.cluster.reconcile_jobs(request.source, set(request.job_ids), caller.actor)
        return pb.RunningJobsResponse(expired_job_ids=dropped)


class AgentLinkService(pb_grpc.AgentLinkServicer):
    def __init__(self, cluster: Cluster, access: AccessPolicy | OpenAccess):
        self.cluster = cluster
        self.access = access

    @_rpc
    def Register(self, request, context, caller):
        validation.node_id(request.node_id)
        generation = self.cluster.register_node(request.node_id, list(request.devices), request.backend,
                                                list(request.limitations))
        log.info("node %s registered from %s (backend %s)", request.node_id, context.peer(), request.backend)
        return pb.RegisterResponse(generation=generation)

    def WatchDesiredState(self, request, context):
        try:
            self.access.authorize("WatchDesiredState", caller_of(context), request, context.peer())
            validation.node_id(request.node_id)
            self.cluster.stream_opened(request.node_id)
        except VNodeSyncError as e:
            _abort(context, "WatchDesiredState", e)
        try:
            sent = None
            while context.is_active():
                generation = self.cluster.generation()
                if generation != sent:
                    yield self.cluster.desired_state(request.node_id)
                    sent = generation
                self.cluster.wait_for_change(sent, STREAM_IDLE_CHECK_SECONDS)
        finally:
            self.cluster.stream_closed(request.node_id)

    @_rpc
    def ReportUsage(self, request, context, caller):
        return pb.ReportAck(generation=self.cluster.report_usage(request))

    @_rpc
    def ReportConnections(self, request, context, caller):
        return pb.ReportAck(generation=self.cluster.report_connections(request.reporter,
                                                                       list(request.connections)))


def create_server(cluster: Cluster, address: str, max_workers: int = 512,
                  credentials: grpc.ServerCredentials | None = None) -> tuple[grpc.Server, int]:
    """A started-able server bound to `address` (port 0 picks one); returns (server, port).

    Each agent's desired-state stream holds a worker thread, so max_workers bounds
    the number of storage nodes one coordinator serves. With credentials (mutual TLS)
    the access policy is enforced; without, every caller may do everything (lab).
    """
    access = (AccessPolicy([n.node_id for n in cluster.config.storage_nodes],
                           lambda user: cluster.store.user(user).priority) if credentials else OpenAccess())
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="rpc"))
    pb_grpc.add_AdminServicer_to_server(AdminService(cluster, access), server)
    pb_grpc.add_AgentLinkServicer_to_server(AgentLinkService(cluster, access), server)
    if credentials is None:
        port = server.add_insecure_port(address)
    else:
        port = server.add_secure_port(address, credentials)
    if port == 0:
        raise Unavailable(f"cannot listen on {address!r} (in use, or not a host:port)")
    return server, port
