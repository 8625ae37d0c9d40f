"""The Admin service (vnodectl, batch hooks): every call authorized and run on the store thread."""

from vnode_sync import validation
from vnode_sync.coordinator.state.call_threads import EncodingThreads, StoreThread
from vnode_sync.coordinator.cluster import Cluster
from vnode_sync.coordinator.config import WORK_CONSERVING
from vnode_sync.coordinator.control.node_runtime import second_agent
from vnode_sync.coordinator.state.pressure import rank, window_of
from vnode_sync.coordinator.api.rpc import store_rpc
from vnode_sync.coordinator.state.groups import GroupRecord, group_paths
from vnode_sync.coordinator.api.status_encoding import NodeView, StatusAnswer, group_message, group_statuses, user_message
from vnode_sync.coordinator.control.job_vnodes import by_user, job_statuses, job_vnodes
from vnode_sync.errors import NotFound
from vnode_sync.security.authorization import AccessPolicy, OpenAccess, readable_by
from vnode_sync.wire import vnode_pb2 as pb, vnode_pb2_grpc as pb_grpc


def _priority(value: int) -> int:
    return validation.priority(value)


class AdminService(pb_grpc.AdminServicer):
    def __init__(self, cluster: Cluster, access: AccessPolicy | OpenAccess, store_thread: StoreThread,
                 encoding_threads: EncodingThreads):
        self.cluster = cluster
        self.commands = cluster.commands
        self.access = access
        self.store_thread = store_thread
        self.encoding_threads = encoding_threads

    @store_rpc
    def AddUser(self, request, caller):
        return user_message(self.commands.add_user(request.user, request.uid, _priority(request.priority),
                                                   request.active, caller.actor))

    @store_rpc
    def SetPriority(self, request, caller):
        return user_message(self.commands.set_priority(request.user, _priority(request.priority), caller.actor))

    @store_rpc
    def SetReservation(self, request, caller):
        return user_message(self.commands.set_reservation(request.user, request.bps, caller.actor))

    @store_rpc
    def SetLimit(self, request, caller):
        return user_message(self.commands.set_limit(request.user, request.bps, caller.actor))

    @store_rpc
    def SetActive(self, request, caller):
        return user_message(self.commands.set_active(request.user, request.active, caller.actor))

    @store_rpc
    def RemoveUser(self, request, caller):
        self.commands.remove_user(request.user, caller.actor)
        return pb.RemoveUserResponse(user=request.user)

    @store_rpc
    def AddGroup(self, request, caller):
        g = request.group
        record = self.cluster.group_commands.add_group(GroupRecord(g.name, g.weight, g.parent, g.floor_bps,
                                                                   g.ceiling_bps), caller.actor)
        return group_message(record, ())

    @store_rpc
    def SetGroup(self, request, caller):
        given = {f: getattr(request, f) for f in ("weight", "parent", "floor_bps", "ceiling_bps")
                 if request.HasField(f)}
        record = self.cluster.group_commands.set_group(request.name, caller.actor, **given)
        return group_message(record, self.cluster.users())

    @store_rpc
    def RemoveGroup(self, request, caller):
        return group_message(self.cluster.group_commands.remove_group(request.name, caller.actor), ())

    @store_rpc
    def MoveUser(self, request, caller):
        return user_message(self.cluster.group_commands.move_user(request.user, request.group, caller.actor))

    @store_rpc
    def ListGroups(self, request, caller):
        users = self.cluster.users()
        return pb.ListGroupsResponse(groups=[group_message(g, users) for g in self.cluster.group_commands.groups()],
                                     generation=self.cluster.generation())

    @store_rpc
    def ListUsers(self, request, caller):
        return pb.ListUsersResponse(users=[user_message(u) for u in readable_by(caller, self.cluster.users())],
                                    generation=self.cluster.generation())

    def _nodes(self, shown=None) -> list[pb.StorageNode]:
        nodes = []
        updates = self.cluster.allocation_updates()
        for node in self.cluster.config.storage_nodes if shown is None else shown:
            runtime = self.cluster.runtime.node_runtime(node.node_id)
            registered = {d.name: d for d in runtime.devices}
            devices = [pb.Device(name=d.name, major=registered.get(d.name, pb.Device()).major,
                                 minor=registered.get(d.name, pb.Device()).minor, read_bps=d.read_bps,
                                 write_bps=d.write_bps, read_iops=d.read_iops, write_iops=d.write_iops)
                       for d in node.devices]
            errors = runtime.errors + ([second_agent(runtime.streams)] if runtime.streams > 1 else [])
            nodes.append(pb.StorageNode(node_id=node.node_id, devices=devices, backend=runtime.backend,
                                        applied_generation=runtime.applied_generation,
                                        last_seen_unix=runtime.last_seen, connected=runtime.streams > 0,
                                        limitations=runtime.limitations, errors=errors,
                                        allocation_updates=updates.get(node.node_id, 0),
                                        not_enforcing=runtime.not_enforcing, degraded=runtime.degraded))
        return nodes

    def _node_change(self, node) -> pb.StorageNodeChange:
        return pb.StorageNodeChange(node=self._nodes([node])[0], generation=self.cluster.generation())

    @store_rpc
    def AddStorageNode(self, request, caller):
        return self._node_change(self.cluster.node_commands.add(request.node_id, request.devices, request.endpoints,
                                                                 caller.actor))

    @store_rpc
    def SetStorageNode(self, request, caller):
        endpoints = list(request.endpoints) if request.replace_endpoints else None
        return self._node_change(self.cluster.node_commands.set(request.node_id, request.devices,
                                                                 request.remove_devices, endpoints, caller.actor))

    @store_rpc
    def RemoveStorageNode(self, request, caller):
        return self._node_change(self.cluster.node_commands.remove(request.node_id, caller.actor))

    @store_rpc
    def ListNodes(self, request, caller):
        return pb.ListNodesResponse(nodes=self._nodes(), generation=self.cluster.generation())

    @store_rpc
    def Status(self, request, caller) -> StatusAnswer:
        """Every (user, node) entry, or, above `request.max_entries`, one summary per user; read here,
        encoded off the store thread."""
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
        publishing, runtime = self.cluster.publishing, self.cluster.runtime
        snapshot = publishing.refresh_snapshot()
        # Each user's running jobs' VNodes, each listed right after its user (its own rates and share).
        job_rows: dict[str, list] = {}
        for row in snapshot.job_rows:
            job_rows.setdefault(validation.user_of_job_vnode(row.name), []).append(row)
        users = [row for u in users for row in (u, *job_rows.get(u.name, ()))]
        views = [NodeView(node.node_id, runtime.node_runtime(node.node_id), publishing.targets(node.node_id),
                          runtime.measured_rates(node.node_id),
                          self.cluster.allocation_status(node.node_id)) for node in nodes]
        summarise = not (request.user or request.node) and (
            request.summarise or 0 < request.max_entries < len(users) * len(views))
        policy = self.cluster.config.policy
        shown = {n.node_id for n in nodes}
        head = pb.StatusResponse(generation=self.cluster.generation(),
                                 nodes=[n for n in self._nodes() if n.node_id in shown],
                                 sharing=policy.sharing, groups=self._group_statuses(caller, request))
        # Every running job, with the VNode it has or why not: read here, as the snapshot holds only those
        # a compute agent named.
        jobs = job_statuses(job_vnodes(self.cluster.store.running_jobs()), {row.name for row in snapshot.job_rows},
                            runtime.compute_nodes(), static=policy.sharing != WORK_CONSERVING)
        return StatusAnswer(head, users, views, summarise, jobs)

    def _group_statuses(self, caller, request) -> list[pb.GroupStatus]:
        """Every group with its subtree's rates (the snapshot's, refreshed above), on a status of the whole
        cluster, for those who may read every user's (a user sees none: a group's total tells of its
        other users)."""
        snapshot = self.cluster.publishing.snapshot()
        if not snapshot.groups or caller.role == "user" or request.user or request.node:
            return []
        weights = self.cluster.weights
        return group_statuses(snapshot.groups, snapshot.users, by_user(self.cluster.ledger.user_rates()),
                              by_user(weights.given_totals()) if weights is not None else {})

    @store_rpc
    def Pressure(self, request, caller):
        window = window_of(request.window_seconds)
        snapshot = self.cluster.publishing.refresh_snapshot()
        readable = readable_by(caller, snapshot.users)
        names = {u.name for u in readable}
        users = [(u.name, u.effective_priority) for u in readable]
        users += [(row.name, row.effective_priority) for row in snapshot.job_rows
                  if validation.user_of_job_vnode(row.name) in names]
        paths = group_paths(snapshot.groups)
        groups = {u.name: paths.get(u.group, "") for u in readable}
        book = self.cluster.ledger
        now = book.now()
        return pb.PressureResponse(generation=self.cluster.generation(),
                                   sharing=self.cluster.config.policy.sharing, window_seconds=window,
                                   covered_seconds=min(window, now - book.started), sampled_at_unix=now,
                                   users=rank(users, self.cluster.share_views(), book, window, request.limit, now,
                                              groups))

    @store_rpc
    def StartJob(self, request, caller):
        record, priority = self.commands.start_job(request.job_id, request.user, request.uid, request.node,
                                                   request.account, request.queue, request.requested_priority,
                                                   caller.actor, request.reservation_bps, request.limit_bps)
        return pb.JobResponse(user=user_message(record), effective_priority=priority,
                              generation=self.cluster.generation())

    @store_rpc
    def EndJob(self, request, caller):
        record = self.commands.end_job(request.job_id, request.node, caller.actor)
        return pb.JobResponse(user=user_message(record) if record else None,
                              generation=self.cluster.generation())

    @store_rpc
    def ReconcileJobs(self, request, caller):
        dropped = self.commands.reconcile_jobs(request.source, set(request.job_ids), caller.actor)
        return pb.RunningJobsResponse(expired_job_ids=dropped)
