"""Jobs as VNodes: a running job's own VNode under its user, charged where a compute agent names it.

A compute agent reports each connection to storage with the job of the process behind it
(agents/compute/job_of.py). When that job is a running job of the connection's user (the store's
`jobs`, from the batch hooks), the connection is charged to the job's VNode, `user.job`
(validation.job_vnode_name): the storage side meters and shares it as its own VNode, and the tree
of weights puts it as a leaf under its user, beside the user's job-less work (group_tree.py). A
job's weight, floor and ceiling come from its hook's request (`vnode_priority`, `vnode_reservation`,
`vnode_limit`), its weight defaulting to its user's own priority. A job on a node without a compute
agent has no connection reports: its I/O is charged to its user, and status says so (`fallback`).
"""

import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from vnode_sync import validation
from vnode_sync.coordinator.state.store import JobRecord, UserRecord
from vnode_sync.errors import InvalidArgument
from vnode_sync.wire import vnode_pb2 as pb

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobVNode:
    """A running job of one user over every node it runs on, as one VNode."""

    name: str                    # `user.job`
    job_id: str
    user: str
    nodes: tuple[str, ...]       # the compute nodes its hooks ran on
    priority: int | None         # its own request; None: its user's own priority
    reservation_bps: int = 0
    limit_bps: int = 0

    def row(self, user: UserRecord) -> UserRecord:
        """The job as the weight step and the desired state weigh a VNode: its weight, floor and ceiling."""
        return UserRecord(self.name, user.uid, self.priority or user.priority, True, 0, None, False,
                          self.reservation_bps, self.limit_bps, group=user.group)


def job_vnodes(jobs: Iterable[JobRecord]) -> tuple[JobVNode, ...]:
    """One VNode per (user, job), its nodes' requests joined (the highest of each); a job id that cannot
    name a VNode (a batch system's own spelling we do not know) is left to its user, logged."""
    by_name: dict[str, list[JobRecord]] = {}
    for job in jobs:
        try:
            name = validation.job_vnode_name(job.user, job.job_id)
        except InvalidArgument as e:
            log.debug("job %s of %s stays in its user's VNode: %s", job.job_id, job.user, e)
            continue
        by_name.setdefault(name, []).append(job)
    return tuple(JobVNode(name, rows[0].job_id, rows[0].user, tuple(sorted(r.node for r in rows)),
                          max((r.priority for r in rows if r.priority is not None), default=None),
                          max(r.reservation_bps for r in rows), max(r.limit_bps for r in rows))
                 for name, rows in sorted(by_name.items()))


def job_rows(jobs: Sequence[JobVNode], users: Sequence[UserRecord]) -> tuple[UserRecord, ...]:
    """The active users' jobs as rows beside the users' own."""
    by_name = {u.name: u for u in users}
    return tuple(job.row(by_name[job.user]) for job in jobs if job.user in by_name and by_name[job.user].active)


def charge_connections(connections: Iterable[pb.ConnectionOwner], jobs: Sequence[JobVNode],
                       charged_jobs: Collection[str]) -> list[pb.ConnectionOwner]:
    """`connections` with `vnode` set to their job's VNode where the job is a running job of their user
    with a VNode of its own (among `charged_jobs`: an active user's, under work-conserving sharing)."""
    vnode_of = {(j.user, j.job_id): j.name for j in jobs if j.name in charged_jobs}
    charged = []
    for c in connections:
        vnode = vnode_of.get((c.user, c.job), "") if c.job else ""
        if vnode != c.vnode:
            c = pb.ConnectionOwner(client_address=c.client_address, client_port=c.client_port, user=c.user,
                                   server_address=c.server_address, server_port=c.server_port, job=c.job,
                                   vnode=vnode)
        charged.append(c)
    return charged


def fallback(job: JobVNode, compute_nodes: Collection[str]) -> str:
    """Why `job`'s I/O is charged to its user; "" when a compute agent runs on each of its nodes."""
    missing = [n for n in job.nodes if n not in compute_nodes]
    if not missing:
        return ""
    return f"no compute agent on {', '.join(missing)}: charged to user {job.user}"


def job_statuses(jobs: Sequence[JobVNode], compute_nodes: Collection[str]) -> Mapping[str, list[pb.JobVNode]]:
    """user -> its running jobs as status shows them."""
    out: dict[str, list[pb.JobVNode]] = {}
    for job in jobs:
        out.setdefault(job.user, []).append(pb.JobVNode(job_id=job.job_id, node=",".join(job.nodes), vnode=job.name,
                                                        fallback=fallback(job, compute_nodes)))
    return out


def by_user(per_vnode: Mapping[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
    """Per-VNode (read, write) figures with each job's added to its user's: metrics and group totals stay
    one series per user, however many jobs come and go."""
    out: dict[str, tuple[float, float]] = {}
    for name, (read, write) in per_vnode.items():
        user = name.split(validation.JOB_VNODE_SEPARATOR, 1)[0]
        before = out.get(user, (0.0, 0.0))
        out[user] = (before[0] + read, before[1] + write)
    return out
