"""The JSON that `vnodectl status --json` and `vnodectl nodes --json` print: a flat, stable shape.

Apart from the command line so that a program can build it from a StatusResponse it asked for itself
(testbed.local_cluster polls it in-process) without loading the CLI's settings and TLS.
"""

from vnode_sync.wire import vnode_pb2 as pb


def status_json(status: pb.StatusResponse) -> dict:
    """A flat, stable shape: users[] each with name, priority and per-node targets."""
    return {
        "generation": status.generation,
        "sharing": status.sharing,
        "users": [{"name": us.user.name, "uid": us.user.uid, "priority": us.user.priority,
                   "active": us.user.active, "running_jobs": us.user.running_jobs,
                   "reservation_bps": us.user.reservation_bps, "limit_bps": us.user.limit_bps,
                   "group": us.user.group,
                   "jobs": [{"job_id": j.job_id, "node": j.node, "vnode": j.vnode, "fallback": j.fallback}
                            for j in us.user.jobs],
                   **({"summary": _summary_json(us.summary)} if us.HasField("summary") else {"nodes": [
                       {"node_id": n.node_id, "target_read_bps": n.target_read_bps,
                        "target_write_bps": n.target_write_bps,
                        "measured_read_bps": round(n.measured_read_bps, 1),
                        "measured_write_bps": round(n.measured_write_bps, 1),
                        "applied_generation": n.applied_generation,
                        "held_at_limit": n.held_at_limit, **_allocation_json(status, n)} for n in us.nodes]})}
                  for us in status.users],
        "nodes": [node_json(n) for n in status.nodes],
        "groups": [{"name": gs.group.name, "parent": gs.group.parent, "weight": gs.group.weight,
                    "active_users": gs.active_users, "measured_read_bps": round(gs.measured_read_bps, 1),
                    "measured_write_bps": round(gs.measured_write_bps, 1), "given_read_bps": round(gs.given_read_bps, 1),
                    "given_write_bps": round(gs.given_write_bps, 1)} for gs in status.groups],
    }


def _summary_json(summary: pb.UserSummary) -> dict:
    return {field.name: round(value, 1) if isinstance(value, float) else value
            for field, value in ((f, getattr(summary, f.name)) for f in summary.DESCRIPTOR.fields)}


def _allocation_json(status: pb.StatusResponse, n: pb.UserNodeStatus) -> dict:
    if status.sharing != "work-conserving":
        return {}
    # JSON has no infinity: an unbounded demand is null
    return {"allocated_read_bps": n.allocated_read_bps, "allocated_write_bps": n.allocated_write_bps,
            "demand_read_bps": _finite(n.demand_read_bps), "demand_write_bps": _finite(n.demand_write_bps),
            "weight_read_share": round(n.weight_read_share, 4), "weight_write_share": round(n.weight_write_share, 4)}


def _finite(value: float) -> float | None:
    return None if value == float("inf") else round(value, 1)


def node_json(node: pb.StorageNode) -> dict:
    return {"node_id": node.node_id, "connected": node.connected, "backend": node.backend,
            "applied_generation": node.applied_generation, "last_seen_unix": node.last_seen_unix,
            "allocation_updates": node.allocation_updates,
            "limitations": list(node.limitations), "errors": list(node.errors),
            "enforcing": bool(node.backend) and not node.not_enforcing, "not_enforcing": node.not_enforcing,
            "degraded": list(node.degraded),
            "devices": [{"name": d.name, "major": d.major, "minor": d.minor, "read_bps": d.read_bps,
                         "write_bps": d.write_bps, "read_iops": d.read_iops, "write_iops": d.write_iops}
                        for d in node.devices]}
