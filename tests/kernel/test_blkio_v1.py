"""The cgroup v1 blkio backend, against the fake cgroupfs and against the real kernel."""

import contextlib
import errno
import os
import subprocess

import pytest

from tests.conftest import WHY_NO_KERNEL, unique_name
from tests.fakes.cgroupfs import FakeCgroupFS, FakeKernel
from vnode_sync.kernel.devices import set_scheduler
from testbed.loopdev import loop_device, why_no_bfq
from vnode_sync.errors import KernelError, ThreadGone
from vnode_sync.kernel.backend import DEFAULT_VNODE
from vnode_sync.kernel.blkio_v1 import BlkioV1Backend
from vnode_sync.kernel.types import DeviceCapacity, DeviceLimits, DeviceNumber

WHY_NO_BFQ = why_no_bfq()


class FakeWorld:
    name = "fake"

    def __init__(self, tmp_path):
        self.kernel = FakeKernel()
        self.hierarchy = str(tmp_path / "blkio")
        self.fs = FakeCgroupFS(self.hierarchy, self.kernel)
        self.device = DeviceNumber(7, 42)
        self._next = 1000
        # The device's scheduler as sysfs shows it: BFQ's weights hold only while it is the active one.
        self.sys_root = str(tmp_path / "sys")
        self._scheduler = os.path.join(self.sys_root, "dev", "block", str(self.device), "queue", "scheduler")
        os.makedirs(os.path.dirname(self._scheduler))
        self.use_bfq(False)

    def thread(self) -> int:
        self._next += 1
        self.kernel.spawn(self._next)
        return self._next

    def end_thread(self, tid: int) -> None:
        del self.kernel.threads[tid]
        for dirpath, _, files in os.walk(self.hierarchy):
            path = os.path.join(dirpath, "tasks")
            kept = [t for t in open(path).read().split() if int(t) != tid]
            open(path, "w").write("".join(t + "\n" for t in kept))

    def use_bfq(self, on: bool) -> None:
        (self.kernel.bfq_devices.add if on else self.kernel.bfq_devices.discard)(self.device)
        with open(self._scheduler, "w") as f:
            f.write("none mq-deadline kyber [bfq]\n" if on else "[none] mq-deadline kyber bfq\n")

    def close(self):
        pass


class KernelWorld:
    name = "kernel"

    def __init__(self):
        self.hierarchy = "/sys/fs/cgroup/blkio"
        self.fs = None
        self.sys_root = "/sys"
        self._stack = contextlib.ExitStack()
        _, self.device = self._stack.enter_context(loop_device(unique_name("loop")))
        self._children = []

    def thread(self) -> int:
        child = subprocess.Popen(["sleep", "60"])
        self._children.append(child)
        return child.pid

    def end_thread(self, tid: int) -> None:
        for c in self._children:
            if c.pid == tid:
                c.kill()
                c.wait()

    def use_bfq(self, on: bool) -> None:
        if on and WHY_NO_BFQ:
            pytest.skip(f"real-kernel variant: {WHY_NO_BFQ}")
        set_scheduler(self.device, "bfq" if on else "none")

    def close(self):
        for c in self._children:
            c.kill()
            c.wait()
        self._stack.close()


@pytest.fixture(params=["fake", "kernel"])
def world(request, tmp_path):
    if request.param == "kernel":
        if WHY_NO_KERNEL:
            pytest.skip(f"real-kernel variant: {WHY_NO_KERNEL}")
        w = KernelWorld()
    else:
        w = FakeWorld(tmp_path)
    backend = BlkioV1Backend(w.hierarchy, unique_name("blkio"), w.fs, sys_root=w.sys_root)
    backend.setup()
    yield w, backend
    backend.teardown()
    assert not os.path.exists(backend.root), "teardown must remove the agent's subtree"
    w.close()


def test_vnodes_are_created_listed_and_removed(world):
    w, backend = world
    backend.ensure_vnode("vnode.alice")
    backend.ensure_vnode("vnode.alice")  # idempotent
    backend.ensure_vnode(DEFAULT_VNODE)
    assert sorted(backend.vnodes()) == [DEFAULT_VNODE, "vnode.alice"]
    backend.remove_vnode("vnode.alice")
    assert backend.vnodes() == [DEFAULT_VNODE]


def test_throttle_limits_are_set_changed_and_cleared(world):
    w, backend = world
    backend.ensure_vnode("vnode.alice")
    backend.apply_limits("vnode.alice", [DeviceLimits(w.device, read_bps=20_000_000, write_iops=300)])
    assert backend.limits("vnode.alice") == {
        w.device: DeviceLimits(w.device, read_bps=20_000_000, write_iops=300)}
    backend.apply_limits("vnode.alice", [DeviceLimits(w.device, read_bps=10_485_760, write_bps=5_000_000)])
    assert backend.limits("vnode.alice") == {
        w.device: DeviceLimits(w.device, read_bps=10_485_760, write_bps=5_000_000)}
    backend.apply_limits("vnode.alice", [])
    assert backend.limits("vnode.alice") == {}


def test_write_throttle_files_are_the_real_names(world):
    """cgroupspy's trailing-space file names broke write throttling unnoticed; ours are checked."""
    w, backend = world
    backend.ensure_vnode("vnode.alice")
    backend.apply_limits("vnode.alice", [DeviceLimits(w.device, write_bps=7_000_000)])
    with open(os.path.join(backend.root, "vnode.alice", "blkio.throttle.write_bps_device")) as f:
        assert f.read().split() == [str(w.device), "7000000"]


def test_placing_a_thread_moves_it_out_of_its_previous_vnode(world):
    w, backend = world
    tid = w.thread()
    for vnode in ("vnode.alice", "vnode.bob"):
        backend.ensure_vnode(vnode)
    backend.place("vnode.alice", tid)
    assert tid in backend.members("vnode.alice")
    backend.place("vnode.bob", tid)
    assert tid in backend.members("vnode.bob") and tid not in backend.members("vnode.alice")


def test_removing_a_vnode_releases_its_threads_first(world):
    w, backend = world
    tid = w.thread()
    backend.ensure_vnode("vnode.alice")
    backend.place("vnode.alice", tid)
    backend.remove_vnode("vnode.alice")
    assert backend.vnodes() == []
    with open(os.path.join(backend.root, "tasks")) as f:
        assert str(tid) in f.read().split()


def test_placing_a_vanished_thread_is_thread_gone_not_a_builtin(world):
    w, backend = world
    tid = w.thread()
    w.end_thread(tid)
    backend.ensure_vnode("vnode.alice")
    with pytest.raises(ThreadGone) as gone:
        backend.place("vnode.alice", tid)
    assert gone.value.tid == tid and not isinstance(gone.value, ProcessLookupError)
    assert str(gone.value) == f"{backend.root}/vnode.alice/tasks: thread {tid} no longer exists"
    backend.release(tid)   # releasing a thread that has gone is not an error


def test_a_malformed_limit_is_a_kernel_error_naming_path_value_and_what_is_allowed(world):
    w, backend = world
    backend.ensure_vnode("vnode.alice")
    path = os.path.join(backend.root, "vnode.alice", "blkio.throttle.read_bps_device")
    with pytest.raises(KernelError) as refused:
        backend.fs.write(path, f"{w.device} lots")
    assert refused.value.code == errno.EINVAL and refused.value.value == f"{w.device} lots"
    assert str(refused.value) == (f"{path}: kernel refused '{w.device} lots': Invalid argument; allowed: "
                                  "'MAJ:MIN VALUE' for a whole disk (not a partition), VALUE a whole number, "
                                  "0 removes the rule")
    assert backend.limits("vnode.alice") == {}    # nothing half-applied


def test_removing_a_cgroup_that_has_members_is_a_kernel_error_saying_why(world):
    w, backend = world
    tid = w.thread()
    backend.ensure_vnode("vnode.alice")
    backend.place("vnode.alice", tid)
    with pytest.raises(KernelError) as busy:
        backend.fs.rmdir(os.path.join(backend.root, "vnode.alice"))
    assert busy.value.code == errno.EBUSY
    assert str(busy.value).endswith("cannot remove cgroup: Device or resource busy; "
                                    "needs: no members and no child cgroups (to remove a cgroup)")
    assert tid in backend.members("vnode.alice")


def test_bfq_weight_needs_bfq_and_is_reset_to_default(world):
    w, backend = world
    backend.ensure_vnode("vnode.alice")
    w.use_bfq(False)
    with pytest.raises(KernelError, match="bfq"):
        backend.apply_limits("vnode.alice", [DeviceLimits(w.device, weight=400)])
    w.use_bfq(True)
    try:
        backend.apply_limits("vnode.alice", [DeviceLimits(w.device, weight=400)])
        assert backend.limits("vnode.alice")[w.device].weight == 400
        backend.apply_limits("vnode.alice", [])
        assert backend.limits("vnode.alice") == {}
    finally:
        w.use_bfq(False)


def test_it_shares_by_weight_only_while_bfq_is_the_scheduler_of_every_device(world):
    w, backend = world
    assert not backend.shares_by_weight                      # no device known yet
    backend.set_capacities([DeviceCapacity(w.device, 60_000_000, 60_000_000)])
    w.use_bfq(False)
    assert not backend.shares_by_weight
    w.use_bfq(True)
    try:
        assert backend.shares_by_weight
    finally:
        w.use_bfq(False)


def test_work_conserving_weights_and_ceilings_are_written_and_applying_them_again_writes_nothing(world):
    """BFQ's integer weight and a limit together; applying the same set again finds nothing to change."""
    w, backend = world
    backend.ensure_vnode("vnode.alice")
    backend.ensure_vnode("vnode.bob")
    w.use_bfq(True)
    try:
        alice = DeviceLimits(w.device, weight=1000)
        bob = DeviceLimits(w.device, read_bps=20_000_000, write_bps=20_000_000, weight=500)
        backend.apply_limits("vnode.alice", [alice])
        backend.apply_limits("vnode.bob", [bob])
        assert backend.limits("vnode.alice") == {w.device: alice}
        assert backend.limits("vnode.bob") == {w.device: bob}
        path = os.path.join(backend.root, "vnode.bob", "blkio.bfq.weight_device")
        before = os.stat(path).st_mtime_ns
        backend.apply_limits("vnode.bob", [bob])            # nothing differs: nothing written
        assert os.stat(path).st_mtime_ns == before
        backend.apply_limits("vnode.bob", [DeviceLimits(w.device, weight=250)])
        assert backend.limits("vnode.bob") == {w.device: DeviceLimits(w.device, weight=250)}
    finally:
        backend.apply_limits("vnode.alice", [])
        backend.apply_limits("vnode.bob", [])
        w.use_bfq(False)
