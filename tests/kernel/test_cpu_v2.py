"""cgroup v2's threaded cpu groups against the kernel's rules: on the strict fake cgroupfs here, and on a real
cgroup-v2 kernel when VNODE_SYNC_REAL_CGROUP2 names a cgroup2 mount that offers cpu (this host's offers none;
tests/kernel/test_io_v2_guest.py runs this module inside the qemu guest)."""

import os
import time

import pytest

from testbed.names import unique_name
from tests.fakes.cgroupfs import FakeCgroupFS, FakeKernel
from tests.kernel.test_io_v2 import FakeProcesses, RealProcesses
from vnode_sync.errors import InvalidArgument, KernelError, Unsupported
from vnode_sync.kernel.backend import HostCgroups
from vnode_sync.kernel.cgroupfs import CgroupFS
from vnode_sync.kernel.cpu_groups import checked_group
from vnode_sync.kernel.cpu_hierarchy import cpu_groups_for, unavailable
from vnode_sync.kernel.cpu_v1 import CpuGroups
from vnode_sync.kernel.cpu_v2 import ThreadedCpuGroups, weight_of_shares

REAL_MOUNT = os.environ.get("VNODE_SYNC_REAL_CGROUP2")


def offers_cpu(mount: str | None) -> bool:
    try:
        return bool(mount) and "cpu" in open(os.path.join(mount, "cgroup.controllers")).read().split()
    except OSError:
        return False


class Tree:
    """A cgroup2 hierarchy with cpu on at its root and a DataNode-like process (PID with three threads) in
    its own cgroup `home`; real or fake, removed at the end."""

    def __init__(self, kind: str, tmp_path):
        self.made: list[str] = []
        self.real = kind == "real"
        if self.real:
            if not offers_cpu(REAL_MOUNT):
                pytest.skip("no cgroup2 with cpu here (this host's has none); "
                            "tests/kernel/test_io_v2_guest.py runs these in a qemu guest")
            self.mount, self.fs, self.procs = REAL_MOUNT, CgroupFS(), RealProcesses()
            self.root_cpu_was_on = "cpu" in self.fs.read(f"{self.mount}/cgroup.subtree_control").split()
        else:
            self.kernel = FakeKernel()
            self.mount = str(tmp_path / "unified")
            self.fs = FakeCgroupFS(self.mount, self.kernel, version=2)
            self.procs, self.root_cpu_was_on = FakeProcesses(self.kernel), False
        self.fs.write(f"{self.mount}/cgroup.subtree_control", "+cpu")
        self.home = self.cgroup(unique_name("cpu-v2-dn"))
        self.pid, self.tids = self.spawn(self.home)

    def cgroup(self, path: str) -> str:
        full = os.path.join(self.mount, path)
        self.fs.mkdir(full)
        self.made.append(full)
        return full

    def spawn(self, cgroup: str) -> tuple[int, list[int]]:
        pid, tids = self.procs.spawn()
        self.fs.write(f"{cgroup}/cgroup.procs", str(pid))
        return pid, tids

    def groups(self, home: str | None = None) -> ThreadedCpuGroups:
        return ThreadedCpuGroups(home or self.home, "vnode-sync.test", self.fs, mount=self.mount)

    def close(self) -> None:
        """The real kernel's cgroups removed, and cpu at its root as it was (the fake goes with tmp_path)."""
        self.procs.stop()
        if not self.real:
            return
        for path in reversed(self.made):
            for _ in range(50):   # a killed process leaves its cgroup a moment later
                try:
                    self.fs.rmdir(path)
                    break
                except KernelError:
                    time.sleep(0.05)
        if not self.root_cpu_was_on:
            self.fs.write(f"{self.mount}/cgroup.subtree_control", "-cpu")


@pytest.fixture(params=["fake", "real"])
def tree(request, tmp_path):
    t = Tree(request.param, tmp_path)
    yield t
    t.close()


def threads_in(tree: Tree, cgroup: str) -> set[int]:
    return {int(t) for t in tree.fs.read(f"{cgroup}/cgroup.threads").split()}


def test_threads_land_in_their_users_threaded_groups_with_weights_from_shares(tree):
    groups = tree.groups()
    assert groups.refusal() is None
    groups.ensure("vnode.alice", 10_240)
    groups.ensure("vnode.bob", 5_120)
    groups.set_parent_shares(2 * 1024)
    assert groups.place("vnode.alice", tree.tids[1]) and groups.place("vnode.bob", tree.tids[2])
    assert groups.members("vnode.alice") == {tree.tids[1]} and groups.members("vnode.bob") == {tree.tids[2]}
    assert (groups.weight("vnode.alice"), groups.weight("vnode.bob")) == (1000, 500)
    assert int(tree.fs.read(f"{groups.parent}/cpu.weight")) == 200   # two nice-0 threads' worth
    assert tree.fs.read(f"{tree.home}/cgroup.type").strip() == "domain threaded"
    assert tree.fs.read(f"{groups.parent}/cgroup.type").strip() == "threaded"
    assert tree.fs.read(f"{groups.parent}/vnode.alice/cgroup.type").strip() == "threaded"
    assert threads_in(tree, tree.home) == {tree.tids[0]}
    groups.teardown()


def test_teardown_sends_every_thread_home_and_leaves_home_a_plain_domain(tree):
    groups = tree.groups()
    groups.ensure("vnode.alice", 1024)
    groups.place("vnode.alice", tree.tids[1])
    groups.teardown()
    assert not os.path.exists(groups.parent)
    assert threads_in(tree, tree.home) == set(tree.tids)
    assert tree.fs.read(f"{tree.home}/cgroup.type").strip() == "domain"
    assert "cpu" not in tree.fs.read(f"{tree.home}/cgroup.subtree_control").split()


def test_a_process_in_a_child_that_is_not_threaded_is_a_refusal_the_kernel_agrees_with(tree):
    other = tree.cgroup(os.path.relpath(tree.home, tree.mount) + "/other")
    tree.spawn(other)
    groups = tree.groups()
    assert "has processes in child cgroups that are not threaded (other)" in groups.refusal()
    with pytest.raises(KernelError, match="not supported"):
        groups.ensure("vnode.alice", 1024)   # what writing the subtree anyway would meet
    groups.teardown()


def test_cpu_not_passed_down_to_the_datanodes_cgroup_is_a_refusal(tree):
    mid = tree.cgroup(unique_name("cpu-v2-mid"))   # passes nothing on to its children
    home = tree.cgroup(os.path.relpath(mid, tree.mount) + "/dn")
    tree.spawn(home)
    assert "cpu is not passed down to" in tree.groups(home).refusal()
    assert "CPUAccounting=yes" in tree.groups(home).refusal()


def test_a_systemd_units_cgroup_needs_delegate_yes(tmp_path):
    tree = Tree("fake", tmp_path)
    unit = tree.cgroup("system.slice")
    tree.fs.write(f"{unit}/cgroup.subtree_control", "+cpu")
    service = tree.cgroup("system.slice/hadoop-datanode.service")
    tree.spawn(service)
    refusal = tree.groups(service).refusal()
    assert "systemd unit hadoop-datanode.service" in refusal and "Delegate=yes" in refusal
    tree.kernel.xattrs[(service, "trusted.delegate")] = "1"   # what systemd sets with Delegate=yes
    assert tree.groups(service).refusal() is None


@pytest.mark.parametrize("bad", ["../etc", "vnode.a/b", "vnode.../x", "cgroup.procs", "vnode.", ""])
def test_a_group_name_that_is_no_vnode_never_reaches_a_path(tmp_path, bad):
    tree = Tree("fake", tmp_path)
    groups = tree.groups()
    with pytest.raises(InvalidArgument):
        groups.ensure(bad, 1024)
    with pytest.raises(InvalidArgument):
        groups.place(bad, tree.tids[1])
    assert checked_group("vnode-default") == "vnode-default"


def test_a_jobs_vnode_has_a_group_of_its_own_and_a_malformed_job_none():
    assert checked_group("vnode.alice.77") == "vnode.alice.77"
    with pytest.raises(InvalidArgument):
        checked_group("vnode.alice.7/7")


@pytest.mark.parametrize("bad", [0, -3, True, "12", 1.5])
def test_a_tid_that_is_not_a_positive_whole_number_is_never_written(tmp_path, bad):
    tree = Tree("fake", tmp_path)
    groups = tree.groups()
    groups.ensure("vnode.alice", 1024)
    writes_before = tree.fs.read(f"{groups.parent}/vnode.alice/cgroup.threads")
    with pytest.raises(InvalidArgument):
        groups.place("vnode.alice", bad)
    with pytest.raises(InvalidArgument):
        groups.release(bad)
    assert tree.fs.read(f"{groups.parent}/vnode.alice/cgroup.threads") == writes_before


@pytest.mark.parametrize("name", ["../up", "a/b", ".hidden", "cgroup.threads"])
def test_the_groups_directory_is_one_plain_name(tmp_path, name):
    with pytest.raises(InvalidArgument):
        ThreadedCpuGroups(str(tmp_path), name)
    with pytest.raises(InvalidArgument):
        CpuGroups(str(tmp_path), name)


def test_shares_map_to_cpu_weight_as_the_kernel_maps_them():
    assert [weight_of_shares(s) for s in (1024, 10_240, 5_120, 10, 2, 10**7)] == [100, 1000, 500, 1, 1, 10_000]


def write_tree(root, files: dict[str, str]) -> None:
    for rel, content in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(content)


@pytest.mark.parametrize("layout,kind", [
    ({"cgroup/cpu/cpu.shares": "1024", "cgroup/cgroup.controllers": "cpu io"}, "v1"),   # hybrid: v1 first
    ({"cgroup/cgroup.controllers": "cpuset cpu io memory pids"}, "v2"),                  # pure v2
    ({"cgroup/unified/cgroup.controllers": "cpu"}, "v2"),                                 # v2 beside v1 (no v1 cpu)
    ({"cgroup/cgroup.controllers": "io memory"}, None),                                   # v2 without cpu
])
def test_the_kind_of_groups_follows_what_the_host_mounts(tmp_path, layout, kind):
    write_tree(tmp_path, {**layout, "proc/42/cgroup": "1:cpu:/dn\n0::/dn\n"})
    host = HostCgroups(str(tmp_path / "cgroup"))
    if kind is None:
        assert "no cpu controller mounted" in unavailable(host)
        with pytest.raises(Unsupported):
            cpu_groups_for(host, 42, "vnode-sync.test", str(tmp_path / "proc"))
        return
    assert unavailable(host) is None
    groups = cpu_groups_for(host, 42, "vnode-sync.test", str(tmp_path / "proc"))
    assert isinstance(groups, CpuGroups if kind == "v1" else ThreadedCpuGroups)
    assert groups.home.rstrip("/").endswith("/dn") and groups.parent.endswith("/dn/vnode-sync.test")
