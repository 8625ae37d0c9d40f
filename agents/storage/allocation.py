"""The work-conserving policy's allocation, as the reconciler enforces it.

The coordinator appends its current allocation to the desired state; it replaces the listed
users' read/write bytes/s (iops and the default VNode stay as the static shares set them).
Without the coordinator for `fallback_seconds` the agent drops it and enforces the static
shares again, so bandwidth lent to one user is never lent forever.
"""

from vnode_sync.wire import vnode_pb2 as pb


def has_allocation(state: pb.DesiredState) -> bool:
    return state.HasField("allocation") and len(state.allocation.users) > 0


def effective_state(state: pb.DesiredState) -> pb.DesiredState:
    """`state` with its allocation in place of the static read/write bytes/s."""
    if not has_allocation(state):
        return state
    given = {u.user: {s.device: s for s in u.shares} for u in state.allocation.users}
    out = pb.DesiredState()
    out.CopyFrom(state)
    for vnode in out.vnodes:
        shares = given.get(vnode.user, {})
        for share in vnode.shares:
            allocated = shares.get(share.device)
            if allocated is None:
                continue
            # 0 on the wire means "no limit": an allocation is never that.
            share.read_bps = max(1, allocated.read_bps)
            share.write_bps = max(1, allocated.write_bps)
    return out


def static_state(state: pb.DesiredState) -> pb.DesiredState:
    """`state` without its allocation: Algorithm 1's shares (the fallback)."""
    out = pb.DesiredState()
    out.CopyFrom(state)
    out.ClearField("allocation")
    return out
