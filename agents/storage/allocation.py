"""What the reconciler enforces: the desired state with the step's allocation, as the node's backend takes it.

Each `Share` field means one thing (vnode.proto); this module only decides which value is in force
under work-conserving sharing (the state's `sharing`; static: the state's caps, as the coordinator
split them):
- ceiling: the state's (the user's limit); for a cap-only edge (Lustre TBF, blkio without BFQ, io.max)
  the allocation's, which the step keeps under it; without an allocation (before the first, after
  the fallback) each resource's capacity split by the users' priorities (Algorithm 1), under the state's.
- weight: the allocation's, for an edge that shares by weight (BFQ, the DataNode's scheduler), which
  lends and reclaims at every request by itself; a user the allocation does not list (before the
  first, after the fallback, a user just activated) is weighed by its priority. On a device the
  weights become BFQ's integers (1..1000, ratios kept; one for both directions). A cap-only edge has none.
- floor: the state's, for an edge that shares by weight; a cap-only edge has none.
Without the coordinator for `fallback_seconds` the agent drops the allocation (static_state), so
bandwidth lent by a cap is never lent forever and a weight edge keeps sharing by priority.
"""

from vnode_sync.shares import NODE, bfq_weights, weighted_shares
from vnode_sync.wire import vnode_pb2 as pb

WORK_CONSERVING = "work-conserving"


def has_allocation(state: pb.DesiredState) -> bool:
    return state.HasField("allocation") and len(state.allocation.shares.users) > 0


def allocated_weights(table: pb.ShareTable) -> dict[tuple[str, str], tuple[float, float]]:
    """(user, device) -> (read, write) local weights the table gives there."""
    return _pairs(table, table.read_weights, table.write_weights)


def allocated_ceilings(table: pb.ShareTable) -> dict[tuple[str, str], tuple[float, float]]:
    """(user, device) -> (read, write) ceilings, bytes/s, the table gives there (a cap-only edge's)."""
    return _pairs(table, table.read_ceilings_bps, table.write_ceilings_bps)


def _pairs(table: pb.ShareTable, read, write) -> dict[tuple[str, str], tuple[float, float]]:
    """A table whose arrays do not add up gives nothing (never half-applied)."""
    devices = list(table.devices)
    size = len(table.users) * len(devices)
    if not size or len(read) != size or len(write) != size:
        return {}
    return {(user, device): (read[u * len(devices) + d], write[u * len(devices) + d])
            for u, user in enumerate(table.users) for d, device in enumerate(devices)}


def effective_state(state: pb.DesiredState, shares_by_weight: bool = False) -> pb.DesiredState:
    """`state` as the backend enforces it (see the module's docstring)."""
    out = pb.DesiredState()
    out.CopyFrom(state)
    if state.sharing != WORK_CONSERVING:
        return out
    table = state.allocation.shares
    if shares_by_weight:
        _weights(out, allocated_weights(table) if has_allocation(state) else {})
        _bfq_weights(out)
        return out
    given = allocated_ceilings(table) if has_allocation(state) else {}
    if given:
        _apply_caps(out, given)
    else:
        _priority_caps(out)
    for spec in _specs(out):   # a cap-only edge has no use for floors (and a cgroup without BFQ refuses weights)
        for share in spec.shares:
            share.read.floor_bps = share.write.floor_bps = 0
    return out


def static_state(state: pb.DesiredState) -> pb.DesiredState:
    """`state` without its allocation: what holds without the coordinator (the fallback)."""
    out = pb.DesiredState()
    out.CopyFrom(state)
    out.ClearField("allocation")
    return out


def _specs(out: pb.DesiredState) -> list[pb.VNodeSpec]:
    return [*out.vnodes, out.default_vnode]


def _apply_caps(out: pb.DesiredState, given: dict[tuple[str, str], tuple[float, float]]) -> None:
    for vnode in out.vnodes:
        for share in vnode.shares:
            caps = given.get((vnode.user, share.device))
            if caps is not None:
                # 0 on the wire means "none": a cap is never that.
                share.read.ceiling_bps, share.write.ceiling_bps = (max(1, int(c)) for c in caps)


def _weights(out: pb.DesiredState, given: dict[tuple[str, str], tuple[float, float]]) -> None:
    """The step's local weights; a user's priority where it sent none."""
    for spec in _specs(out):
        for share in spec.shares:
            weights = given.get((spec.user, share.device), (0.0, 0.0)) if spec.user else (0.0, 0.0)
            share.read.weight, share.write.weight = (w if w > 0 else float(spec.priority) for w in weights)


def _bfq_weights(out: pb.DesiredState) -> None:
    """BFQ has one weight per device for both directions: the larger local weight, scaled per device."""
    by_device: dict[str, dict[int, pb.ResourceShare]] = {}
    for index, spec in enumerate(_specs(out)):
        for share in spec.shares:
            if share.device != NODE:
                by_device.setdefault(share.device, {})[index] = share
    for shares in by_device.values():
        ints = bfq_weights({i: max(s.read.weight, s.write.weight) for i, s in shares.items()})
        for i, share in shares.items():
            share.read.weight = share.write.weight = float(ints[i])


def _priority_caps(out: pb.DesiredState) -> None:
    """No allocation yet: each resource's capacity split by the active users' priorities, under their ceilings."""
    capacity = {d.name: (d.read_bps, d.write_bps) for d in out.devices}
    capacity[NODE] = (sum(c[0] for c in capacity.values()), sum(c[1] for c in capacity.values()))
    iops = {d.name: (d.read_iops, d.write_iops) for d in out.devices}
    priority = {vnode.user: float(vnode.priority) for vnode in out.vnodes}
    users: dict[str, dict[str, pb.ResourceShare]] = {}
    for vnode in out.vnodes:
        for share in vnode.shares:
            users.setdefault(share.device, {})[vnode.user] = share
    for device, shares in users.items():
        if device not in capacity:
            continue
        for d, direction in enumerate(("read", "write")):
            for field, total in (("ceiling_bps", capacity[device][d]), ("ceiling_iops", iops.get(device, (0, 0))[d])):
                if not total:
                    continue
                split = weighted_shares(total, {u: priority[u] for u in shares})
                for user, share in shares.items():
                    ceiling = getattr(getattr(share, direction), field)
                    setattr(getattr(share, direction), field,
                            max(1, min(split[user], ceiling) if ceiling else split[user]))
