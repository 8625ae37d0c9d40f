"""Which batch job a process runs for, as Slurm and PBS mark it.

Slurm's cgroup plugins put every task of a job under a `job_<id>` directory (v1:
`/slurm/uid_<uid>/job_<id>/step_<n>`; v2: `/system.slice/slurmstepd.scope/job_<id>/...`): the
process cannot leave it, so it is trusted first. Else the environment: Slurm sets SLURM_JOB_ID
in every task, PBS sets PBS_JOBID. A user can set either in its own processes, which only moves
its I/O between its own running jobs and its job-less work: the coordinator charges a job's VNode
only for a running job of that same user. Ids are validated before they go anywhere; a process
gone meanwhile, or one with a malformed id, has no job.
"""

import logging
import re

from vnode_sync import validation
from vnode_sync.agents.compute.placement import JOB_ENVIRONMENT_KEYS, process_environment
from vnode_sync.errors import InvalidArgument
from vnode_sync.kernel.procfs import cgroups_of

log = logging.getLogger(__name__)

_SLURM_JOB_CGROUP = re.compile(r"/job_([0-9]{1,20})(?:/|$)")


def job_in_cgroups(cgroups: list[tuple[str, str]]) -> str | None:
    """The Slurm job id in a process's cgroup paths (any hierarchy), or None."""
    for _, path in cgroups:
        match = _SLURM_JOB_CGROUP.search(path)
        if match:
            return match.group(1)
    return None


def job_of(proc_root: str, pid: int) -> str | None:
    """The validated job id process `pid` runs for; None: no job, gone, or not a job id."""
    found = None
    cgroups = cgroups_of(proc_root, pid)
    if cgroups is not None:
        found = job_in_cgroups(cgroups)
    if found is None:
        env = process_environment(proc_root, pid) or {}
        found = next((env[key] for key in JOB_ENVIRONMENT_KEYS if env.get(key)), None)
    if found is None:
        return None
    try:
        return validation.job_id(found)
    except InvalidArgument as e:
        log.debug("pid %d: %s; its connections are charged to its user", pid, e)
        return None
