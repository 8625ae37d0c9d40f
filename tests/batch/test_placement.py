"""Placing a job's processes in its user's VNode: on a faithful fake /proc and cgroupfs, and on the real kernel."""

import os
import subprocess
import sys
import time

import pytest

from tests.conftest import needs_kernel, unique_name
from tests.fakes.cgroupfs import FakeCgroupFS, FakeKernel
from vnode_sync.agents.compute.placement import job_pids, place_processes, watch_job
from vnode_sync.kernel.backend import HostCgroups
from vnode_sync.kernel.blkio_v1 import BlkioV1Backend


def fake_process(proc, pid: int, tids: list[int], env: dict[str, str], uid: int | None = None) -> None:
    (proc / str(pid) / "task").mkdir(parents=True)
    for tid in tids:
        (proc / str(pid) / "task" / str(tid)).mkdir()
    (proc / str(pid) / "environ").write_bytes(b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items()))
    if uid is not None:
        os.chown(proc / str(pid), uid, -1)


@pytest.fixture
def blkio(tmp_path):
    kernel = FakeKernel()
    fs = FakeCgroupFS(str(tmp_path / "blkio"), kernel)
    return kernel, BlkioV1Backend(str(tmp_path / "blkio"), "vnode-sync-compute", fs)


def test_job_processes_are_found_by_environment_and_owner(tmp_path):
    proc = tmp_path / "proc"
    me = os.geteuid()
    fake_process(proc, 100, [100], {"SLURM_JOB_ID": "42", "HOME": "/x"})
    fake_process(proc, 101, [101], {"PBS_JOBID": "42"})
    fake_process(proc, 102, [102], {"SLURM_JOB_ID": "420"})
    fake_process(proc, 103, [103], {"OTHER": "42"})
    (proc / "self").mkdir()
    assert sorted(job_pids("42", me, str(proc))) == [100, 101]
    assert job_pids("42", me + 1, str(proc)) == []   # another user's process that claims the job is left alone


def test_every_thread_goes_into_the_users_vnode(tmp_path, blkio):
    kernel, backend = blkio
    proc = tmp_path / "proc"
    fake_process(proc, 200, [200, 201, 202], {"SLURM_JOB_ID": "7"})
    kernel.spawn(200, 201, 202)
    result = place_processes(backend, "alice", [200, 999], str(proc))
    assert result.pids == {200}
    assert result.vanished == 1            # exited before we got to it: normal, not an error
    assert backend.members("vnode.alice") == {200, 201, 202}


def test_a_process_that_exits_mid_placement_is_counted_not_raised(tmp_path, blkio):
    kernel, backend = blkio
    proc = tmp_path / "proc"
    fake_process(proc, 300, [300, 301], {"SLURM_JOB_ID": "8"})
    kernel.spawn(300)                      # thread 301 is gone by the time it is written
    assert place_processes(backend, "bob", [300], str(proc)).vanished == 1


def test_watch_places_processes_that_appear_later(tmp_path, blkio):
    kernel, backend = blkio
    proc = tmp_path / "proc"
    proc.mkdir()
    fake_process(proc, 400, [400], {"SLURM_JOB_ID": "9"})
    kernel.spawn(400)
    placed = watch_job(backend, "carol", os.geteuid(), "9", seconds=0.3, proc_root=str(proc), interval=0.05)
    assert placed == {400}


@needs_kernel
def test_real_process_is_placed_in_a_real_blkio_vnode():
    name = unique_name("placement")
    backend = BlkioV1Backend(HostCgroups().blkio_v1, name)
    job_id = name
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                             env={**os.environ, "SLURM_JOB_ID": job_id})
    try:
        deadline = time.monotonic() + 5
        while not job_pids(job_id, os.geteuid()) and time.monotonic() < deadline:
            time.sleep(0.05)
        result = place_processes(backend, "vnode-sync-placement", job_pids(job_id, os.geteuid()))
        assert result.pids == {child.pid}
        assert child.pid in backend.members("vnode.vnode-sync-placement")
    finally:
        child.kill()
        child.wait()
        backend.teardown()
    assert not os.path.exists(os.path.join(HostCgroups().blkio_v1, name))
