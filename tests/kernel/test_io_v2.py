"""The cgroup v2 io backend on the fake cgroupfs. This machine's cgroup2 has no io controller,
so the real-kernel variant skips with that reason (checked, not assumed)."""

import os

import pytest

from tests.fakes.cgroupfs import FakeCgroupFS, FakeKernel
from vnode_sync.kernel.backend import HostCgroups
from vnode_sync.errors import KernelError, Unsupported
from vnode_sync.kernel.io_v2 import UNMANAGED_LEAF, IoV2Backend
from vnode_sync.kernel.types import DeviceLimits, DeviceNumber

DEV = DeviceNumber(8, 16)


@pytest.fixture
def v2(tmp_path):
    kernel = FakeKernel()
    fs = FakeCgroupFS(str(tmp_path / "unified"), kernel, version=2)
    backend = IoV2Backend(str(tmp_path / "unified"), "vnode-sync.test", fs)
    backend.setup()
    return kernel, backend


def test_io_max_is_written_per_device_and_cleared_with_max(v2):
    _, backend = v2
    backend.ensure_vnode("vnode.alice")
    backend.apply_limits("vnode.alice", [DeviceLimits(DEV, read_bps=20_000_000, write_iops=50)])
    with open(f"{backend.root}/vnode.alice/io.max") as f:
        assert f.read().strip() == "8:16 rbps=20000000 wbps=max riops=max wiops=50"
    assert backend.limits("vnode.alice")[DEV] == DeviceLimits(DEV, read_bps=20_000_000, write_iops=50)
    backend.apply_limits("vnode.alice", [])
    assert backend.limits("vnode.alice") == {}


def test_placing_a_thread_moves_its_whole_process(v2):
    kernel, backend = v2
    kernel.spawn(500, 501, 502)
    backend.ensure_vnode("vnode.alice")
    backend.place("vnode.alice", 501)
    assert backend.members("vnode.alice") == {500}
    assert backend.places_threads is False
    assert any("not threaded" in note for note in backend.limitations())


def test_weight_scales_to_io_weight_range(v2):
    _, backend = v2
    backend.ensure_vnode("vnode.alice")
    backend.apply_limits("vnode.alice", [DeviceLimits(DEV, weight=400)])
    assert f"{DEV} 4000" in backend.fs.read(backend._path("vnode.alice", "io.weight"))
    assert backend.limits("vnode.alice")[DEV].weight == 400   # read back in the unit it was set in


def test_limits_as_set_are_not_written_again(v2):
    kernel, backend = v2
    backend.ensure_vnode("vnode.alice")
    wanted = [DeviceLimits(DEV, read_bps=5_000_000, weight=400)]
    backend.apply_limits("vnode.alice", wanted)
    writes = []
    write = backend.fs.write
    backend.fs.write = lambda path, text: writes.append(path) or write(path, text)
    backend.apply_limits("vnode.alice", wanted)
    assert writes == []


def test_a_released_process_goes_to_the_unmanaged_leaf_because_the_root_may_hold_none(v2):
    kernel, backend = v2
    kernel.spawn(500, 501)
    backend.ensure_vnode("vnode.alice")
    backend.place("vnode.alice", 500)
    backend.release(500)
    assert backend.members("vnode.alice") == set()
    assert backend.fs.read(f"{backend.root}/{UNMANAGED_LEAF}/cgroup.procs").split() == ["500"]
    assert backend.fs.read(f"{backend.root}/cgroup.procs").split() == []


def test_a_vnode_with_members_is_removed_and_the_subtree_torn_down(v2):
    kernel, backend = v2
    kernel.spawn(500)
    kernel.spawn(600)
    backend.ensure_vnode("vnode.alice")
    backend.ensure_vnode("vnode.bob")
    backend.place("vnode.alice", 500)
    backend.place("vnode.bob", 600)
    backend.remove_vnode("vnode.alice")
    assert backend.vnodes() == ["vnode.bob"]
    backend.teardown()
    assert not os.path.exists(backend.root)
    assert set(backend.fs.read(f"{backend.mount}/cgroup.procs").split()) == {"500", "600"}


def test_setup_enables_io_on_the_way_down_and_says_so_when_it_cannot(tmp_path):
    kernel = FakeKernel()
    kernel.spawn(42)
    fs = FakeCgroupFS(str(tmp_path / "unified"), kernel, version=2)
    fs.mkdir(str(tmp_path / "unified" / "system.slice"))
    fs.write(str(tmp_path / "unified" / "system.slice" / "cgroup.procs"), "42")  # a parent that holds a process
    backend = IoV2Backend(str(tmp_path / "unified" / "system.slice"), "vnode-sync.dn1", fs)
    with pytest.raises(Unsupported, match="not delegated to .*system.slice.*Delegate=yes"):
        backend.setup()
    delegated = IoV2Backend(str(tmp_path / "unified"), "vnode-sync.dn1", fs)
    delegated.setup()                                       # the mount root may enable io for it
    assert "io" in fs.read(f"{delegated.root}/cgroup.controllers").split()


# ---- the fake cgroupfs refuses what the kernel refuses (cgroup-v2.rst) ------------------

@pytest.fixture
def fs(tmp_path):
    kernel = FakeKernel()
    kernel.spawn(500, 501)
    return FakeCgroupFS(str(tmp_path / "unified"), kernel, version=2)


def test_fake_v2_no_internal_processes(fs):
    root = fs.hierarchy
    fs.mkdir(f"{root}/a")
    fs.write(f"{root}/cgroup.subtree_control", "+io")
    fs.mkdir(f"{root}/a/b")
    fs.write(f"{root}/a/cgroup.procs", "500")
    with pytest.raises(KernelError, match="Device or resource busy; allowed: a non-root cgroup holding processes"):
        fs.write(f"{root}/a/cgroup.subtree_control", "+io")   # it holds a process
    fs.write(f"{root}/a/b/cgroup.procs", "500")
    fs.write(f"{root}/a/cgroup.subtree_control", "+io")
    with pytest.raises(KernelError, match=r"'500': Device or resource busy; allowed: .*\(no-internal-process rule\)"):
        fs.write(f"{root}/a/cgroup.procs", "500")              # it enables io
    fs.write(f"{root}/cgroup.procs", "500")                     # the root is exempt


def test_fake_v2_controllers_come_from_the_parent(fs):
    root = fs.hierarchy
    fs.mkdir(f"{root}/a")
    assert not os.path.exists(f"{root}/a/io.max")
    with pytest.raises(KernelError, match="No such file"):
        fs.write(f"{root}/a/io.max", f"{DEV} rbps=1000")
    with pytest.raises(KernelError, match="No such file"):
        fs.write(f"{root}/a/cgroup.subtree_control", "+io")      # the parent does not pass it down
    fs.write(f"{root}/cgroup.subtree_control", "+io")
    fs.write(f"{root}/a/io.max", f"{DEV} rbps=1000")


def test_fake_v2_threaded_mode(fs):
    root = fs.hierarchy
    fs.write(f"{root}/cgroup.subtree_control", "+pids")
    fs.mkdir(f"{root}/dn")
    fs.write(f"{root}/dn/cgroup.procs", "500")
    fs.mkdir(f"{root}/dn/t1")
    fs.write(f"{root}/dn/t1/cgroup.type", "threaded")
    fs.write(f"{root}/dn/t1/cgroup.threads", "501")               # a thread within its threaded domain
    with pytest.raises(KernelError, match="No such file"):
        fs.write(f"{root}/dn/t1/cgroup.subtree_control", "+io")   # a threaded subtree never gets io
    fs.write(f"{root}/cgroup.subtree_control", "+io")
    fs.mkdir(f"{root}/vnodes")
    fs.write(f"{root}/vnodes/cgroup.subtree_control", "+io")
    with pytest.raises(KernelError, match="not supported"):
        fs.write(f"{root}/vnodes/cgroup.type", "threaded")        # io is not a threaded controller
    fs.mkdir(f"{root}/other")
    with pytest.raises(KernelError, match="not supported"):
        fs.write(f"{root}/other/cgroup.threads", "501")           # a thread cannot leave its process's domain


def test_real_kernel_v2_io_controller():
    mount = HostCgroups().v2_mount()
    if mount is None:
        pytest.skip("this host's cgroup2 hierarchy offers no io controller (cgroup.controllers lacks 'io')")
    assert mount  # a host with v2 io: the backend can be pointed at it by the agent's auto detection
