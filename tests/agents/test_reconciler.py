"""The storage agent's reconcile pass on the fake cgroupfs: converge whatever happened before."""

import os
import socket
import threading

import pytest

from tests.fakes.cgroupfs import FakeCgroupFS, FakeKernel
from vnode_sync.agents.handlers.base import HandlerThread, UserDirectory, PollingWait
from vnode_sync.agents.storage.demand_summary import unpacked
from vnode_sync.agents.storage.reconciler import Reconciler, user_directory_of
from vnode_sync.distribution import version
from vnode_sync.datanode.backend import DataNodeThrottleBackend
from vnode_sync.datanode.channel import REQUIRED_HOOKS, ThrottleChannel
from vnode_sync.kernel.backend import DEFAULT_VNODE, VNodeUsage
from vnode_sync.kernel.blkio_v1 import BlkioV1Backend
from vnode_sync.kernel.io_v2 import IoV2Backend
from vnode_sync.kernel.types import DeviceLimits, DeviceNumber
from vnode_sync.wire import vnode_pb2 as pb

DEV = DeviceNumber(7, 3)
DEVICE = "/dev/loop3"


class ListedThreads(PollingWait):
    """Discovery that returns what the test says: tid -> owner uid."""

    name = "listed"
    shared_process = False

    def __init__(self):
        self.owners: dict[int, int] = {}
        self.pids: dict[int, int] = {}    # tid -> pid where a thread is not its own process
        self.helpers: dict[int, str | None] = {}  # tid -> user, of threads that inherit their creator's VNode

    def scan(self, identity: UserDirectory):
        return ([HandlerThread(self.pids.get(tid, tid), tid, identity.user_for_uid(uid))
                 for tid, uid in self.owners.items()]
                + [HandlerThread(tid, tid, user, inherits=True) for tid, user in self.helpers.items()])


def shares(read_bps: int) -> list[pb.ResourceShare]:
    """A read ceiling on the device and on the node as a whole, as the coordinator sends both."""
    return [pb.ResourceShare(device=device, read=pb.Share(ceiling_bps=read_bps)) for device in (DEVICE, "")]


def state(generation, active: dict[str, int], users=None) -> pb.DesiredState:
    users = users or {"alice": 1001, "bob": 1002, "carol": 1003}
    return pb.DesiredState(
        generation=generation, node_id="n1",
        vnodes=[pb.VNodeSpec(user=u, uid=users[u], priority=1, shares=shares(bps)) for u, bps in active.items()],
        default_vnode=pb.VNodeSpec(shares=shares(1_000_000)),
        users=[pb.User(name=n, uid=uid) for n, uid in users.items()])


@pytest.fixture
def world(tmp_path):
    kernel = FakeKernel()
    fs = FakeCgroupFS(str(tmp_path / "blkio"), kernel)
    discovery = ListedThreads()

    def new_reconciler():
        return Reconciler(BlkioV1Backend(fs.hierarchy, "vnode-sync.n1", fs), discovery, {DEVICE: DEV})

    return kernel, fs, discovery, new_reconciler


def test_vnodes_limits_and_placement_follow_the_desired_state(world):
    kernel, fs, discovery, new_reconciler = world
    kernel.spawn(11), kernel.spawn(12), kernel.spawn(13)
    discovery.owners = {11: 1001, 12: 1002, 13: 4242}  # 4242: nobody we know
    r = new_reconciler()
    r.apply(state(5, {"alice": 20_000_000, "bob": 40_000_000}))
    b = r.backend
    assert sorted(b.vnodes()) == [DEFAULT_VNODE, "vnode.alice", "vnode.bob"]
    assert b.limits("vnode.bob") == {DEV: DeviceLimits(DEV, read_bps=40_000_000)}
    assert b.members("vnode.alice") == {11} and b.members("vnode.bob") == {12}
    assert b.members(DEFAULT_VNODE) == {13}
    assert r.applied_generation == 5 and r.errors == []


def test_an_inactive_users_vnode_is_removed_and_its_threads_go_to_the_default(world):
    kernel, fs, discovery, new_reconciler = world
    kernel.spawn(11)
    discovery.owners = {11: 1001}
    r = new_reconciler()
    r.apply(state(5, {"alice": 20_000_000, "bob": 40_000_000}))
    r.apply(state(6, {"bob": 60_000_000}))
    assert sorted(r.backend.vnodes()) == [DEFAULT_VNODE, "vnode.bob"]
    assert r.backend.members(DEFAULT_VNODE) == {11}


def test_drift_made_by_hand_is_repaired(world):
    kernel, fs, discovery, new_reconciler = world
    kernel.spawn(11), kernel.spawn(99)
    discovery.owners = {11: 1001}
    r = new_reconciler()
    s = state(5, {"alice": 20_000_000})
    r.apply(s)
    root = r.backend.root
    fs.write(f"{root}/vnode.alice/blkio.throttle.read_bps_device", f"{DEV} 0")   # limit removed by hand
    fs.write(f"{root}/tasks", "11")                                             # handler moved out
    fs.write(f"{root}/vnode.alice/tasks", "99")                                 # a stranger moved in
    fs.mkdir(f"{root}/unrelated-dir")                                           # not ours: left alone
    fs.mkdir(f"{root}/vnode.mallory")                                           # stale VNode
    r.placed.clear()  # as after a restart: nothing remembered
    r.apply(s)
    assert r.backend.limits("vnode.alice") == {DEV: DeviceLimits(DEV, read_bps=20_000_000)}
    assert r.backend.members("vnode.alice") == {11}
    assert "vnode.mallory" not in r.backend.vnodes()
    assert os.path.isdir(f"{root}/unrelated-dir")


def test_a_restarted_agent_converges_to_the_same_cgroups_without_duplicates(world):
    kernel, fs, discovery, new_reconciler = world
    kernel.spawn(11), kernel.spawn(12)
    discovery.owners = {11: 1001, 12: 1002}
    s = state(7, {"alice": 20_000_000, "bob": 40_000_000})
    first = new_reconciler()
    first.apply(s)
    snapshot = {v: (first.backend.limits(v), first.backend.members(v)) for v in first.backend.vnodes()}
    second = new_reconciler()  # a new process: no memory of the first
    second.apply(s)
    assert {v: (second.backend.limits(v), second.backend.members(v)) for v in second.backend.vnodes()} == snapshot
    assert sorted(os.listdir(second.backend.root)).count("vnode.alice") == 1


def test_a_missing_device_is_reported_not_fatal(world):
    kernel, fs, discovery, new_reconciler = world
    r = new_reconciler()
    s = state(3, {"alice": 1})
    s.vnodes[0].shares.add(device="/dev/does-not-exist", read=pb.Share(ceiling_bps=5))
    r.apply(s)
    assert any("/dev/does-not-exist" in e for e in r.errors)
    assert r.backend.limits("vnode.alice") == {DEV: DeviceLimits(DEV, read_bps=1)}


def test_usage_is_reported_per_user_and_device_in_the_demand_summary(world, monkeypatch):
    kernel, fs, discovery, new_reconciler = world
    clock = [100.0]
    monkeypatch.setattr("vnode_sync.agents.storage.reconciler.time.monotonic", lambda: clock[0])
    r = new_reconciler()
    r.apply(state(3, {"alice": 1_000_000}))
    fs.account_io(f"{r.backend.root}/vnode.alice", DEV, read_bytes=0)
    r.usage_report("n1")                                   # the first sample: no rates yet
    fs.account_io(f"{r.backend.root}/vnode.alice", DEV, read_bytes=4_000_000)
    clock[0] = 102.0
    report = r.usage_report("n1")
    assert unpacked(report.demand)[("alice", DEVICE)].read_bps == pytest.approx(2_000_000)
    assert report.applied_generation == 3


def test_between_reports_only_a_sharp_move_in_demand_makes_a_report(world, monkeypatch):
    kernel, fs, discovery, new_reconciler = world
    clock = [100.0]
    monkeypatch.setattr("vnode_sync.agents.storage.reconciler.time.monotonic", lambda: clock[0])
    r = new_reconciler()
    r.apply(state(3, {"alice": 0, "bob": 0}))
    alice = f"{r.backend.root}/vnode.alice"
    fs.account_io(alice, DEV, read_bytes=0)
    r.usage_report("n1")                                   # the first sample: no rates yet
    for second, moved in ((101.0, 10_000_000), (102.0, 20_000_000), (103.0, 30_000_000)):
        fs.account_io(alice, DEV, read_bytes=moved)        # the kernel's counter: alice reads 10 MB/s
        clock[0] = second
        if second == 101.0:
            assert r.usage_report("n1").demand.read_demand_bps == [10_000_000.0]
        else:
            assert r.usage_report("n1", only_if_sharp=True) is None    # steady: left to the next report
    clock[0] = 104.0                                       # alice stopped
    stopped = r.usage_report("n1", only_if_sharp=True)
    assert list(stopped.demand.users) == ["alice"] and stopped.demand.read_demand_bps == [0.0]


def test_a_backend_that_sees_a_user_at_its_limit_says_so_in_the_usage_report(world, monkeypatch):
    kernel, fs, discovery, new_reconciler = world
    clock = [100.0]
    monkeypatch.setattr("vnode_sync.agents.storage.reconciler.time.monotonic", lambda: clock[0])
    r = new_reconciler()
    r.apply(state(3, {"alice": 1_000_000, "bob": 2_000_000}))
    measured = r.backend.usage
    r.backend.usage = lambda: {v: VNodeUsage(u.devices, held_at_limit=v == "vnode.alice")
                               for v, u in measured().items()}
    for second, moved in ((100.0, 0), (101.0, 1_000_000)):
        clock[0] = second
        for user in ("alice", "bob"):
            fs.account_io(f"{r.backend.root}/vnode.{user}", DEV, read_bytes=moved)
        entries = unpacked(r.usage_report("n1").demand)
    assert entries[("alice", DEVICE)].read_held is True and entries[("bob", DEVICE)].read_held is False


def test_a_helper_keeps_the_vnode_it_was_born_in_through_resyncs_until_its_user_is_known(world):
    kernel, fs, discovery, new_reconciler = world
    kernel.spawn(11, 12, 13)
    discovery.owners = {11: 1001}
    r = new_reconciler()
    s = state(5, {"alice": 20_000_000, "bob": 40_000_000})
    r.apply(s)
    fs.write(f"{r.backend.root}/vnode.bob/tasks", "12")  # born in its creator's VNode, as v1 does
    discovery.helpers = {12: None, 13: None}             # 13 was born outside every VNode
    r.place_handlers()
    r.apply(s)                                           # a resync releases strays; these are not strays
    assert r.backend.members("vnode.bob") == {12}
    assert r.backend.members(DEFAULT_VNODE) == {13}      # unidentified: throttled, never free
    discovery.helpers = {12: None, 13: "alice"}
    r.place_handlers()
    assert r.backend.members("vnode.alice") == {11, 13}


def test_on_cgroup_v2_a_process_serving_two_users_is_never_moved_and_one_serving_one_is(tmp_path):
    kernel = FakeKernel()
    kernel.spawn(100, 101, 102)          # a server: threads 101 (alice) and 102 (bob)
    kernel.spawn(200)                    # alice's own process
    fs = FakeCgroupFS(str(tmp_path / "unified"), kernel, version=2)
    discovery = ListedThreads()
    r = Reconciler(IoV2Backend(fs.hierarchy, "vnode-sync.n1", fs), discovery, {DEVICE: DEV})
    discovery.owners, discovery.pids = {101: 1001, 200: 1001}, {101: 100}
    r.apply(state(1, {"alice": 1_000_000, "bob": 2_000_000}))
    assert r.backend.members("vnode.alice") == {100, 200}      # so far it serves alice only
    discovery.owners[102], discovery.pids[102] = 1002, 100
    r.place_handlers()
    assert r.backend.members("vnode.alice") == {200} and r.backend.members("vnode.bob") == set()
    assert 100 not in r.backend.members(DEFAULT_VNODE)
    assert any("process 100 serves several users" in e and "not moved" in e for e in r.errors)


def test_an_unreachable_datanode_socket_is_an_error_in_the_status_and_the_next_pass_sends_the_rates(tmp_path):
    """datanode-throttle: no cgroup anywhere; a socket that is not there yet is reported (and the node
    as not enforcing), and the next (resync) pass shakes hands and delivers the whole set once it is."""
    path = str(tmp_path / "control.sock")
    backend = DataNodeThrottleBackend(ThrottleChannel(path, timeout=2), [DEV])
    reconciler = Reconciler(backend, ListedThreads(), {DEVICE: DEV})
    reconciler.apply(state(1, {"alice": 5_000_000}))
    assert any("throttle socket" in e for e in reconciler.errors), reconciler.errors
    assert "throttle socket" in reconciler.not_enforcing
    assert os.listdir(tmp_path) == []

    received = []
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(2)
    hooks = " ".join(f"hook.{h}=woven" for h in REQUIRED_HOOKS)

    def datanode():
        for _ in range(2):   # the handshake, then the APPLY
            conn, _ = server.accept()
            data = b""
            while not data.endswith(b"END\n") and not data.startswith(b"HELLO"):
                data += conn.recv(4096)
            if data.startswith(b"HELLO"):
                conn.sendall(f"OK protocol=2 agent=vnode-sync-datanode-throttle version=0.2.0 hadoop=3.4.2 "
                             f"started_ms=1 {hooks}\n".encode())
            else:
                received.extend(data.decode().splitlines())
                conn.sendall(f"{received[0].replace('APPLY', 'OK')}\n".encode())
            conn.close()
    t = threading.Thread(target=datanode, daemon=True)
    t.start()
    reconciler.apply(reconciler.state)
    t.join(5)
    server.close()
    assert reconciler.errors == [] and reconciler.not_enforcing is None
    assert "USER name=alice read_weight=0 read_floor_bps=0 read_ceiling_bps=5000000 write_weight=0 " \
           "write_floor_bps=0 write_ceiling_bps=0" in received, received
    assert "UID uid=1001 name=alice" in received
    # The stand-in is release 0.2.0: it enforces, and the node is reported degraded naming both versions.
    assert reconciler.degraded == [f"DataNode throttle: the Java agent is version 0.2.0, this storage agent "
                                   f"{version()}: install the jar of release {version()} and restart the DataNode"]


def test_a_datanode_reports_its_users_bytes_for_the_node_as_a_whole_not_on_a_disk():
    """The DataNode's throttler does not know a transfer's disk: its counters go to the center as the
    node's (device ""), the resource its share is of."""
    from tests.datanode.test_backend import RecordingChannel
    from vnode_sync.datanode.channel import Counters
    backend = DataNodeThrottleBackend(RecordingChannel(), [DEV])
    clock = [100.0]
    backend.clock = lambda: clock[0]
    reconciler = Reconciler(backend, ListedThreads(), {DEVICE: DEV})
    reconciler.apply(state(1, {"alice": 5_000_000}))
    backend.channel.counters = {"alice": Counters(read_bytes=0)}
    reconciler.usage_report("n1")
    clock[0] += 1.0
    backend.channel.counters = {"alice": Counters(read_bytes=4_000_000)}
    entries = unpacked(reconciler.usage_report("n1").demand)
    assert {device for _, device in entries} == {""}
    assert entries[("alice", "")].read_bps > 0


def test_a_connection_the_coordinator_charged_to_a_job_goes_to_the_jobs_vnode_else_to_its_user():
    state = pb.DesiredState(vnodes=[pb.VNodeSpec(user="alice", uid=2001), pb.VNodeSpec(user="alice.77", uid=2001,
                                                                                        job="77", job_user="alice")],
                            users=[pb.User(name="alice", uid=2001)],
                            connections=[pb.ConnectionOwner(client_address="10.0.0.5", client_port=1, user="alice",
                                                            job="77", vnode="alice.77"),
                                         pb.ConnectionOwner(client_address="10.0.0.5", client_port=2, user="alice",
                                                            job="99")])
    users = user_directory_of(state)
    assert users.connections == {("10.0.0.5", 1): "alice.77", ("10.0.0.5", 2): "alice"}
    assert users.users_by_uid == {2001: "alice"}
    assert users.active_users == {"alice", "alice.77"}


def test_a_required_disk_setting_missing_is_reported_degraded_after_the_backends_own_lines(world):
    kernel, fs, discovery, new_reconciler = world
    r = new_reconciler()
    r.disk_checks = lambda: ["disk queue: /dev/sdb queue/nr_requests is 64, required 4 (docs/edge.md section 6)"]
    r.apply(state(1, {"alice": 5_000_000}))
    assert r.degraded == ["disk queue: /dev/sdb queue/nr_requests is 64, required 4 (docs/edge.md section 6)"]
    assert r.not_enforcing is None, "a node short of a required setting still enforces"
    r.disk_checks = list
    r.apply(state(2, {"alice": 5_000_000}))
    assert r.degraded == []
