"""Jobs as VNodes: a running job's own VNode under its user, once a compute agent names it.

A compute agent reports each connection to storage with the job of the process behind it
(agents/compute/job_of.py). A job has a VNode, `user.job` (validation.job_vnode_name), while both
hold: it is a running job of that user (the store's `jobs`, from the batch hooks), and a compute
agent has reported a connection of it (that user, that job id) since it started running, as this
coordinator saw it (`ReportedJobs`). Only there can the storage side charge anything to it: a job no
compute agent names has no connection to charge, so a VNode for it would only cost every storage
node's desired state and every step a row. Once named, the VNode stays until the job ends, however
its connections come and go (a reader opens one per block: a VNode made and removed with each would
churn every storage node). Its connections are charged to it; the storage side meters and shares
it as its own VNode, and the tree of weights puts it as a leaf under its user, beside the user's
job-less work (group_tree.py). A job's weight, floor and ceiling come from its hook's request
(`vnode_priority`, `vnode_reservation`, `vnode_limit`), its weight defaulting to its user's own
priority. A job with no connection reported, on a node without a compute agent or not, is charged
to its user, and status says why (`fallback`). Where a storage node's backend tells a job's I/O by
the job id it carries itself (Lustre TBF: `JOB_ID_BACKENDS`), every running job can be charged, so
while one such node is registered every running job has a VNode.

Reports are runtime state: a coordinator that starts (or a standby that takes over) knows no job's
connections until the compute agents report again, which each does on any change and at least every
30 s (agents/compute/main.py); until then the jobs' connections are charged to their users.
"""

import logging
import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from vnode_sync import validation
from vnode_sync.coordinator.state.store import JobRecord, UserRecord
from vnode_sync.errors import InvalidArgument
from vnode_sync.wire import vnode_pb2 as pb

log = logging.getLogger(__name__)

JobKey = tuple[str, str]   # (user, job id), as a connection report names a job


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

    @property
    def key(self) -> JobKey:
        return self.user, self.job_id

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


# Backends that tell a job's I/O by the job id it carries itself, with no compute agent: Lustre TBF (the
# client puts the job id in each RPC; docs/lustre.md, "Jobs"). Where one runs, every running job can be
# charged, so every running job has a VNode.
JOB_ID_BACKENDS = frozenset({"lustre-tbf"})


class ReportedJobs:
    """The jobs compute agents have named behind connections, each with the generation it was named
    at: each snapshot reads the running ones among them from the store (those have VNodes), so its
    cost grows with them, not with every running job; every running job while a storage node whose
    backend tells jobs by their own ids has registered. `revision` grows with every job named anew
    and with that switch: a snapshot read before is out of date."""

    def __init__(self):
        self._lock = threading.Lock()
        self._named: dict[JobKey, int] = {}
        self._revision = 0
        self._by_id: set[str] = set()   # storage nodes whose backend is one of JOB_ID_BACKENDS

    def registered(self, node_id: str, backend: str) -> bool:
        """A storage node registered with `backend`: whether every running job's VNode comes or goes."""
        with self._lock:
            before = bool(self._by_id)
            if backend in JOB_ID_BACKENDS:
                self._by_id.add(node_id)
            else:
                self._by_id.discard(node_id)
            changed = before != bool(self._by_id)
            if changed:
                self._revision += 1
            return changed

    def add(self, named: Iterable[JobKey], generation: int) -> bool:
        """Whether one of `named` (at `generation`) is new: the snapshot is to be read again (never while
        every running job has a VNode)."""
        with self._lock:
            if self._by_id:
                return False
            new = [key for key in named if key not in self._named]
            for key in new:
                self._named[key] = generation
            if new:
                self._revision += 1
            return bool(new)

    def read(self) -> tuple[int, frozenset[JobKey] | None]:
        """(revision, the jobs named, or None: every running job) of one moment."""
        with self._lock:
            return self._revision, None if self._by_id else frozenset(self._named)

    def found(self, read: Iterable[JobKey], running: Collection[JobKey], generation: int) -> None:
        """A snapshot of `generation` found `running` of the jobs it `read`: the others are forgotten (an
        ended job; a job id that no running job has), but not those named at that generation or later,
        whose start may come in the next one (an agent can name a job before its prolog's StartJob is
        in). Named again later, a job forgotten is read again."""
        with self._lock:
            for key in read:
                if key not in running and self._named.get(key, generation) < generation:
                    del self._named[key]


def named_jobs(connections: Iterable[pb.ConnectionOwner]) -> set[JobKey]:
    """The (user, job) behind each connection that names a job."""
    return {(c.user, c.job) for c in connections if c.job}


def fallback(job: JobVNode, compute_nodes: Collection[str], static: bool = False) -> str:
    """Why `job`, which has no VNode, is charged to its user."""
    if static:
        return f"sharing: static splits by user: charged to user {job.user}"
    missing = [n for n in job.nodes if n not in compute_nodes]
    if missing:
        return f"no compute agent on {', '.join(missing)}: charged to user {job.user}"
    return f"no connection of it reported yet: charged to user {job.user}"


def job_statuses(jobs: Sequence[JobVNode], with_vnode: Collection[str], compute_nodes: Collection[str],
                 static: bool = False) -> Mapping[str, list[pb.JobVNode]]:
    """user -> its running jobs as status shows them: each one's VNode, and why it is charged to its user
    when it is not among `with_vnode`."""
    out: dict[str, list[pb.JobVNode]] = {}
    for job in jobs:
        why = "" if job.name in with_vnode else fallback(job, compute_nodes, static)
        out.setdefault(job.user, []).append(pb.JobVNode(job_id=job.job_id, node=",".join(job.nodes), vnode=job.name,
                                                        fallback=why))
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
