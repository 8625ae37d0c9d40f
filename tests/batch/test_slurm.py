"""A real Slurm (Debian's slurmctld, slurmd, munged on localhost) running the hooks against a real coordinator.

Two Unix users submit jobs with sbatch; while they run, `vnodectl status --json` shows both
active with the priorities policy gives them, and after they end, both inactive. Jobs end
on their own when the test creates their release file, so the epilog runs as in production.
"""

import contextlib
import os
import subprocess
import sys
import time
import uuid

import pytest

from tests.conftest import unique_name
from vnode_sync.agents.compute.placement import job_pids
from vnode_sync.batch.cli import SLURM_WRAPPERS, install_hooks
from vnode_sync.kernel.backend import HostCgroups
from vnode_sync.kernel.blkio_v1 import BlkioV1Backend
from testbed.local_cluster import LocalCluster, LocalNode
from testbed.unix_users import unix_users
from testbed.slurm import DEBIAN_PACKAGES, LocalSlurm, SlurmSettings, missing_programs

ACCOUNT = "vnode-sync-physics"
POLICY = {"default_priority": 10, "account_priorities": {ACCOUNT: 30}, "job_priority_min": 1,
          "job_priority_max": 50}


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "needs root: slurmd starts jobs as other users and the test creates Unix users"
    missing = missing_programs()
    if missing:
        return f"Slurm is not installed (missing {', '.join(missing)}): apt-get install {' '.join(DEBIAN_PACKAGES)}"
    return None


pytestmark = [pytest.mark.slow]


def slurm_users(count: int):
    """Users named vnode-sync-<hex> (useradd's 32-character limit allows it), with a group each."""
    names = [f"vnode-sync-{uuid.uuid4().hex[:10]}" for _ in range(count)]
    return unix_users(names, shell="/bin/sh", user_group=True)


def end_placement_watchers(cgroup_name: str, timeout: float = 5) -> None:
    """End the prolog's detached watchers still running. One ends with its job once it has placed a process
    of it, but one that placed none watches for its whole watch_seconds (20 s here): waiting for those cost
    the first test 10 s of teardown, for nothing the tests assert."""
    def watchers() -> list[int]:
        pids = []
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmdline = f.read()
            except OSError:
                continue
            if b"vnode_sync.agents.compute.placement" in cmdline and cgroup_name.encode() in cmdline:
                pids.append(int(entry))
        return pids

    for pid in watchers():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)
    deadline = time.monotonic() + timeout   # gone before their cgroups are torn down
    while watchers() and time.monotonic() < deadline:
        time.sleep(0.05)


class Harness:
    def __init__(self, cluster: LocalCluster, slurm: LocalSlurm, release_dir: str, config: str):
        self.cluster, self.slurm, self.release_dir, self.config = cluster, slurm, release_dir, config

    def submit(self, user: str, tag: str, *options: str) -> str:
        release = os.path.join(self.release_dir, tag)
        return self.slurm.sbatch(user, f"while [ ! -e {release} ]; do sleep 0.2; done", *options)

    def release(self, tag: str) -> None:
        open(os.path.join(self.release_dir, tag), "w").close()

    def user(self, name: str) -> dict:
        return next((u for u in self.cluster.status()["users"] if u["name"] == name), {})

    def wait_user(self, name: str, what: str, timeout: float = 30, **wanted) -> dict:
        return self.cluster.wait_for(
            lambda: (u := self.user(name)) and all(u.get(k) == v for k, v in wanted.items()) and u,
            timeout, f"{name} {what} ({wanted}; last {self.user(name)})")

    def reconcile(self) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "vnode_sync.batch", "--config", self.config, "reconcile",
                               "--system", "slurm"], env={**os.environ, **self.slurm.env},
                              capture_output=True, text=True, timeout=60)

    def hook_log(self) -> str:
        with open(os.path.join(self.cluster.workdir, "batch.log")) as f:
            return f.read()


@pytest.fixture
def harness():
    why = _why_not()
    if why:
        pytest.skip(why)
    name = unique_name("slurm")
    placement_name = name if HostCgroups().has_blkio_v1() else None
    with slurm_users(2) as accounts, contextlib.ExitStack() as stack:
        users = [a.pw_name for a in accounts]
        cluster = LocalCluster(name, users=[], nodes=[LocalNode("dn1", ("/dev/vnode-sync-absent",), 200_000_000,
                                                                100_000_000)],
                               coordinator_settings={"policy": POLICY})
        stack.callback(cluster.stop)
        cluster.start_coordinator()
        hooks_dir = os.path.join(cluster.workdir, "hooks")
        config = os.path.join(cluster.workdir, "batch.yaml")
        with open(config, "w") as f:
            f.write(f"coordinator: {cluster.address}\ntimeout_seconds: 5\n"
                    f"spool_dir: {cluster.workdir}/spool\nlog_file: {cluster.workdir}/batch.log\n")
            if placement_name:
                f.write(f"placement: {{enabled: true, cgroup_name: {placement_name}, watch_seconds: 20}}\n")
        install_hooks(hooks_dir, SLURM_WRAPPERS, config)
        slurm = LocalSlurm(name, SlurmSettings(prolog=os.path.join(hooks_dir, "slurm-prolog"),
                                               epilog=os.path.join(hooks_dir, "slurm-epilog")))
        stack.callback(slurm.stop)
        if placement_name:
            stack.callback(BlkioV1Backend(HostCgroups().blkio_v1, placement_name).teardown)
            stack.callback(end_placement_watchers, placement_name)
        slurm.start()
        release_dir = os.path.join(cluster.workdir, "release")
        os.makedirs(release_dir)
        for d in (cluster.workdir, release_dir):
            os.chmod(d, 0o755)
        yield Harness(cluster, slurm, release_dir, config), users, placement_name


def test_two_users_jobs_make_their_shares_active_until_the_last_job_ends(harness):
    h, (alice, bob), placement_name = harness
    a1 = h.submit(alice, "a1", "--comment=vnode_priority=20,vnode_reservation=5MB/s,vnode_limit=40MB/s")
    b1 = h.submit(bob, "b1", f"--account={ACCOUNT}")
    for job in (a1, b1):
        h.slurm.wait_for_state(job, "RUNNING", timeout=30)
    h.wait_user(alice, "active with its job's requested priority, reservation and limit", active=True, priority=20,
                running_jobs=1, reservation_bps=5_000_000, limit_bps=40_000_000)
    h.wait_user(bob, "active with its account's priority", active=True, priority=30, running_jobs=1)
    bob_status = h.user(bob)
    alice_status = h.user(alice)
    assert bob_status["nodes"][0]["target_read_bps"] > alice_status["nodes"][0]["target_read_bps"] > 0

    # A second job of alice asks for far more than allowed: clamped, never failed.
    a2 = h.submit(alice, "a2", "--comment=vnode_priority=500")
    h.slurm.wait_for_state(a2, "RUNNING", timeout=30)
    # ... and no limit: one VNode serves both jobs, so the first job's ceiling no longer holds.
    h.wait_user(alice, "with two jobs, the clamped priority", active=True, priority=50, running_jobs=2,
                reservation_bps=5_000_000, limit_bps=0)
    assert "vnode_priority=500 clamped to 100" in h.hook_log()

    if placement_name:
        vnode = BlkioV1Backend(HostCgroups().blkio_v1, placement_name)
        uid = int(subprocess.run(["id", "-u", alice], capture_output=True, text=True).stdout)
        h.cluster.wait_for(lambda: job_pids(a1, uid) and set(job_pids(a1, uid)) <= vnode.members(f"vnode.{alice}"),
                           15, f"job {a1}'s processes in vnode.{alice}")

    h.release("a2")
    h.slurm.wait_for_state(a2, "COMPLETED", timeout=30)
    h.wait_user(alice, "still active after its first job ended", active=True, priority=20, running_jobs=1)

    h.release("a1")
    h.release("b1")
    for job in (a1, b1):
        h.slurm.wait_for_state(job, "COMPLETED", timeout=30)
    h.wait_user(alice, "inactive", active=False, running_jobs=0, reservation_bps=0, limit_bps=0)
    h.wait_user(bob, "inactive", active=False, running_jobs=0)
    assert "DRAIN" not in h.slurm.node_state()


def test_coordinator_down_during_prolog_and_epilog_is_reconciled(harness):
    h, (alice, bob), _ = harness
    h.cluster.stop_coordinator()
    submitted = time.monotonic()
    job = h.submit(bob, "b2", f"--account={ACCOUNT}")
    h.slurm.wait_for_state(job, "RUNNING", timeout=30)
    h.cluster.wait_for(lambda: f"start of job {job} of user {bob}" in h.hook_log(), 15, "the prolog's log line")
    started_after = time.monotonic() - submitted
    assert "unreachable" in h.hook_log() and "spooled to" in h.hook_log()

    h.cluster.start_coordinator()
    assert h.user(bob).get("active") is not True
    result = h.reconcile()
    assert result.returncode == 0, result.stderr
    h.wait_user(bob, "active after reconcile", active=True, priority=30, running_jobs=1, timeout=5)

    # The epilog is lost too: the coordinator is down when the job ends.
    h.cluster.stop_coordinator()
    h.release("b2")
    h.slurm.wait_for_state(job, "COMPLETED", timeout=30)
    h.cluster.wait_for(lambda: f"end of job {job}" in h.hook_log(), 15, "the epilog's log line")
    h.cluster.start_coordinator()
    assert h.user(bob)["active"] is True
    result = h.reconcile()
    assert result.returncode == 0, result.stderr
    h.wait_user(bob, "inactive after reconcile", active=False, running_jobs=0, timeout=5)
    assert "DRAIN" not in h.slurm.node_state()
    print(f"job {job} ran {started_after:.1f}s after submission with the coordinator down")


def test_fail_closed_prolog_drains_the_node_as_documented(harness):
    h, (alice, _), _ = harness
    with open(h.config, "a") as f:
        f.write("fail_closed: true\n")
    h.cluster.stop_coordinator()
    job = h.submit(alice, "a3")
    reason = h.cluster.wait_for(lambda: "DRAIN" in h.slurm.node_state() and h.slurm.node_state(), 30,
                                "slurmd to drain the node after the prolog failed")
    h.slurm.wait_for_state(job, "PENDING", timeout=30)    # requeued (and held), never run
    assert "unreachable" in h.hook_log()
    h.release("a3")
    h.slurm.scontrol("update", f"nodename={h.slurm.node}", "state=resume")
    print(f"node state after a failing prolog: {reason}; job {job}: {h.slurm.job(job).get('Reason')}")
