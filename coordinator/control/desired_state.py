"""From users and capacities to each storage node's desired state.

Every VNode gets a `ResourceShare` per device and one for the node as a whole (device ""): a backend
that shares devices takes the former, one that shares the node (the DataNode's) the latter. Each
`Share` field means one thing whatever the sharing (vnode.proto): here
- `sharing: static`: the ceiling is the Algorithm 1 cap, as the paper: each resource's bandwidth (and
  iops, where configured) split by priority;
- `sharing: work-conserving`: the ceiling is the user's limit and the floor its reservation, on each
  resource the edge shares. Weights are the weight step's alone, in the allocation appended to the
  state (weight_control.py); cap-only edges get the step's caps there too, as lower ceilings
  (docs/fair-shares.md).
"""

from collections.abc import Sequence
from dataclasses import dataclass

from vnode_sync.coordinator.config import WORK_CONSERVING, Policy, StorageNodeConfig
from vnode_sync.coordinator.control.job_vnodes import JobVNode
from vnode_sync.coordinator.state.store import UserRecord
from vnode_sync.shares import NODE, priority_shares
from vnode_sync.wire import vnode_pb2 as pb

DEFAULT_VNODE_PRIORITY = 1


@dataclass(frozen=True)
class _Resource:
    """A device, or the node as a whole (its devices' capacities summed)."""

    name: str
    read_bps: int
    write_bps: int
    read_iops: int = 0
    write_iops: int = 0


def _resources(node: StorageNodeConfig) -> list[_Resource]:
    devices = [_Resource(d.name, d.read_bps, d.write_bps, d.read_iops, d.write_iops) for d in node.devices]
    # iops are split per device only: the one backend that shares the node cannot cap them.
    return devices + [_Resource(NODE, sum(d.read_bps for d in devices), sum(d.write_bps for d in devices))]


def _static(resource: _Resource, users: Sequence[UserRecord]) -> dict[str, pb.ResourceShare]:
    """Algorithm 1: each ceiling is the user's priority's part of the resource."""
    priorities = {u.name: u.effective_priority for u in users}
    split = {field: priority_shares(getattr(resource, field), priorities) if getattr(resource, field) else {}
             for field in ("read_bps", "write_bps", "read_iops", "write_iops")}
    return {name: pb.ResourceShare(
        device=resource.name,
        read=pb.Share(ceiling_bps=split["read_bps"].get(name, 0), ceiling_iops=split["read_iops"].get(name, 0)),
        write=pb.Share(ceiling_bps=split["write_bps"].get(name, 0), ceiling_iops=split["write_iops"].get(name, 0)))
        for name in priorities}


def _bounds(resource: _Resource, user: UserRecord) -> pb.ResourceShare:
    """Ceiling = limit; floor = reservation (never above the limit)."""
    limit, reserve = user.effective_limit, user.effective_reservation
    if limit:
        reserve = min(reserve, limit)
    bounds = pb.Share(floor_bps=reserve, ceiling_bps=limit)
    return pb.ResourceShare(device=resource.name, read=bounds, write=bounds)


def _default_share(resource: _Resource, policy: Policy) -> pb.ResourceShare:
    """Unidentified I/O never takes more than its fraction of each resource (and shares by the lowest weight)."""
    f = policy.default_vnode_fraction
    static = policy.sharing != WORK_CONSERVING
    return pb.ResourceShare(
        device=resource.name,
        read=pb.Share(ceiling_bps=int(resource.read_bps * f), ceiling_iops=int(resource.read_iops * f) if static else 0),
        write=pb.Share(ceiling_bps=int(resource.write_bps * f),
                       ceiling_iops=int(resource.write_iops * f) if static else 0))


def build_desired_state(generation: int, node: StorageNodeConfig, users: Sequence[UserRecord],
                        policy: Policy, connections: Sequence[pb.ConnectionOwner] = (),
                        jobs: Sequence[JobVNode] = (), job_rows: Sequence[UserRecord] = ()) -> pb.DesiredState:
    """`job_rows` (the active users' jobs that have VNodes, job_vnodes.py) become VNodes beside their users'."""
    active = [u for u in users if u.active]
    rows = [*active, *job_rows]
    job_of = {j.name: j for j in jobs}
    resources = _resources(node)
    per_user: dict[str, list[pb.ResourceShare]] = {u.name: [] for u in rows}
    for resource in resources:
        if policy.sharing == WORK_CONSERVING:
            shares = {u.name: _bounds(resource, u) for u in rows}
        else:
            shares = _static(resource, rows)
        for name, share in shares.items():
            per_user[name].append(share)
    return pb.DesiredState(
        generation=generation,
        node_id=node.node_id,
        sharing=policy.sharing,
        devices=[pb.Device(name=d.name, read_bps=d.read_bps, write_bps=d.write_bps, read_iops=d.read_iops,
                           write_iops=d.write_iops) for d in node.devices],
        vnodes=[pb.VNodeSpec(user=u.name, uid=u.uid, priority=u.effective_priority, shares=per_user[u.name],
                             job=job_of[u.name].job_id if u.name in job_of else "",
                             job_user=job_of[u.name].user if u.name in job_of else "")
                for u in rows],
        default_vnode=pb.VNodeSpec(user="", priority=DEFAULT_VNODE_PRIORITY,
                                   shares=[_default_share(r, policy) for r in resources]),
        users=[pb.User(name=u.name, uid=u.uid, priority=u.effective_priority, active=u.active,
                       running_jobs=u.running_jobs) for u in users],
        connections=list(connections),
    )
