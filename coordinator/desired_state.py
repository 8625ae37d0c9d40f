"""From users and capacities to each storage node's desired state.

`sharing: static`: Algorithm 1 per device, as the paper: each device's bandwidth split into caps by
priority. `sharing: work-conserving`: every active user gets, on every device of the node, its limit
as ceiling and its reservation as floor; its weights come from the weight step alone, in the
allocation appended to the state (weight_control.py; an agent without one weighs each user by its
priority), and cap-only backends get the step's caps there too (docs/fair-shares.md).
"""

from collections.abc import Sequence

from vnode_sync.coordinator.config import WORK_CONSERVING, DeviceCapacity, Policy, StorageNodeConfig
from vnode_sync.coordinator.job_vnodes import JobVNode
from vnode_sync.coordinator.store import UserRecord
from vnode_sync.shares import priority_shares
from vnode_sync.wire import vnode_pb2 as pb

DEFAULT_VNODE_PRIORITY = 1


def _shares_on_device(device: DeviceCapacity, users: Sequence[UserRecord], policy: Policy) -> dict[str, pb.DeviceShare]:
    if policy.sharing == WORK_CONSERVING:
        return {u.name: _bounds(device, u) for u in users}
    priorities = {u.name: u.effective_priority for u in users}
    split = {field: priority_shares(getattr(device, field), priorities) if getattr(device, field) else {}
             for field in ("read_bps", "write_bps", "read_iops", "write_iops")}
    return {name: pb.DeviceShare(device=device.name,
                                 **{field: split[field].get(name, 0) for field in split})
            for name in priorities}


def _bounds(device: DeviceCapacity, user: UserRecord) -> pb.DeviceShare:
    """Ceiling = limit; floor = reservation (never above the limit)."""
    limit, reserve = user.effective_limit, user.effective_reservation
    if limit:
        reserve = min(reserve, limit)
    return pb.DeviceShare(device=device.name, read_bps=limit, write_bps=limit,
                          reserve_read_bps=reserve, reserve_write_bps=reserve)


def _default_share(device: DeviceCapacity, policy: Policy) -> pb.DeviceShare:
    """Unidentified I/O never takes more than its fraction (and shares by the lowest weight, its priority)."""
    f = policy.default_vnode_fraction
    share = pb.DeviceShare(device=device.name, read_bps=int(device.read_bps * f), write_bps=int(device.write_bps * f))
    if policy.sharing != WORK_CONSERVING:
        share.read_iops, share.write_iops = int(device.read_iops * f), int(device.write_iops * f)
    return share


def build_desired_state(generation: int, node: StorageNodeConfig, users: Sequence[UserRecord],
                        policy: Policy, connections: Sequence[pb.ConnectionOwner] = (),
                        jobs: Sequence[JobVNode] = (), job_rows: Sequence[UserRecord] = ()) -> pb.DesiredState:
    """`job_rows` (the active users' running jobs, job_vnodes.py) become VNodes beside their users'."""
    active = [u for u in users if u.active]
    rows = [*active, *job_rows]
    job_of = {j.name: j for j in jobs}
    per_user: dict[str, list[pb.DeviceShare]] = {u.name: [] for u in rows}
    for device in node.devices:
        for name, share in _shares_on_device(device, rows, policy).items():
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
                                   shares=[_default_share(d, policy) for d in node.devices]),
        users=[pb.User(name=u.name, uid=u.uid, priority=u.effective_priority, active=u.active,
                       running_jobs=u.running_jobs) for u in users],
        connections=list(connections),
    )
