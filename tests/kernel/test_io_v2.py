"""The cgroup v2 io backend on the fake cgroupfs. This machine's cgroup2 has no io controller,
so the real-kernel variant skips with that reason (checked, not assumed)."""

import pytest

from tests.fakes.cgroupfs import FakeCgroupFS, FakeKernel
from vnode_sync.kernel.backend import HostCgroups
from vnode_sync.kernel.io_v2 import IoV2Backend
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


def test_real_kernel_v2_io_controller():
    mount = HostCgroups().v2_mount()
    if mount is None:
        pytest.skip("this host's cgroup2 hierarchy offers no io controller (cgroup.controllers lacks 'io')")
    assert mount  # a host with v2 io: the backend can be pointed at it by the agent's auto detection
