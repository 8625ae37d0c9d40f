"""The batch system's own list of jobs running on this node: the truth `reconcile` converges on."""

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from vnode_sync.batch.jobs import JobEvent, JobPhase, requested_priority
from vnode_sync.errors import Unavailable

# squeue states in which a job holds the node. CONFIGURING covers a prolog still running,
# COMPLETING an epilog still running: neither job may be dropped.
SLURM_HOLDING_STATES = "CONFIGURING,RUNNING,COMPLETING"
_FIELDS = "%i|%u|%U|%a|%P|%T|%k"


@dataclass(frozen=True)
class RunningJobs:
    job_ids: list[str]            # every job that holds this node
    starts: list[JobEvent]        # those known well enough to (re)send a start


def slurm_running_jobs(node: str, timeout: float, env: Mapping[str, str] | None = None) -> RunningJobs:
    """Ask slurmctld (squeue) which jobs hold `node`."""
    argv = ["squeue", "--noheader", f"--nodelist={node}", f"--states={SLURM_HOLDING_STATES}",
            f"--format={_FIELDS}"]
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                env=dict(env) if env is not None else None)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Unavailable(f"squeue did not answer within {timeout:.0f}s: {e}") from e
    if result.returncode != 0:
        raise Unavailable(f"squeue failed ({result.returncode}): {result.stderr.strip()}")
    job_ids, starts = [], []
    for line in result.stdout.splitlines():
        parts = line.split("|", 6)
        if len(parts) != 7:
            continue
        job_id, user, uid, account, partition, state, comment = parts
        job_ids.append(job_id)
        if state == "RUNNING" and uid.isdigit():
            starts.append(JobEvent(JobPhase.START, job_id, user, int(uid), node, account, partition,
                                   requested_priority(comment if comment != "(null)" else "", job_id)))
    return RunningJobs(job_ids, starts)


def pbs_running_jobs(pbs_home: str) -> RunningJobs:
    """pbs_mom keeps one <job id>.JB file per job on this node in mom_priv/jobs."""
    directory = os.path.join(pbs_home, "mom_priv", "jobs")
    try:
        names = os.listdir(directory)
    except OSError as e:
        raise Unavailable(f"cannot list pbs_mom's jobs in {directory}: {e.strerror}") from e
    return RunningJobs(sorted(n[:-3] for n in names if n.endswith(".JB")), [])
