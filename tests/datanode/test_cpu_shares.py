"""CPU by weight for the DataNode's transfer threads: the Java agent's op threads land in their user's
cgroup v1 cpu group with shares by weight (a faithful fake cgroupfs and /proc; one test on the real
kernel where it has a v1 cpu controller)."""

import os
import socket
import threading
import time

import pytest

from testbed.names import unique_name
from tests.fakes.cgroupfs import FakeCgroupFS, FakeKernel
from vnode_sync.datanode.backend import DataNodeThrottleBackend
from vnode_sync.datanode.cpu_shares import LARGEST_SHARES, CpuShares, OpThread, parse_line
from vnode_sync.errors import InvalidArgument, KernelError
from vnode_sync.kernel.backend import HostCgroups
from vnode_sync.kernel.cpu_v1 import NICE_0_SHARES
from vnode_sync.kernel.types import DeviceLimits, DeviceNumber, Share, Shares

PID = os.getpid()   # SO_PEERCRED of the stand-in Java agent below, which runs in this process
TIDS = (PID + 1, PID + 2, PID + 3)
DEV = DeviceNumber(7, 0)


class Node:
    """A fake host: its cpu hierarchy, the DataNode (PID, threads TIDS) in cgroup /dn, and /proc."""

    def __init__(self, tmp_path, *, cpu: bool = True):
        self.mount = str(tmp_path / "cgroup" / "cpu")
        self.proc = tmp_path / "proc"
        self.kernel = FakeKernel()
        self.kernel.spawn(PID, *TIDS)
        for tid in (PID, *TIDS):
            (self.proc / str(PID) / "task" / str(tid)).mkdir(parents=True)
        (self.proc / str(PID) / "cgroup").write_text("2:cpuacct:/\n1:cpu:/dn\n0::/\n")
        self.fs = FakeCgroupFS(self.mount, self.kernel) if cpu else None
        if cpu:
            self.fs.mkdir(os.path.join(self.mount, "dn"))
            for tid in (PID, *TIDS):
                self.fs.write(os.path.join(self.mount, "dn", "tasks"), str(tid))
        self.home = os.path.join(self.mount, "dn")
        self.parent = os.path.join(self.home, "vnode-sync.dn1")

    def shares(self, path_in_parent: str = "") -> int:
        return int(open(os.path.join(self.parent, path_in_parent, "cpu.shares")).read())

    def members(self, path: str) -> set[int]:
        return {int(t) for t in open(os.path.join(path, "tasks")).read().split()}

    def cpu_shares(self, socket_path: str = "/nonexistent") -> CpuShares:
        return CpuShares(socket_path, "vnode-sync.dn1", HostCgroups(str(self.mount[:-len("/cpu")])), str(self.proc),
                         self.fs)


@pytest.fixture
def node(tmp_path):
    return Node(tmp_path)


def attached(node: Node) -> CpuShares:
    cpu = node.cpu_shares()
    cpu.attach(PID)
    return cpu


def test_lines_are_parsed_and_a_user_the_validator_refuses_never_names_a_directory():
    assert parse_line("THREAD tid=12 user=alice") == OpThread(12, "alice")
    assert parse_line("THREAD tid=12") == OpThread(12, None)   # DEFAULT
    assert parse_line("IDLE tid=12") == OpThread(12, idle=True)
    assert parse_line("TICK") is None and parse_line("NEWKIND x=1") is None
    for bad in ("THREAD tid=12 user=../../etc", "THREAD tid=12 user=a/b", "THREAD user=alice", "IDLE tid=-3",
                "THREAD tid=0 user=alice"):
        with pytest.raises(InvalidArgument):
            parse_line(bad)


def test_each_op_thread_lands_in_its_users_group_with_shares_by_weight(node):
    cpu = attached(node)
    cpu.set_weights({None: 1.0, "alice": 8.0, "bob": 4.0})
    cpu.take(OpThread(TIDS[0], "alice"))
    cpu.take(OpThread(TIDS[1], "bob"))
    cpu.take(OpThread(TIDS[2], None))
    assert node.members(os.path.join(node.parent, "vnode.alice")) == {TIDS[0]}
    assert node.members(os.path.join(node.parent, "vnode.bob")) == {TIDS[1]}
    assert node.members(os.path.join(node.parent, "vnode-default")) == {TIDS[2]}
    assert (node.shares("vnode.alice"), node.shares("vnode.bob"), node.shares("vnode-default")) == \
        (LARGEST_SHARES, LARGEST_SHARES // 2, LARGEST_SHARES // 8)
    # The DataNode's threads weigh together what they weighed without groups: a nice-0 thread per op.
    assert node.shares() == 3 * NICE_0_SHARES
    assert node.members(node.home) == {PID}


def test_an_op_that_ends_leaves_its_thread_until_the_next_op_and_stops_counting(node):
    cpu = attached(node)
    cpu.set_weights({"alice": 8.0, "bob": 4.0})
    cpu.take(OpThread(TIDS[0], "alice"))
    cpu.take(OpThread(TIDS[1], "alice"))
    assert node.shares() == 2 * NICE_0_SHARES
    cpu.take(OpThread(TIDS[0], idle=True))
    assert node.shares() == NICE_0_SHARES
    assert TIDS[0] in node.members(os.path.join(node.parent, "vnode.alice"))
    cpu.take(OpThread(TIDS[0], "bob"))   # the same connection's next op is another user's
    assert node.members(os.path.join(node.parent, "vnode.bob")) == {TIDS[0]}
    assert node.members(os.path.join(node.parent, "vnode.alice")) == {TIDS[1]}


def test_a_user_without_weight_stays_home_and_new_weights_reweigh_and_remove_groups(node):
    cpu = attached(node)
    cpu.set_weights({None: 0.0, "alice": 8.0, "bob": 4.0})
    cpu.take(OpThread(TIDS[0], None))
    cpu.take(OpThread(TIDS[1], "bob"))
    assert TIDS[0] in node.members(node.home)
    cpu.set_weights({None: 0.0, "alice": 2.0, "bob": 4.0})
    assert node.shares("vnode.bob") == LARGEST_SHARES
    cpu.set_weights({None: 0.0, "alice": 2.0})   # bob left the node: his thread goes home, his group away
    assert TIDS[1] in node.members(node.home)
    assert not os.path.exists(os.path.join(node.parent, "vnode.bob"))


def test_a_tid_that_is_no_thread_of_the_datanode_is_never_moved(node):
    cpu = attached(node)
    cpu.set_weights({"alice": 8.0})
    node.kernel.spawn(1, 4242)   # a thread of another process, which a DataNode could name
    cpu.take(OpThread(4242, "alice"))
    group = os.path.join(node.parent, "vnode.alice")
    assert not os.path.exists(group) or 4242 not in node.members(group)


def test_teardown_sends_every_thread_home_and_removes_every_group(node):
    cpu = attached(node)
    cpu.set_weights({"alice": 8.0, "bob": 1.0})
    cpu.take(OpThread(TIDS[0], "alice"))
    cpu.take(OpThread(TIDS[1], "bob"))
    cpu.teardown()
    assert not os.path.exists(node.parent)
    assert node.members(node.home) == {PID, *TIDS}


def test_a_restarted_agent_removes_what_an_earlier_one_left(node):
    first = attached(node)
    first.set_weights({"alice": 8.0})
    first.take(OpThread(TIDS[0], "alice"))
    attached(node)
    assert node.members(node.home) == {PID, *TIDS}
    assert not [d for d in os.listdir(node.parent) if os.path.isdir(os.path.join(node.parent, d))]


def test_without_a_cpu_controller_it_says_so_and_the_backend_carries_on(tmp_path):
    node = Node(tmp_path, cpu=False)
    cpu = node.cpu_shares()
    assert "no cpu controller mounted" in cpu.limitation()
    backend = DataNodeThrottleBackend(channel=None, cpu=cpu)
    assert any("CPU shares" in note for note in backend.limitations())
    stop = threading.Event()
    runner = threading.Thread(target=cpu.run, args=(stop,))
    runner.start()
    stop.set()
    runner.join(5)
    assert not runner.is_alive()


class StandInAgent:
    """The Java agent's side of WATCH threads, on a real Unix socket: the given lines, then silence."""

    def __init__(self, path: str, lines: list[str]):
        self.path, self.lines = path, lines
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(path)
        self.server.listen(1)
        self.asked = b""
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        conn, _ = self.server.accept()
        with conn:
            self.asked = conn.recv(100)
            try:
                conn.sendall("".join(line + "\n" for line in ["OK watching threads", *self.lines]).encode())
            except BrokenPipeError:
                return   # the watcher hung up without asking (it refused the DataNode's cgroup)
            time.sleep(0.5)

    def close(self):
        self.server.close()


def test_the_watch_places_the_threads_the_java_agent_names_over_its_socket(node, tmp_path):
    path = str(tmp_path / "dn.sock")
    agent = StandInAgent(path, [f"THREAD tid={TIDS[0]} user=alice", "TICK", f"THREAD tid={TIDS[1]} user=../x",
                                f"THREAD tid={TIDS[2]}", f"IDLE tid={TIDS[2]}"])
    cpu = node.cpu_shares(path)
    cpu.set_weights({None: 1.0, "alice": 4.0})
    try:
        cpu.follow(threading.Event())   # returns when the stand-in hangs up
    finally:
        agent.close()
    assert agent.asked == b"WATCH threads\n"
    assert node.members(os.path.join(node.parent, "vnode.alice")) == {TIDS[0]}
    assert node.members(os.path.join(node.parent, "vnode-default")) == {TIDS[2]}
    assert TIDS[1] in node.members(node.home)   # its line named no valid user: skipped
    assert node.shares() == NICE_0_SHARES


def test_the_backend_gives_each_user_the_weight_it_sends_the_java_agent(node):
    cpu = attached(node)

    class Channel:
        def apply(self, settings):
            self.settings = settings

    backend = DataNodeThrottleBackend(Channel(), [DEV], cpu=cpu)
    backend.ensure_vnode("vnode.alice")
    backend.apply_limits("vnode.alice", [DeviceLimits(DEV)], Shares(Share(8.0), Share(2.0)))
    backend.ensure_vnode("vnode.bob")
    backend.apply_limits("vnode.bob", [DeviceLimits(DEV)], Shares(Share(1.0), Share(4.0)))
    backend.commit({}, {})
    cpu.take(OpThread(TIDS[0], "alice"))
    cpu.take(OpThread(TIDS[1], "bob"))
    assert node.shares("vnode.alice") == LARGEST_SHARES and node.shares("vnode.bob") == LARGEST_SHARES // 2
    backend.teardown()
    assert not os.path.exists(node.parent)


REAL_CPU = "/sys/fs/cgroup/cpu"


@pytest.mark.skipif(not os.path.exists(os.path.join(REAL_CPU, "cpu.shares")),
                    reason=f"no cgroup v1 cpu controller at {REAL_CPU} (cgroup v2: tests/kernel/test_cpu_v2.py in the qemu guest)")
@pytest.mark.skipif(os.geteuid() != 0, reason="moving threads between cgroups needs root")
def test_on_the_real_kernel_a_thread_lands_in_its_users_group_with_its_shares(tmp_path):
    release = threading.Event()
    worker = threading.Thread(target=release.wait, daemon=True)
    worker.start()
    tid = worker.native_id
    path = str(tmp_path / "dn.sock")
    agent = StandInAgent(path, [f"THREAD tid={tid} user=alice"])
    cpu = CpuShares(path, unique_name("cpu-shares"))
    cpu.set_weights({None: 1.0, "alice": 4.0})
    try:
        cpu.follow(threading.Event())
        group = os.path.join(cpu.groups.parent, "vnode.alice")
        assert cpu_cgroup(tid) == group
        assert int(open(os.path.join(group, "cpu.shares")).read()) == LARGEST_SHARES
        assert int(open(os.path.join(cpu.groups.parent, "cpu.shares")).read()) == NICE_0_SHARES
    finally:
        cpu.teardown()
        agent.close()
    try:
        assert not os.path.exists(cpu.groups.parent)
        assert cpu_cgroup(tid) == cpu.groups.home.rstrip("/")
    finally:
        release.set()


def cpu_cgroup(tid: int) -> str:
    """Where the kernel says thread TID of this process is, in the v1 cpu hierarchy."""
    with open(f"/proc/self/task/{tid}/cgroup") as f:
        for line in f.read().splitlines():
            _, controllers, where = line.split(":", 2)
            if "cpu" in controllers.split(","):
                return os.path.join(REAL_CPU, where.lstrip("/")).rstrip("/")
    raise AssertionError(f"thread {tid} is in no v1 cpu cgroup")


def test_a_cgroup_the_kernel_refuses_is_logged_and_never_fails_the_reconcile_pass(node, caplog):
    cpu = attached(node)
    cpu.set_weights({"alice": 8.0})
    cpu.take(OpThread(TIDS[0], "alice"))

    def refuse(group, shares):
        raise KernelError(os.path.join(node.parent, group), "kernel refused: Permission denied")

    cpu.groups.ensure = refuse
    cpu.set_weights({"alice": 4.0, "bob": 8.0})   # re-weighs alice's group: refused
    assert "could not apply new weights" in caplog.text


class V2Node:
    """A fake cgroup-v2 host (cpu offered at its root, no v1 cpu): the DataNode (PID, threads TIDS) in /dn."""

    def __init__(self, tmp_path):
        self.root = str(tmp_path / "cgroup")
        self.proc = tmp_path / "proc"
        self.kernel = FakeKernel()
        self.kernel.spawn(PID, *TIDS)
        for tid in (PID, *TIDS):
            (self.proc / str(PID) / "task" / str(tid)).mkdir(parents=True)
        (self.proc / str(PID) / "cgroup").write_text("0::/dn\n")
        self.fs = FakeCgroupFS(self.root, self.kernel, version=2)
        self.fs.write(os.path.join(self.root, "cgroup.subtree_control"), "+cpu")
        self.home = os.path.join(self.root, "dn")
        self.fs.mkdir(self.home)
        self.fs.write(os.path.join(self.home, "cgroup.procs"), str(PID))
        self.parent = os.path.join(self.home, "vnode-sync.dn1")

    def cpu_shares(self, socket_path: str = "/nonexistent") -> CpuShares:
        return CpuShares(socket_path, "vnode-sync.dn1", HostCgroups(self.root), str(self.proc), self.fs)

    def read(self, path: str) -> str:
        return self.fs.read(path).strip()


def test_on_a_cgroup_v2_host_op_threads_land_in_threaded_groups_weighed_by_their_users(tmp_path):
    node = V2Node(tmp_path)
    cpu = node.cpu_shares()
    assert cpu.limitation() is None
    cpu.attach(PID)
    cpu.set_weights({"alice": 8.0, "bob": 4.0})
    cpu.take(OpThread(TIDS[0], "alice"))
    cpu.take(OpThread(TIDS[1], "bob"))
    assert node.read(f"{node.parent}/vnode.alice/cgroup.threads") == str(TIDS[0])
    assert node.read(f"{node.parent}/vnode.bob/cgroup.threads") == str(TIDS[1])
    assert (node.read(f"{node.parent}/vnode.alice/cpu.weight"), node.read(f"{node.parent}/vnode.bob/cpu.weight")) == \
        ("1000", "500")
    assert node.read(f"{node.parent}/cpu.weight") == "200"   # two ops in progress: two nice-0 threads
    assert node.read(f"{node.home}/cgroup.type") == "domain threaded"
    cpu.teardown()
    assert not os.path.exists(node.parent)
    assert node.read(f"{node.home}/cgroup.type") == "domain"
    assert set(node.read(f"{node.home}/cgroup.threads").split()) == {str(t) for t in (PID, *TIDS)}


def test_a_datanode_cgroup_that_cannot_hold_the_subtree_is_one_limitation_line_and_never_a_crash(tmp_path, caplog):
    node = V2Node(tmp_path)
    node.kernel.spawn(9000)
    node.fs.mkdir(f"{node.home}/sidecar")
    node.fs.write(f"{node.home}/sidecar/cgroup.procs", "9000")   # a process in a non-threaded child
    path = str(tmp_path / "dn.sock")
    agent = StandInAgent(path, [f"THREAD tid={TIDS[0]} user=alice"])
    cpu = node.cpu_shares(path)
    backend = DataNodeThrottleBackend(channel=None, cpu=cpu)
    stop = threading.Event()
    runner = threading.Thread(target=cpu.run, args=(stop,))
    runner.start()
    try:
        for _ in range(500):
            if cpu.refused and cpu._reported:
                break
            time.sleep(0.02)
    finally:
        stop.set()
        runner.join(5)
        agent.close()
    assert not runner.is_alive()
    notes = [n for n in backend.limitations() if "CPU shares" in n]
    assert len(notes) == 1 and "\n" not in notes[0]
    assert "cannot hold a threaded cpu subtree" in notes[0] and "(sidecar)" in notes[0] and "move them out" in notes[0]
    assert notes == backend.degraded()
    assert "cannot hold a threaded cpu subtree" in caplog.text
    assert not os.path.exists(node.parent)   # nothing was written under the DataNode's cgroup
    assert node.read(f"{node.home}/cgroup.type") == "domain"
