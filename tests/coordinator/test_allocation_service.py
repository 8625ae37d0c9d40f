"""The work-conserving policy over a real gRPC channel: allocations reach the stream without a new
generation, admin changes (reservation, limit) are checked, durable and applied at once."""

import copy
import subprocess
import sys

import grpc
import pytest

from tests.conftest import COORDINATOR_CONFIG, served_coordinator
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc

MB = 1_000_000


@pytest.fixture
def fair_coordinator(tmp_path):
    raw = copy.deepcopy(COORDINATOR_CONFIG)
    raw["policy"] = {"allocation": "work-conserving", "control_seconds": 0.1, "fallback_seconds": 7}
    with served_coordinator(raw, tmp_path) as served:
        yield served


def report(link, t, alice, bob):
    link.ReportUsage(pb.UsageReport(node_id="dn1", sampled_at_unix=t, usage=[
        pb.UserUsage(user="alice", device="/dev/loop7", read_bytes=alice),
        pb.UserUsage(user="bob", device="/dev/loop7", read_bytes=bob)]), timeout=5)


def test_allocations_follow_usage_on_the_stream_without_new_generations(fair_coordinator):
    cluster, channel, _ = fair_coordinator
    link = pb_grpc.AgentLinkStub(channel)
    link.Register(pb.RegisterRequest(node_id="dn1", backend="blkio-v1",
                                     devices=[pb.Device(name="/dev/loop7", major=7, minor=7)]), timeout=5)
    stream = link.WatchDesiredState(pb.WatchRequest(node_id="dn1"), timeout=20)
    generation = cluster.generation()
    state = next(stream)
    while not state.allocation.users:          # the first tick: idle users keep a probe each
        state = next(stream)
    assert state.allocation.fallback_seconds == 7
    # alice reads 1.8 MB/s (all of her probe), bob nothing: alice is lent all but bob's probe.
    report(link, 1000.0, 0, 0)
    report(link, 1001.0, int(1.8 * MB), 0)
    while {u.user: u.shares[0].read_bps for u in state.allocation.users}.get("alice", 0) < 50 * MB:
        state = next(stream)
    given = {u.user: u.shares[0].read_bps for u in state.allocation.users}
    assert given["alice"] == pytest.approx(58.2 * MB, rel=0.01) and given["bob"] == pytest.approx(1.8 * MB)
    assert state.generation == generation, "allocations are not generations"
    assert cluster.generation() == generation
    status = pb_grpc.AdminStub(channel).Status(pb.StatusRequest(), timeout=5)
    assert status.allocation == "work-conserving"
    alice = next(u for u in status.users if u.user.name == "alice").nodes[0]
    assert alice.allocated_read_bps == given["alice"] and alice.demand_read_bps == float("inf")
    assert status.nodes[0].allocation_updates >= 2
    stream.cancel()


def test_a_reservation_is_admitted_only_if_all_fit_and_is_durable(fair_coordinator):
    cluster, channel, _ = fair_coordinator
    admin = pb_grpc.AdminStub(channel)
    user = admin.SetReservation(pb.SetRateRequest(user="alice", bps=20 * MB), timeout=5)
    assert user.reservation_bps == 20 * MB
    generation = cluster.generation()
    with pytest.raises(grpc.RpcError) as e:   # 20 + 15 > the device's 30 MB/s write BW
        admin.SetReservation(pb.SetRateRequest(user="bob", bps=15 * MB), timeout=5)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "capacity" in e.value.details()
    assert cluster.generation() == generation
    assert {u.name: u.reservation_bps for u in cluster.users()} == {"alice": 20 * MB, "bob": 0}
    limit = admin.SetLimit(pb.SetRateRequest(user="bob", bps=5 * MB), timeout=5)
    assert limit.limit_bps == 5 * MB
    with pytest.raises(grpc.RpcError) as e:
        admin.SetLimit(pb.SetRateRequest(user="mallory", bps=5 * MB), timeout=5)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize("args,message", [
    (("set-reservation", "alice", "fast"), "invalid rate 'fast'"),
    (("set-reservation", "alice", "5MB/h"), "invalid rate '5MB/h'"),
    (("set-limit", "alice", "12furlongs"), "invalid rate '12furlongs'"),
    (("set-limit", "../x", "5MB/s"), "invalid user name"),
])
def test_vnodectl_refuses_bad_rates_in_one_line_and_changes_nothing(fair_coordinator, args, message):
    cluster, _, port = fair_coordinator
    generation = cluster.generation()
    result = subprocess.run([sys.executable, "-m", "vnode_sync.ctl.main", "--coordinator", f"127.0.0.1:{port}",
                             *args], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert cluster.generation() == generation


def test_vnodectl_sets_a_reservation_in_mb_per_second(fair_coordinator):
    cluster, _, port = fair_coordinator
    result = subprocess.run([sys.executable, "-m", "vnode_sync.ctl.main", "--coordinator", f"127.0.0.1:{port}",
                             "set-reservation", "alice", "15MB/s"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert "reservation 15.0 MB/s" in result.stdout
    assert cluster.store.user("alice").reservation_bps == 15 * MB


def test_vnodectl_status_shows_weight_reservation_limit_allocation_demand_and_measured(fair_coordinator):
    _, _, port = fair_coordinator
    result = subprocess.run([sys.executable, "-m", "vnode_sync.ctl.main", "--coordinator", f"127.0.0.1:{port}",
                             "status"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    first, header = result.stdout.splitlines()[:2]
    assert "allocation work-conserving" in first
    assert header.split()[:10] == ["USER", "WEIGHT", "ACTIVE", "NODE", "RESERVE_MB/s", "LIMIT_MB/s",
                                   "ALLOC_RD_MB/s", "ALLOC_WR_MB/s", "DEMAND_RD_MB/s", "DEMAND_WR_MB/s"]
    assert "MEASURED_RD_MB/s" in header
