"""The work-conserving policy over a real gRPC channel: allocations reach the stream without a new
generation, admin changes (reservation, limit) are checked, durable and applied at once."""

import copy
import json
import subprocess
import sys
import time

import grpc
import pytest

from tests.conftest import COORDINATOR_CONFIG, served_coordinator
from tests.fakes.reports import usage_report
from vnode_sync.agents.storage.allocation import allocated_ceilings
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc

MB = 1_000_000


@pytest.fixture
def fair_coordinator(tmp_path):
    raw = copy.deepcopy(COORDINATOR_CONFIG)
    raw["policy"] = {"sharing": "work-conserving", "control_seconds": 0.1, "fallback_seconds": 7}
    with served_coordinator(raw, tmp_path) as served:
        yield served


def report(link, t, alice, bob, held=()):
    """dn1 reports alice and bob reading at these bytes/s; `held`: the users the agent saw held at their caps."""
    link.StreamUsage(iter([usage_report("dn1", t, {("alice", "/dev/loop7"): (alice, 0.0),
                                                   ("bob", "/dev/loop7"): (bob, 0.0)}, held=held)]), timeout=5)


def test_allocations_follow_usage_on_the_stream_without_new_generations(fair_coordinator):
    cluster, channel, _ = fair_coordinator
    link = pb_grpc.AgentLinkStub(channel)
    link.Register(pb.RegisterRequest(node_id="dn1", backend="blkio-v1",
                                     devices=[pb.Device(name="/dev/loop7", major=7, minor=7)]), timeout=5)
    stream = link.WatchDesiredState(pb.WatchRequest(node_id="dn1"), timeout=20)
    generation = cluster.generation()
    state = next(stream)
    while not state.allocation.shares.users:          # the first tick: idle users may each take the room left
        state = next(stream)
    assert state.allocation.fallback_seconds == 7
    assert allocations(state) == {"alice": 60 * MB, "bob": 60 * MB}
    written = cluster.store.rows_written
    # alice reads held at her cap, bob nothing: alice is lent the node, bob keeps his probe.
    report(link, 1000.0, 0, 0)
    report(link, 1001.0, int(30 * MB), 0, held={"alice"})
    while allocations(state).get("bob", 0) > 50 * MB:
        state = next(stream)
    given = allocations(state)
    assert given["alice"] == 60 * MB and given["bob"] == pytest.approx(1.8 * MB)
    assert state.generation == generation, "allocations are not generations"
    assert cluster.generation() == generation
    assert cluster.store.rows_written == written, "allocations are not written to the store"
    status = pb_grpc.AdminStub(channel).Status(pb.StatusRequest(), timeout=5)
    assert status.sharing == "work-conserving"
    alice = next(u for u in status.users if u.user.name == "alice").nodes[0]
    assert alice.allocated_read_bps == given["alice"] and alice.demand_read_bps >= 30 * MB
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


def test_a_jobs_reservation_that_does_not_fit_is_dropped_not_the_job(fair_coordinator):
    """A job is never refused for its floor (a batch job must not fail for vnode-sync): it starts,
    its user is active, and the floor that would overbook a device is not in force."""
    cluster, channel, _ = fair_coordinator
    admin = pb_grpc.AdminStub(channel)
    admin.SetReservation(pb.SetRateRequest(user="alice", bps=20 * MB), timeout=5)
    reply = admin.StartJob(pb.JobRequest(job_id="9", user="bob", uid=1002, node="cn1", reservation_bps=15 * MB,
                                         limit_bps=40 * MB), timeout=5)
    assert reply.user.active and reply.user.running_jobs == 1
    assert (reply.user.reservation_bps, reply.user.limit_bps) == (0, 40 * MB)
    fits = admin.StartJob(pb.JobRequest(job_id="10", user="bob", uid=1002, node="cn1", reservation_bps=5 * MB),
                          timeout=5)
    assert fits.user.reservation_bps == 5 * MB


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


@pytest.mark.parametrize("command", ["set-limit", "set-reservation"])
def test_vnodectl_set_limit_and_reservation_are_refused_in_one_line_where_the_static_policy_ignores_them(
        coordinator, command):
    cluster, _, port = coordinator
    assert cluster.config.policy.sharing == "static"
    generation, before = cluster.generation(), cluster.store.user("alice")
    ctl = [sys.executable, "-m", "vnode_sync.ctl.main", "--coordinator", f"127.0.0.1:{port}", command, "alice"]
    refused = subprocess.run([*ctl, "5MB/s"], capture_output=True, text=True, timeout=30)
    assert refused.returncode == 1 and refused.stdout == ""
    (line,) = refused.stderr.strip().splitlines()
    assert "applies only with policy.sharing work-conserving" in line and "is static" in line
    assert cluster.generation() == generation and cluster.store.user("alice") == before
    # Clearing one stays allowed: a site back from work-conserving removes what it no longer enforces.
    cleared = subprocess.run([*ctl, "none"], capture_output=True, text=True, timeout=30)
    assert cleared.returncode == 0, cleared.stderr


def test_vnodectl_sets_a_reservation_in_mb_per_second(fair_coordinator):
    cluster, _, port = fair_coordinator
    result = subprocess.run([sys.executable, "-m", "vnode_sync.ctl.main", "--coordinator", f"127.0.0.1:{port}",
                             "set-reservation", "alice", "15MB/s"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert "reservation 15.0 MB/s" in result.stdout
    assert cluster.store.user("alice").reservation_bps == 15 * MB


def test_vnodectl_status_shows_weight_reservation_limit_allocation_demand_and_measured(fair_coordinator):
    """Every column the issue names, with the values the coordinator holds, in the table and in --json."""
    cluster, channel, port = fair_coordinator
    admin, link = pb_grpc.AdminStub(channel), pb_grpc.AgentLinkStub(channel)
    admin.SetReservation(pb.SetRateRequest(user="alice", bps=5 * MB), timeout=5)
    admin.SetLimit(pb.SetRateRequest(user="bob", bps=50 * MB), timeout=5)
    link.Register(pb.RegisterRequest(node_id="dn1", backend="blkio-v1",
                                     devices=[pb.Device(name="/dev/loop7", major=7, minor=7)]), timeout=5)

    def run(*args):
        result = subprocess.run([sys.executable, "-m", "vnode_sync.ctl.main", "--coordinator", f"127.0.0.1:{port}",
                                 "status", *args], capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, result.stderr
        return result.stdout

    def given(user: str) -> int:
        status = admin.Status(pb.StatusRequest(), timeout=5)
        return next(u for u in status.users if u.user.name == user).nodes[0].allocated_read_bps

    # alice reads 2 MB/s (less than she is given), bob all he is given (held at his cap); reported every 0.25 s or so.
    deadline = time.monotonic() + 20
    while True:
        report(link, time.time(), 2 * MB, max(1, given("bob")), held={"bob"})
        doc = json.loads(run("--json"))
        nodes = {u["name"]: u["nodes"][0] for u in doc["users"]}
        # bob's last report under his final allocation: he reads all of it
        if nodes["bob"].get("allocated_read_bps") == 50 * MB and nodes["bob"].get("measured_read_bps", 0) > 10 * MB \
                and nodes["alice"].get("demand_read_bps") == pytest.approx(2 * MB, rel=0.1):
            break
        assert time.monotonic() < deadline, nodes
        time.sleep(0.25)
    users = {u["name"]: u for u in doc["users"]}
    assert (users["alice"]["priority"], users["alice"]["reservation_bps"], users["alice"]["limit_bps"]) == (4, 5 * MB, 0)
    assert (users["bob"]["priority"], users["bob"]["reservation_bps"], users["bob"]["limit_bps"]) == (8, 0, 50 * MB)
    alice, bob = nodes["alice"], nodes["bob"]
    assert alice["measured_read_bps"] == pytest.approx(2 * MB, rel=0.15)
    assert bob["measured_read_bps"] > 10 * MB
    assert bob["demand_read_bps"] >= 50 * MB                    # held at his cap: at least what he moved
    # Her demand and the room the node has left (her floor counts only where she has demand)
    assert alice["allocated_read_bps"] == pytest.approx(10 * MB, rel=0.1)
    assert bob["allocated_read_bps"] == 50 * MB                 # his ceiling, though 8 are free

    lines = run().splitlines()
    print("\n".join(lines))
    assert "sharing work-conserving" in lines[0]
    header = lines[1].split()
    assert header[:10] == ["USER", "WEIGHT", "ACTIVE", "NODE", "RESERVE_MB/s", "LIMIT_MB/s",
                           "ALLOC_RD_MB/s", "ALLOC_WR_MB/s", "DEMAND_RD_MB/s", "DEMAND_WR_MB/s"]
    rows = {line.split()[0]: dict(zip(header, line.split())) for line in lines[2:]}
    assert (rows["bob"]["WEIGHT"], rows["bob"]["LIMIT_MB/s"], rows["bob"]["RESERVE_MB/s"]) == ("8", "50.0", "-")
    assert (rows["alice"]["WEIGHT"], rows["alice"]["RESERVE_MB/s"]) == ("4", "5.0")
    assert float(rows["alice"]["DEMAND_RD_MB/s"]) == pytest.approx(2, abs=0.3)
    assert rows["bob"]["ALLOC_RD_MB/s"] == "50.0"
    assert float(rows["alice"]["MEASURED_RD_MB/s"]) == pytest.approx(2, abs=0.3)


def allocations(state) -> dict[str, int]:
    """user -> its read cap on dn1's one device, as the step last sent it."""
    return {user: int(read) for (user, _), (read, _) in allocated_ceilings(state.allocation.shares).items()}


def test_admin_changes_reach_the_allocation_at_once_not_at_the_next_control_period(tmp_path):
    """control_seconds 60: the loop would not run again for a minute; a limit, a priority and a job's
    own limit each reach the node's stream within a second of the call."""
    raw = copy.deepcopy(COORDINATOR_CONFIG)
    raw["policy"] = {"sharing": "work-conserving", "control_seconds": 60}
    with served_coordinator(raw, tmp_path) as (cluster, channel, _):
        link, admin = pb_grpc.AgentLinkStub(channel), pb_grpc.AdminStub(channel)
        link.Register(pb.RegisterRequest(node_id="dn1", backend="blkio-v1",
                                         devices=[pb.Device(name="/dev/loop7", major=7, minor=7)]), timeout=5)
        stream = link.WatchDesiredState(pb.WatchRequest(node_id="dn1"), timeout=30)

        def after(call, want) -> float:
            started = time.monotonic()
            call()
            state = next(stream)
            while not want(allocations(state)):
                state = next(stream)
            return time.monotonic() - started

        took = after(lambda: admin.SetLimit(pb.SetRateRequest(user="alice", bps=1 * MB), timeout=5),
                     lambda given: given.get("alice") == 1 * MB)
        assert took < 1.0, f"a limit took {took:.2f} s"
        report(link, 1000.0, 0, 0)          # both read all they get: each wants more
        report(link, 1001.0, int(1 * MB), int(1.8 * MB))
        took = after(lambda: admin.SetLimit(pb.SetRateRequest(user="alice", bps=0), timeout=5),
                     lambda given: given.get("alice", 0) > 1 * MB)
        assert took < 1.0, f"removing a limit took {took:.2f} s"
        took = after(lambda: admin.StartJob(pb.JobRequest(job_id="7", user="bob", uid=1002, node="cn1",
                                                          limit_bps=2 * MB), timeout=5),
                     lambda given: given.get("bob") == 2 * MB)
        assert took < 1.0, f"a job's limit took {took:.2f} s"
        stream.cancel()


def _drain(stream, into) -> None:
    """Every message of a desired-state stream into a queue, until the stream is cancelled."""
    try:
        for message in stream:
            into.put(message)
    except grpc.RpcError:
        pass


def test_an_allocation_reaches_only_the_node_it_changes(tmp_path, monkeypatch):
    """Two nodes, both users idle (each may take the room left everywhere). bob starts reading on dn1
    only, held at his cap: dn1's stream gets new caps (alice's falls to her probe), dn0's stream gets
    nothing (its caps did not change)."""
    import queue
    import threading

    raw = copy.deepcopy(COORDINATOR_CONFIG)
    raw["storage_nodes"] = [{"id": n, "devices": [{"name": "/dev/loop7", "read_bps": 60 * MB, "write_bps": 30 * MB}]}
                            for n in ("dn0", "dn1")]
    raw["policy"] = {"sharing": "work-conserving", "control_seconds": 0.2}
    with served_coordinator(raw, tmp_path) as (cluster, channel, _):
        # Every control tick and the nodes it changed: what "nothing more is sent" is waited on.
        ticks, ticked = [], threading.Condition()
        real_tick = cluster.weights.tick

        def tick(users, groups=()):
            changed = real_tick(users, groups)
            with ticked:
                ticks.append(set(changed))
                ticked.notify_all()
            return changed
        monkeypatch.setattr(cluster.weights, "tick", tick)

        def after_ticks(count: int) -> list[set[str]]:
            """The nodes changed by each of the next `count` ticks."""
            with ticked:
                start = len(ticks)
                assert ticked.wait_for(lambda: len(ticks) >= start + count, timeout=10)
                return ticks[start:start + count]

        link = pb_grpc.AgentLinkStub(channel)
        received = {n: queue.Queue() for n in ("dn0", "dn1")}
        streams = []
        for node in received:
            link.Register(pb.RegisterRequest(node_id=node, backend="blkio-v1",
                                             devices=[pb.Device(name="/dev/loop7", major=7, minor=7)]), timeout=5)
            stream = link.WatchDesiredState(pb.WatchRequest(node_id=node), timeout=30)
            streams.append(stream)
            threading.Thread(target=_drain, args=(stream, received[node]), daemon=True).start()
        for node, q in received.items():     # the first ticks: caps for both on both nodes
            state = q.get(timeout=10)
            while len(state.allocation.shares.users) < 2:
                state = q.get(timeout=10)
        while any(after_ticks(2)):           # settled: two ticks in a row changed no node
            pass
        for q in received.values():
            while not q.empty():
                q.get()

        def usage(node, t, bob):
            link.StreamUsage(iter([usage_report(node, t, {("alice", "/dev/loop7"): (0.0, 0.0),
                                                          ("bob", "/dev/loop7"): (bob, 0.0)}, held={"bob"})]),
                             timeout=5)
        usage("dn1", 1000.0, 0)
        usage("dn1", 1000.5, 60 * MB)  # all of the node, held: bob reads on dn1
        state = received["dn1"].get(timeout=5)
        assert allocations(state)["bob"] == 60 * MB and allocations(state)["alice"] < 5 * MB
        assert not any("dn0" in changed for changed in after_ticks(3)), "dn0's allocation did not change"
        assert received["dn0"].empty(), "nothing is sent to dn0"
        for stream in streams:
            stream.cancel()


def test_vnodectl_status_shows_each_users_part_of_the_weights_a_weight_sharing_node_holds(fair_coordinator):
    """A node whose edge shares by weight is sent weights, not rates: status shows each user's part of
    them, which is what the node's scheduler gives it while both read without pause (8 : 4 here)."""
    cluster, channel, port = fair_coordinator
    link = pb_grpc.AgentLinkStub(channel)
    link.Register(pb.RegisterRequest(node_id="dn1", backend="datanode-throttle", shares_by_weight=True,
                                     devices=[pb.Device(name="/dev/loop7", major=7, minor=7)]), timeout=5)
    both = ("alice", "bob")
    link.StreamUsage(iter([usage_report("dn1", 1000.0, {(name, "/dev/loop7"): (0.0, 0.0) for name in both}, both)]),
                     timeout=5)
    deadline = time.monotonic() + 20
    while True:
        link.StreamUsage(iter([usage_report("dn1", 1001.0, {(name, "/dev/loop7"): (20 * MB, 0.0) for name in both},
                                            both)]), timeout=5)
        result = subprocess.run([sys.executable, "-m", "vnode_sync.ctl.main", "--coordinator", f"127.0.0.1:{port}",
                                 "status", "--json"], capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, result.stderr
        shares = {u["name"]: u["nodes"][0].get("weight_read_share", 0) for u in json.loads(result.stdout)["users"]}
        if all(shares.values()):
            break
        assert time.monotonic() < deadline, shares
        time.sleep(0.25)
    priority = {u.name: u.priority for u in cluster.store.users()}
    assert shares["alice"] + shares["bob"] == pytest.approx(1.0, abs=1e-3)
    assert shares["alice"] / shares["bob"] == pytest.approx(priority["alice"] / priority["bob"], rel=0.02)
    table = subprocess.run([sys.executable, "-m", "vnode_sync.ctl.main", "--coordinator", f"127.0.0.1:{port}",
                            "status"], capture_output=True, text=True, timeout=30).stdout.splitlines()
    header = table[1].split()
    rows = {line.split()[0]: dict(zip(header, line.split())) for line in table[2:]
            if line.split()[:1] in (["alice"], ["bob"])}
    assert float(rows["alice"]["WEIGHT_RD_%"]) == pytest.approx(100 * shares["alice"], abs=0.06)
