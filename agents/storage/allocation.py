"""What the reconciler enforces: the desired state as the node's backend can take it.

Work-conserving policy (the state's `allocation_policy`):
- A backend that shares by weight (BFQ, the DataNode's scheduler) takes each user's local weight,
  floor and ceiling from the state; an allocation from the coordinator may carry per-node local
  weights, which replace the state's, and its rates are ignored: the backend lends and reclaims at
  every request by itself. For cgroups, the local weights become BFQ's integer weights per device.
- A cap-only backend (Lustre TBF, blkio without BFQ) takes the allocation's read/write bytes/s; until
  there is one (or after the fallback), each device's capacity split by the users' weights
  (Algorithm 1 with local weights), under their ceilings.
Without the coordinator for `fallback_seconds` the agent drops the allocation (static_state): a
cap-only backend goes back to the weighted split, a weight backend to the priority weights, so
bandwidth lent by a cap is never lent forever and the edge keeps sharing by weight.

A state from a coordinator that predates `allocation_policy` is handled as before: the allocation's
rates replace the static caps.
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
    given = allocated_shares(state.allocation) if has_allocation(state) else {}
    if state.allocation_policy != WORK_CONSERVING:
        _apply_rates(out, given)
        return out
    if shares_by_weight:
        _apply_weights(out, given)
        _bfq_weights(out)
    elif given:
        _apply_rates(out, given)
        _drop_weights(out)
    else:
        _weighted_caps(out)
        _drop_weights(out)
    return out


def static_state(state: pb.DesiredState) -> pb.DesiredState:
    """`state` without its allocation: what holds without the coordinator (the fallback)."""
    out = pb.DesiredState()
    out.CopyFrom(state)
    out.ClearField("allocation")
    return out


def _apply_rates(out: pb.DesiredState, given: dict) -> None:
    for vnode in out.vnodes:
        for share in vnode.shares:
            allocated = given.get(vnode.user, {}).get(share.device)
            if allocated is not None:
                # 0 on the wire means "no limit": an allocation is never that.
                share.read_bps = max(1, allocated.read_bps)
                share.write_bps = max(1, allocated.write_bps)


def _apply_weights(out: pb.DesiredState, given: dict) -> None:
    for vnode in out.vnodes:
        for share in vnode.shares:
            allocated = given.get(vnode.user, {}).get(share.device)
            for d in DIRECTIONS:
                if allocated is not None and getattr(allocated, f"{d}_weight") > 0:
                    setattr(share, f"{d}_weight", getattr(allocated, f"{d}_weight"))


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


def _weighted_caps(out: pb.DesiredState) -> None:
    """No allocation yet: each device's capacity split by the active users' weights, under their ceilings."""
    capacity = {d.name: d for d in out.devices}
    users: dict[str, dict[str, pb.DeviceShare]] = {}
    for vnode in out.vnodes:
        for share in vnode.shares:
            users.setdefault(share.device, {})[vnode.user] = share
    for device, shares in users.items():
        if device not in capacity:
            continue
        for field in ("read_bps", "write_bps", "read_iops", "write_iops"):
            direction = field.split("_")[0]
            total = getattr(capacity[device], field)
            if not total:
                continue
            split = weighted_shares(total, {u: getattr(s, f"{direction}_weight") for u, s in shares.items()})
            for user, share in shares.items():
                ceiling = getattr(share, field)
                setattr(share, field, max(1, min(split[user], ceiling) if ceiling else split[user]))


def _drop_weights(out: pb.DesiredState) -> None:
    """A cap-only backend has no use for weights (and a cgroup without BFQ refuses them)."""
    for spec in _specs(out):
        for share in spec.shares:
            share.read_weight = share.write_weight = 0.0
            share.reserve_read_bps = share.reserve_write_bps = 0
