"""Putting a batch job's processes into its user's VNode on the compute node.

A prolog runs before the job's processes exist, so placement watches /proc for a while:
every thread of a process whose environment names the job (SLURM_JOB_ID, PBS_JOBID) and
whose owner is the job's user is placed; children forked afterwards inherit the cgroup
(cgroup v1: a forked task starts in its parent's cgroup). Processes that exit while being
read or moved are normal, not errors. Run it detached from the hook
(`spawn_watcher`) so the job never waits for it.
"""

import argparse
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from vnode_sync.errors import ThreadGone, Unsupported
from vnode_sync.kernel.backend import HostCgroups, LimitEnforcer, ThreadPlacer, vnode_name
from vnode_sync.kernel.blkio_v1 import BlkioV1Backend
from vnode_sync.kernel.procfs import owner_uid, read_text, task_ids

log = logging.getLogger(__name__)

JOB_ENVIRONMENT_KEYS = ("SLURM_JOB_ID", "PBS_JOBID")


@dataclass
class Placement:
    """What one pass placed: pids whose every thread moved, and how many vanished meanwhile."""

    pids: set[int] = field(default_factory=set)
    vanished: int = 0


def process_environment(proc_root: str, pid: int) -> dict[str, str] | None:
    """The environment of `pid`; None once it has gone (or for a kernel thread we may not read)."""
    raw = read_text(os.path.join(proc_root, str(pid), "environ"))
    if raw is None:
        return None
    return dict(item.split("=", 1) for item in raw.split("\0") if "=" in item)


def job_processes(proc_root: str = "/proc", min_uid: int = 1,
                  only_uid: int | None = None) -> dict[int, tuple[int, set[str]]]:
    """pid -> (owner uid, job ids in its environment) of every batch-job process owned by min_uid
    or above (by `only_uid` alone, if given: other users' environments are then not read)."""
    found = {}
    for name in os.listdir(proc_root):
        if not name.isdigit():
            continue
        pid = int(name)
        owner = owner_uid(os.path.join(proc_root, name))
        if owner is None or owner < min_uid or only_uid is not None and owner != only_uid:
            continue
        env = process_environment(proc_root, pid)
        if env is None:
            continue   # exited, or a kernel thread without an environment
        jobs = {env[key] for key in JOB_ENVIRONMENT_KEYS if key in env}
        if jobs:
            found[pid] = (owner, jobs)
    return found


def job_pids(job_id: str, uid: int, proc_root: str = "/proc") -> list[int]:
    """Processes owned by `uid` whose environment names `job_id`."""
    return [pid for pid, (_, jobs) in job_processes(proc_root, uid, only_uid=uid).items() if job_id in jobs]


def threads_of(pid: int, proc_root: str = "/proc") -> list[int]:
    return task_ids(proc_root, pid) or []


def placer_of(backend: LimitEnforcer) -> ThreadPlacer:
    """The backend's thread placer; Unsupported for backends that place nothing (Lustre TBF)."""
    if backend.placer is None:
        raise Unsupported(f"backend {backend.name} cannot place job processes: it has no thread placer "
                          f"(only cgroup backends, blkio-v1 and io-v2, have one)")
    return backend.placer


def place_processes(backend: LimitEnforcer, user: str, pids: Iterable[int],
                    proc_root: str = "/proc") -> Placement:
    """Move every thread of `pids` into `user`'s VNode, creating it if needed."""
    placer = placer_of(backend)
    vnode = vnode_name(user)
    backend.setup()
    backend.ensure_vnode(vnode)
    result = Placement()
    for pid in pids:
        tids = threads_of(pid, proc_root) if placer.places_threads else [pid]
        if not tids:
            result.vanished += 1
            continue
        try:
            for tid in tids:
                placer.place(vnode, tid)
        except ThreadGone:
            result.vanished += 1
            continue
        result.pids.add(pid)
    return result


def watch_job(backend: LimitEnforcer, user: str, uid: int, job_id: str, seconds: float,
              proc_root: str = "/proc", interval: float = 0.25) -> set[int]:
    """Place the job's processes as they appear, for `seconds` or until they are all gone; returns the pids placed."""
    placed: set[int] = set()
    deadline = time.monotonic() + seconds
    while True:
        current = job_pids(job_id, uid, proc_root)
        if placed and not current:
            return placed   # the job has ended: a watcher must not outlive it
        new = [p for p in current if p not in placed]
        if new:
            result = place_processes(backend, user, new, proc_root)
            placed |= result.pids
            log.info("job %s: placed pid(s) %s of user %s in %s", job_id, sorted(result.pids), user,
                     vnode_name(user))
        if time.monotonic() >= deadline:
            return placed
        time.sleep(interval)


def blkio_backend(cgroup_root: str, cgroup_name: str) -> BlkioV1Backend:
    return BlkioV1Backend(HostCgroups(cgroup_root).blkio_v1, cgroup_name)


def spawn_watcher(user: str, uid: int, job_id: str, seconds: float, cgroup_root: str, cgroup_name: str,
                  log_file: str | None = None) -> int:
    """Start `watch_job` in a detached process (own session, no inherited pipes); returns its pid.

    Slurm and pbs_mom wait for a hook's output to close and may kill its process group, so
    the watcher must hold neither.
    """
    argv = [sys.executable, "-I", "-m", "vnode_sync.agents.compute.placement", "--user", user, "--uid", str(uid),
            "--job", job_id, "--seconds", str(seconds), "--cgroup-root", cgroup_root, "--cgroup-name", cgroup_name]
    output = subprocess.DEVNULL
    if log_file:
        try:
            output = open(log_file, "ab")
        except OSError:
            pass
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=output, stderr=output,
                               start_new_session=True, close_fds=True, cwd="/")
    if output is not subprocess.DEVNULL:
        output.close()
    return process.pid


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="place a batch job's processes in its user's VNode")
    parser.add_argument("--user", required=True)
    parser.add_argument("--uid", type=int, required=True)
    parser.add_argument("--job", required=True)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--cgroup-root", default="/sys/fs/cgroup")
    parser.add_argument("--cgroup-name", default="vnode-sync-compute")
    parser.add_argument("--proc-root", default="/proc")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO,
                        format=f"%(asctime)s %(levelname)s [placement job={args.job}] %(message)s")
    try:
        placed = watch_job(blkio_backend(args.cgroup_root, args.cgroup_name), args.user, args.uid, args.job,
                           args.seconds, args.proc_root)
    except Exception as e:  # a detached watcher has nobody to raise to: say it and stop
        log.error("job %s: placement for user %s stopped: %s", args.job, args.user, e)
        return 1
    log.info("job %s: done watching, %d process(es) of user %s placed", args.job, len(placed), args.user)
    return 0


if __name__ == "__main__":
    sys.exit(main())
