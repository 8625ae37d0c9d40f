"""From users and capacities to each storage node's desired state.

`allocation: static`: Algorithm 1 per device (caps), or BFQ weights in mode weight, as the paper.
`allocation: work-conserving`: every active user gets, on every device of the node, a local
weight (its effective priority, until the center sends per-node weights in the allocation), its
limit as ceiling and its reservation as floor; weight backends share by those at every request,
cap-only backends get the allocation loop's rates (docs/fair-shares.md).
"""

from collections.abc import Sequence

from vnode_sync.coordinator.config import DeviceCapacity, Policy, StorageNodeConfig
from vnode_sync.coordinator.store import UserRecord
from vnode_sync.shares import bfq_weight, priority_shares
from vnode_sync.wire import vnode_pb2 as pb

DEFAULT_VNODE_PRIORITY = 1


def _shares_on_device(device: DeviceCapacity, users: Sequence[UserRecord], policy: Policy) -> dict[str, pb.DeviceShare]:
    priorities = {u.name: u.effective_priority for u in users}
    if policy.allocation == "work-conserving":
        return {u.name: _weighted_share(device, u) for u in users}
    if policy.mode == "weight":
        return {name: pb.DeviceShare(device=device.name, weight=bfq_weight(p)) for name, p in priorities.items()}
    split = {field: priority_shares(getattr(device, field), priorities) if getattr(device, field) else {}
             for field in ("read_bps", "write_bps", "read_iops", "write_iops")}
    return {name: pb.DeviceShare(device=device.name,
                                 **{field: split[field].get(name, 0) for field in split})
            for name in priorities}


def _weighted_share(device: DeviceCapacity, user: UserRecord) -> pb.DeviceShare:
    """Local weight = effective priority; ceiling = limit; floor = reservation (never above the limit)."""
    limit, reserve = user.effective_limit, user.effective_reservation
    if limit:
        reserve = min(reserve, limit)
    return pb.DeviceShare(device=device.name, read_weight=float(user.effective_priority),
                          write_weight=float(user.effective_priority), read_bps=limit, write_bps=limit,
                          reserve_read_bps=reserve, reserve_write_bps=reserve)


def _default_share(device: DeviceCapacity, policy: Policy) -> pb.DeviceShare:
    f = policy.default_vnode_fraction
    if policy.allocation == "work-conserving":
        # Unidentified I/O shares by the lowest weight, and never takes more than its fraction.
        return pb.DeviceShare(device=device.name, read_weight=float(DEFAULT_VNODE_PRIORITY),
                              write_weight=float(DEFAULT_VNODE_PRIORITY),
                              read_bps=int(device.read_bps * f), write_bps=int(device.write_bps * f))
    if policy.mode == "weight":
        return pb.DeviceShare(device=device.name, weight=bfq_weight(DEFAULT_VNODE_PRIORITY))
    return pb.DeviceShare(device=device.name,
                          read_bps=int(device.read_bps * f), write_bps=int(device.write_bps * f),
                          read_iops=int(device.read_iops * f), write_iops=int(device.write_iops * f))


def build_desired_state(generation: int, node: StorageNodeConfig, users: Sequence[UserRecord],
                        policy: Policy, connections: Sequence[pb.ConnectionOwner] = ()) -> pb.DesiredState:
    active = [u for u in users if u.active]
    per_user: dict[str, list[pb.DeviceShare]] = {u.name: [] for u in active}
    for device in node.devices:
        for name, share in _shares_on_device(device, active, policy).items():
            per_user[name].append(share)
    return pb.DesiredState(
        generation=generation,
        node_id=node.node_id,
        mode=policy.mode,
        allocation_policy=policy.allocation,
        devices=[pb.Device(name=d.name, read_bps=d.read_bps, write_bps=d.write_bps, read_iops=d.read_iops,
                           write_iops=d.write_iops) for d in node.devices],
        vnodes=[pb.VNodeSpec(user=u.name, uid=u.uid, priority=u.effective_priority, shares=per_user[u.name])
                for u in active],
        default_vnode=pb.VNodeSpec(user="", priority=DEFAULT_VNODE_PRIORITY,
                                   shares=[_default_share(d, policy) for d in node.devices]),
        users=[pb.User(name=u.name, uid=u.uid, priority=u.effective_priority, active=u.active,
                       running_jobs=u.running_jobs) for u in users],
        connections=list(connections),
    )
