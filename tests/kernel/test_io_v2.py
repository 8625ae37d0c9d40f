"""The cgroup v2 io backend against the kernel's v2 rules: on the strict fake cgroupfs here, and
on a real cgroup-v2 kernel when VNODE_SYNC_REAL_CGROUP2 names a cgroup2 mount offering io (set
inside the qemu guest by tests/kernel/test_io_v2_guest.py; this host's cgroup2 has no io)."""

import os
import subprocess
import sys
import time

import pytest

from tests.fakes.cgroupfs import FakeCgroupFS, FakeKernel
from vnode_sync.errors import KernelError
from vnode_sync.kernel.io_v2 import UNPLACED, IoV2Backend
from vnode_sync.kernel.types import DeviceLimits, DeviceNumber

REAL_MOUNT = os.environ.get("VNODE_SYNC_REAL_CGROUP2")
DEV = DeviceNumber(*map(int, os.environ.get("VNODE_SYNC_REAL_IO_DEVICE", "8:16").split(":")))
THREADS = "import threading,time\n[threading.Thread(target=time.sleep,args=(600,),daemon=True).start() for _ in range(2)]\ntime.sleep(600)"


class Real:
    def __init__(self):
        self.children: list[subprocess.Popen] = []

    def spawn(self) -> tuple[int, list[int]]:
        child = subprocess.Popen([sys.executable, "-c", THREADS])
        self.children.append(child)
        for _ in range(200):
            tids = sorted(int(t) for t in os.listdir(f"/proc/{child.pid}/task"))
            if len(tids) >= 3:
                return child.pid, tids
            time.sleep(0.05)
        raise AssertionError("threads did not start")


class Fake:
    def __init__(self, kernel: FakeKernel):
        self.kernel, self.next = kernel, 500

    def spawn(self) -> tuple[int, list[int]]:
        pid, self.next = self.next, self.next + 10
        self.kernel.spawn(pid, pid + 1, pid + 2)
        return pid, [pid, pid + 1, pid + 2]


@pytest.fixture(params=["fake", "real"])
def v2(request, tmp_path):
    if request.param == "real":
        if not REAL_MOUNT:
            pytest.skip("no real cgroup2 with io here (VNODE_SYNC_REAL_CGROUP2 is set inside the qemu guest)")
        procs = Real()
        backend = IoV2Backend(REAL_MOUNT, f"vnode-sync.test-{os.getpid()}/agent")
    else:
        kernel = FakeKernel()
        fs = FakeCgroupFS(str(tmp_path / "unified"), kernel, version=2)
        procs = Fake(kernel)
        backend = IoV2Backend(str(tmp_path / "unified"), "vnode-sync.test/agent", fs)
    backend.setup()
    yield procs, backend
    backend.teardown()
    backend.fs.rmdir(os.path.dirname(backend.root))
    for child in getattr(procs, "children", []):
        child.kill()
        child.wait()


def test_setup_enables_io_along_the_path_and_keeps_processes_out_of_the_root(v2):
    _, backend = v2
    parent = os.path.dirname(backend.root)
    for cgroup in (backend.mount, parent, backend.root):
        assert "io" in backend.fs.read(f"{cgroup}/cgroup.subtree_control").split()
    assert "io" in backend.fs.read(f"{backend.root}/{UNPLACED}/cgroup.controllers").split()
    backend.setup()  # idempotent: every reconcile pass calls it


def test_io_max_is_written_per_device_and_cleared_with_max(v2):
    _, backend = v2
    backend.ensure_vnode("vnode.alice")
    backend.apply_limits("vnode.alice", [DeviceLimits(DEV, read_bps=20_000_000, write_iops=50)])
    assert backend.fs.read(f"{backend.root}/vnode.alice/io.max").strip() == \
        f"{DEV} rbps=20000000 wbps=max riops=max wiops=50"
    assert backend.limits("vnode.alice")[DEV] == DeviceLimits(DEV, read_bps=20_000_000, write_iops=50)
    backend.apply_limits("vnode.alice", [])
    assert backend.limits("vnode.alice") == {}


def test_weight_scales_to_io_weight_range(v2):
    _, backend = v2
    backend.ensure_vnode("vnode.alice")
    backend.apply_limits("vnode.alice", [DeviceLimits(DEV, weight=400)])
    assert backend.limits("vnode.alice")[DEV].weight == 4000


def test_placing_a_thread_moves_its_whole_process(v2):
    procs, backend = v2
    pid, tids = procs.spawn()
    backend.ensure_vnode("vnode.alice")
    backend.place("vnode.alice", tids[1])
    assert backend.members("vnode.alice") == {pid}
    assert backend.places_threads is False
    assert any("not threaded" in note for note in backend.limitations())


def test_release_moves_the_process_to_a_leaf_not_the_root(v2):
    procs, backend = v2
    pid, _ = procs.spawn()
    backend.ensure_vnode("vnode.alice")
    backend.place("vnode.alice", pid)
    backend.release(pid)
    assert backend.members("vnode.alice") == set()
    assert backend.members(UNPLACED) == {pid}
    assert backend.fs.read(f"{backend.root}/cgroup.procs").split() == []


def test_the_kernel_refuses_a_process_in_the_agents_root(v2):
    procs, backend = v2
    pid, _ = procs.spawn()
    with pytest.raises(KernelError, match="Device or resource busy"):
        backend.fs.write(f"{backend.root}/cgroup.procs", str(pid))


def test_remove_and_teardown_of_vnodes_with_members(v2):
    procs, backend = v2
    (a, _), (b, _) = procs.spawn(), procs.spawn()
    for vnode, pid in (("vnode.alice", a), ("vnode.bob", b)):
        backend.ensure_vnode(vnode)
        backend.apply_limits(vnode, [DeviceLimits(DEV, read_bps=5_000_000)])
        backend.place(vnode, pid)
    backend.remove_vnode("vnode.alice")
    assert "vnode.alice" not in backend.vnodes() and backend.members(UNPLACED) == {a}
    backend.teardown()
    assert not os.path.exists(backend.root)
    assert {str(a), str(b)} <= set(backend.fs.read(f"{backend.mount}/cgroup.procs").split()) or \
        not REAL_MOUNT  # the fake's root lists only processes moved there
    backend.setup()  # the fixture's teardown runs again on a fresh tree


def test_a_vanished_process_is_esrch(v2):
    _, backend = v2
    backend.ensure_vnode("vnode.alice")
    with pytest.raises(ProcessLookupError):
        backend.place("vnode.alice", 4_000_000)
