"""The fake cgroupfs refuses what a v2 kernel refuses (Documentation/admin-guide/cgroup-v2.rst:
"No Internal Process Constraint", "Enabling and Disabling", "Threads")."""

import pytest

from tests.fakes.cgroupfs import FakeCgroupFS, FakeKernel
from vnode_sync.errors import KernelError


@pytest.fixture
def fs(tmp_path):
    kernel = FakeKernel()
    kernel.spawn(100, 101, 102)
    fs = FakeCgroupFS(str(tmp_path / "unified"), kernel, version=2)
    return fs, str(tmp_path / "unified")


def test_a_process_cannot_join_a_cgroup_that_enables_io_for_its_children(fs):
    fs, root = fs
    fs.write(f"{root}/cgroup.subtree_control", "+io")
    fs.mkdir(f"{root}/a")
    fs.write(f"{root}/a/cgroup.subtree_control", "+io")
    with pytest.raises(KernelError, match="busy"):
        fs.write(f"{root}/a/cgroup.procs", "100")
    fs.write(f"{root}/cgroup.procs", "100")  # the root cgroup is exempt


def test_io_cannot_be_enabled_where_processes_live(fs):
    fs, root = fs
    fs.write(f"{root}/cgroup.subtree_control", "+io")
    fs.mkdir(f"{root}/a")
    fs.write(f"{root}/a/cgroup.procs", "100")
    with pytest.raises(KernelError, match="busy"):
        fs.write(f"{root}/a/cgroup.subtree_control", "+io")


def test_a_controller_needs_the_parent_to_enable_it(fs):
    fs, root = fs
    fs.mkdir(f"{root}/a")
    with pytest.raises(KernelError, match="No such file"):
        fs.write(f"{root}/a/cgroup.subtree_control", "+io")
    fs.write(f"{root}/cgroup.subtree_control", "+io")
    fs.mkdir(f"{root}/a/b")
    fs.write(f"{root}/a/cgroup.subtree_control", "+io")
    with pytest.raises(KernelError, match="busy"):
        fs.write(f"{root}/cgroup.subtree_control", "-io")  # a child still enables it


def test_unknown_pid_is_esrch(fs):
    fs, root = fs
    with pytest.raises(ProcessLookupError):
        fs.write(f"{root}/cgroup.procs", "99999")


def test_threaded_subtrees_take_threads_but_offer_no_io(fs):
    fs, root = fs
    fs.write(f"{root}/cgroup.subtree_control", "+cpu")
    fs.mkdir(f"{root}/d")
    fs.mkdir(f"{root}/d/t")
    fs.write(f"{root}/d/t/cgroup.type", "threaded")
    assert fs.read(f"{root}/d/cgroup.type").strip() == "domain threaded"
    assert "io" not in fs.read(f"{root}/d/t/cgroup.controllers").split()
    fs.write(f"{root}/d/cgroup.procs", "100")
    fs.write(f"{root}/d/t/cgroup.threads", "101")  # a thread of a process in the subtree
    assert fs.read(f"{root}/d/t/cgroup.threads").split() == ["101"]
    fs.mkdir(f"{root}/other")
    with pytest.raises(KernelError, match="not supported"):
        fs.write(f"{root}/other/cgroup.threads", "102")  # outside its threaded subtree


def test_domain_controllers_refuse_threaded(fs):
    fs, root = fs
    fs.write(f"{root}/cgroup.subtree_control", "+io")
    fs.mkdir(f"{root}/a")
    fs.write(f"{root}/a/cgroup.subtree_control", "+io")
    fs.mkdir(f"{root}/a/t")
    with pytest.raises(KernelError, match="not supported"):
        fs.write(f"{root}/a/t/cgroup.type", "threaded")
    with pytest.raises(KernelError, match="Invalid"):
        fs.write(f"{root}/a/cgroup.type", "domain")
