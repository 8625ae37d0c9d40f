"""What the reconciler enforces: the desired state as the node's backend can take it.

Work-conserving sharing (the state's `sharing`):
- A backend that shares by weight (BFQ, the DataNode's scheduler) takes each user's floor and ceiling
  from the state and its local weights from the coordinator's allocation (the weight step's), and
  lends and reclaims at every request by itself. A user the allocation does not list (before the
  first, after the fallback, a user just activated) is weighed by its priority. For cgroups, the
  local weights become BFQ's integer weights per device.
- A cap-only backend (Lustre TBF, blkio without BFQ, io.max) takes the allocation's caps; until
  there is one (or after the fallback), each device's capacity split by the users' priorities
  (Algorithm 1), under their ceilings.
Without the coordinator for `fallback_seconds` the agent drops the allocation (static_state): a
cap-only backend goes back to the priority split, a weight backend to the priority weights, so
bandwidth lent by a cap is never lent forever and the edge keeps sharing by weight.
Static sharing: the state's caps, as the coordinator split them.
"""

from vnode_sync.shares import bfq_weights, weighted_shares
from vnode_sync.wire import vnode_pb2 as pb

WORK_CONSERVING = "work-conserving"
DIRECTIONS = ("read", "write")


def has_allocation(state: pb.DesiredState) -> bool:
    allocation = state.allocation
    return state.HasField("allocation") and (len(allocation.users) > 0 or len(allocation.weights.users) > 0)


def allocated_shares(allocation: pb.Allocation) -> dict[str, dict[str, pb.DeviceShare]]:
    """user -> device -> what the allocation gives it there: its per-pair shares, and its WeightTable's
    local weights (the form the center sends to nodes that share by weight)."""
    given = {u.user: {s.device: s for s in u.shares} for u in allocation.users}
    table = allocation.weights
    devices = list(table.devices)
    read, write = list(table.read_weights), list(table.write_weights)
    if len(read) != len(table.users) * len(devices) or len(write) != len(read):
        return given   # a table that does not add up is no allocation (never half-applied)
    for u, user in enumerate(table.users):
        shares = given.setdefault(user, {})
        for d, device in enumerate(devices):
            at = u * len(devices) + d
            shares[device] = pb.DeviceShare(device=device, read_weight=read[at], write_weight=write[at])
    return given


def effective_state(state: pb.DesiredState, shares_by_weight: bool = False) -> pb.DesiredState:
    """`state` as the backend enforces it (see the module's docstring)."""
    out = pb.DesiredState()
    out.CopyFrom(state)
    if state.sharing != WORK_CONSERVING:
        return out
    given = allocated_shares(state.allocation) if has_allocation(state) else {}
    if shares_by_weight:
        _weights(out, given)
        _bfq_weights(out)
        return out
    if given:
        _apply_caps(out, given)
    else:
        _priority_caps(out)
    for spec in _specs(out):   # a cap-only backend has no use for floors (and a cgroup without BFQ refuses weights)
        for share in spec.shares:
            share.reserve_read_bps = share.reserve_write_bps = 0
    return out


def static_state(state: pb.DesiredState) -> pb.DesiredState:
    """`state` without its allocation: what holds without the coordinator (the fallback)."""
    out = pb.DesiredState()
    out.CopyFrom(state)
    out.ClearField("allocation")
    return out


def _apply_caps(out: pb.DesiredState, given: dict) -> None:
    for vnode in out.vnodes:
        for share in vnode.shares:
            allocated = given.get(vnode.user, {}).get(share.device)
            if allocated is not None:
                # 0 on the wire means "no limit": a cap is never that.
                share.read_bps = max(1, allocated.read_bps)
                share.write_bps = max(1, allocated.write_bps)


def _weights(out: pb.DesiredState, given: dict) -> None:
    """The step's local weights; a user's priority where it sent none."""
    for spec in _specs(out):
        for share in spec.shares:
            allocated = given.get(spec.user, {}).get(share.device) if spec.user else None
            for d in DIRECTIONS:
                weight = getattr(allocated, f"{d}_weight") if allocated is not None else 0.0
                setattr(share, f"{d}_weight", weight if weight > 0 else float(spec.priority))


def _specs(out: pb.DesiredState) -> list[pb.VNodeSpec]:
    return [*out.vnodes, out.default_vnode]


def _bfq_weights(out: pb.DesiredState) -> None:
    """BFQ has one weight per device for both directions: the larger local weight, scaled per device."""
    by_device: dict[str, dict[int, pb.DeviceShare]] = {}
    for index, spec in enumerate(_specs(out)):
        for share in spec.shares:
            by_device.setdefault(share.device, {})[index] = share
    for shares in by_device.values():
        ints = bfq_weights({i: max(s.read_weight, s.write_weight) for i, s in shares.items()})
        for i, share in shares.items():
            if ints[i]:
                share.weight = ints[i]


def _priority_caps(out: pb.DesiredState) -> None:
    """No allocation yet: each device's capacity split by the active users' priorities, under their ceilings."""
    capacity = {d.name: d for d in out.devices}
    users: dict[str, dict[str, pb.DeviceShare]] = {}
    priority = {vnode.user: vnode.priority for vnode in out.vnodes}
    for vnode in out.vnodes:
        for share in vnode.shares:
            users.setdefault(share.device, {})[vnode.user] = share
    for device, shares in users.items():
        if device not in capacity:
            continue
        for field in ("read_bps", "write_bps", "read_iops", "write_iops"):
            total = getattr(capacity[device], field)
            if not total:
                continue
            split = weighted_shares(total, {u: float(priority[u]) for u in shares})
            for user, share in shares.items():
                ceiling = getattr(share, field)
                setattr(share, field, max(1, min(split[user], ceiling) if ceiling else split[user]))
