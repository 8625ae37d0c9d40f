"""The cgroup v2 io backend against the kernel's v2 rules: on the strict fake cgroupfs here, and on
a real cgroup-v2 kernel when VNODE_SYNC_REAL_CGROUP2 names a cgroup2 mount that offers io. This
host's cgroup2 has no io; tests/kernel/test_io_v2_guest.py runs this module inside a qemu guest
(testbed/cgroup_v2_guest.py) where it does, with the guest's virtio disk as the device."""

import os
import subprocess
import sys
import time

import pytest

from tests.fakes.cgroupfs import FakeCgroupFS, FakeKernel
from vnode_sync.kernel.backend import HostCgroups
from vnode_sync.errors import KernelError, Unsupported
from vnode_sync.kernel.io_v2 import UNMANAGED_LEAF, IoV2Backend
from vnode_sync.kernel.types import DeviceLimits, DeviceNumber

REAL_MOUNT = os.environ.get("VNODE_SYNC_REAL_CGROUP2")
DEV = DeviceNumber(*map(int, os.environ.get("VNODE_SYNC_REAL_IO_DEVICE", "8:16").split(":")))
SLEEPER = ("import threading, time\n"
           "[threading.Thread(target=time.sleep, args=(600,), daemon=True).start() for _ in range(2)]\n"
           "time.sleep(600)")


class RealProcesses:
    """Real processes with three threads each, killed at the end."""

    def __init__(self):
        self.children: list[subprocess.Popen] = []

    def spawn(self) -> tuple[int, list[int]]:
        child = subprocess.Popen([sys.executable, "-c", SLEEPER])
        self.children.append(child)
        for _ in range(400):
            tids = sorted(int(t) for t in os.listdir(f"/proc/{child.pid}/task"))
            if len(tids) == 3:
                return child.pid, tids
            time.sleep(0.05)
        raise AssertionError("the test process did not start its threads")

    def enable_weights(self, mount: str) -> None:
        with open(os.path.join(mount, "io.cost.qos"), "w") as f:
            f.write(f"{DEV} enable=1")

    def stop(self) -> None:
        for child in self.children:
            child.kill()
            child.wait()


class FakeProcesses:
    def __init__(self, kernel: FakeKernel):
        self.kernel, self.next_pid = kernel, 500

    def spawn(self) -> tuple[int, list[int]]:
        pid, self.next_pid = self.next_pid, self.next_pid + 100
        self.kernel.spawn(pid, pid + 1, pid + 2)
        return pid, [pid, pid + 1, pid + 2]

    def enable_weights(self, mount: str) -> None:
        self.kernel.iocost_devices.add(DEV)

    def stop(self) -> None:
        pass


@pytest.fixture(params=["fake", "real"])
def v2(request, tmp_path):
    if request.param == "real":
        if not REAL_MOUNT:
            pytest.skip("no cgroup2 with io here (this host's has none); "
                        "tests/kernel/test_io_v2_guest.py runs these in a qemu guest")
        procs = RealProcesses()
        backend = IoV2Backend(REAL_MOUNT, f"vnode-sync.test-{os.getpid()}")
    else:
        kernel = FakeKernel()
        fs = FakeCgroupFS(str(tmp_path / "unified"), kernel, version=2)
        procs = FakeProcesses(kernel)
        backend = IoV2Backend(str(tmp_path / "unified"), "vnode-sync.test", fs)
    backend.setup()
    yield procs, backend
    try:
        backend.teardown()
    finally:
        procs.stop()


def test_io_max_is_written_per_device_and_cleared_with_max(v2):
    _, backend = v2
    backend.ensure_vnode("vnode.alice")
    backend.apply_limits("vnode.alice", [DeviceLimits(DEV, read_bps=20_000_000, write_iops=50)])
    assert backend.fs.read(f"{backend.root}/vnode.alice/io.max").strip() == \
        f"{DEV} rbps=20000000 wbps=max riops=max wiops=50"
    assert backend.limits("vnode.alice")[DEV] == DeviceLimits(DEV, read_bps=20_000_000, write_iops=50)
    backend.apply_limits("vnode.alice", [])
    assert backend.limits("vnode.alice") == {}


def test_placing_a_thread_moves_its_whole_process(v2):
    procs, backend = v2
    pid, tids = procs.spawn()
    backend.ensure_vnode("vnode.alice")
    backend.place("vnode.alice", tids[1])
    assert backend.members("vnode.alice") == {pid}
    assert backend.places_threads is False
    assert any("not threaded" in note for note in backend.limitations())


def test_a_per_device_weight_needs_the_io_cost_model(v2):
    """Per-device io.weight is blk-iocost's: refused until io.cost.qos enables it for the device."""
    procs, backend = v2
    backend.ensure_vnode("vnode.alice")
    with pytest.raises(KernelError, match="not supported"):
        backend.apply_limits("vnode.alice", [DeviceLimits(DEV, weight=400)])
    procs.enable_weights(backend.mount)
    backend.apply_limits("vnode.alice", [DeviceLimits(DEV, weight=400)])
    assert f"{DEV} 4000" in backend.fs.read(backend._path("vnode.alice", "io.weight"))
    assert backend.limits("vnode.alice")[DEV].weight == 400   # read back in the unit it was set in


def test_limits_as_set_are_not_written_again(v2):
    procs, backend = v2
    procs.enable_weights(backend.mount)
    backend.ensure_vnode("vnode.alice")
    wanted = [DeviceLimits(DEV, read_bps=5_000_000, weight=400)]
    backend.apply_limits("vnode.alice", wanted)
    writes = []
    write = backend.fs.write
    backend.fs.write = lambda path, text: writes.append(path) or write(path, text)
    backend.apply_limits("vnode.alice", wanted)
    backend.fs.write = write
    assert writes == []


def test_a_released_process_goes_to_the_unmanaged_leaf_because_the_root_may_hold_none(v2):
    procs, backend = v2
    pid, _ = procs.spawn()
    backend.ensure_vnode("vnode.alice")
    backend.place("vnode.alice", pid)
    backend.release(pid)
    assert backend.members("vnode.alice") == set()
    assert backend.fs.read(f"{backend.root}/{UNMANAGED_LEAF}/cgroup.procs").split() == [str(pid)]
    assert backend.fs.read(f"{backend.root}/cgroup.procs").split() == []
    with pytest.raises(KernelError, match="busy"):
        backend.fs.write(f"{backend.root}/cgroup.procs", str(pid))   # the no-internal-process rule


def test_a_vnode_with_members_is_removed_and_the_subtree_torn_down(v2):
    procs, backend = v2
    (alice, _), (bob, _) = procs.spawn(), procs.spawn()
    backend.ensure_vnode("vnode.alice")
    backend.ensure_vnode("vnode.bob")
    backend.place("vnode.alice", alice)
    backend.place("vnode.bob", bob)
    backend.remove_vnode("vnode.alice")
    assert backend.vnodes() == ["vnode.bob"]
    backend.teardown()
    assert not os.path.exists(backend.root)
    assert {str(alice), str(bob)} <= set(backend.fs.read(f"{backend.mount}/cgroup.procs").split())


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


@pytest.mark.parametrize("layout,found", [
    ({"cgroup.controllers": "cpuset cpu io memory pids"}, ""),                    # pure v2 at the root
    ({"unified/cgroup.controllers": "io memory"}, "unified"),                      # hybrid: v2 beside v1
    ({"cgroup.controllers": "cpu memory", "unified/cgroup.controllers": "io"}, "unified"),
    ({"cgroup.controllers": "cpu memory pids"}, None),                             # v2 without io
    ({"blkio/blkio.throttle.read_bps_device": ""}, None),                          # v1 only
])
def test_the_v2_mount_is_where_cgroup_controllers_lists_io(tmp_path, layout, found):
    for path, text in layout.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text + "\n")
    mount = HostCgroups(str(tmp_path)).v2_mount()
    mount = mount and os.path.normpath(mount)
    assert mount == (None if found is None else os.path.normpath(os.path.join(str(tmp_path), found)))


def test_real_kernel_v2_io_controller():
    mount = HostCgroups().v2_mount()
    if mount is None:
        pytest.skip("this host's cgroup2 hierarchy offers no io controller (cgroup.controllers lacks 'io')")
    with open("/proc/self/mounts") as f:
        cgroup2 = {fields[1] for fields in (line.split() for line in f) if fields[2] == "cgroup2"}
    assert os.path.normpath(mount) in cgroup2, "the io controller was found on a cgroup2 mount"
