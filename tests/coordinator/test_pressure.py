"""Who is held back: held time per (node, user) booked in the usage ledger, and the Pressure RPC's order."""

import grpc
import pytest

from tests.fakes.clock import Clock
from tests.fakes.reports import usage_report
from vnode_sync.coordinator.state.pressure import NodeShareView, rank
from vnode_sync.coordinator.state.usage_ledger import HISTORY_STEP_SECONDS, PairHeld, UsageLedger
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc

MB = 1_000_000


def report(node: str, at: float, held: dict[str, float], now_held: set[str] = frozenset(),
           source=pb.HELD_SOURCE_ESTIMATED) -> pb.UsageReport:
    return usage_report(node, at, {(u, "/dev/x"): (0.0, 0.0) for u in held}, now_held, held, source=source)


def test_held_time_within_a_window_is_what_was_added_in_it():
    clock = Clock()
    book = UsageLedger(clock)
    for second in range(0, 601):  # held the whole 10 minutes, one report a second
        clock.now = 1000.0 + second
        book.observe(report("dn1", clock.now, {"alice": float(second), "bob": 0.0}, {"alice"}), {"alice", "bob"})
    alice = book.held("dn1", "alice", 300.0, clock.now)
    assert 300 <= alice.seconds <= 300 + HISTORY_STEP_SECONDS
    assert alice.now and alice.since == 1001.0 and alice.source == pb.HELD_SOURCE_ESTIMATED
    assert book.held("dn1", "bob", 300.0, clock.now) == PairHeld(0.0, False, 0.0, pb.HELD_SOURCE_UNSPECIFIED)
    assert book.held_now() == {"alice": 1}


def test_an_agent_restart_does_not_lose_or_subtract_held_time():
    clock = Clock()
    book = UsageLedger(clock)
    book.observe(report("dn1", 1000.0, {"alice": 50.0}, {"alice"}), {"alice"})
    book.observe(report("dn1", 1010.0, {"alice": 60.0}, {"alice"}), {"alice"})
    book.observe(report("dn1", 1020.0, {"alice": 4.0}, {"alice"}), {"alice"})   # restarted: counts from 0
    assert book.held("dn1", "alice", 10.0, 1020.0).seconds == pytest.approx(4.0)
    assert book.held("dn1", "alice", 300.0, 1020.0).seconds == pytest.approx(14.0)   # 50 were before the first report


def test_unknown_users_and_removed_vnodes_are_not_kept():
    book = UsageLedger(Clock())
    book.observe(report("dn1", 1000.0, {"alice": 5.0, "mallory": 9.0}, {"alice"}), {"alice"})
    assert book.held_pairs() == [("dn1", "alice")]
    book.observe(report("dn1", 1001.0, {}), {"alice"})   # alice's VNode is gone from dn1
    assert book.held_pairs() == []


def test_users_are_ranked_held_now_then_longest_held_then_highest_pressure():
    clock = Clock()
    book = UsageLedger(clock)
    book.observe(report("dn1", 1000.0, {"carol": 0.0, "alice": 0.0}), {"carol", "alice"})
    book.observe(report("dn1", 1100.0, {"carol": 100.0, "alice": 10.0}, {"alice"}), {"carol", "alice"})
    views = [NodeShareView("dn1", {"alice": (19 * MB, 0.0), "bob": (30 * MB, 0.0), "dave": (1 * MB, 0.0)},
                           {"alice": (20 * MB, 10 * MB), "bob": (40 * MB, 10 * MB), "dave": (40 * MB, 10 * MB)})]
    users = [("alice", 4), ("bob", 8), ("carol", 8), ("dave", 2), ("erin", 1)]
    ranked = rank(users, views, book, 300.0, now=1100.0)
    assert [r.user for r in ranked] == ["alice", "carol", "bob", "dave"]   # erin moves nothing
    alice = ranked[0]
    assert alice.nodes_held == 1 and alice.pressure == pytest.approx(0.95)
    assert alice.nodes[0].held_since_unix == 1100.0 and alice.nodes[0].allowed_read_bps == 20 * MB
    assert [r.user for r in rank(users, views, book, 300.0, limit=2, now=1100.0)] == ["alice", "carol"]


def test_a_jobs_vnode_is_a_row_of_its_own_with_its_user_group_and_priority():
    book = UsageLedger(Clock())
    views = [NodeShareView("dn1", {"alice": (5 * MB, 0.0), "alice.7": (20 * MB, 0.0), "mallory.9": (9 * MB, 0.0)},
                           {"alice": (10 * MB, 0), "alice.7": (20 * MB, 0), "mallory.9": (10 * MB, 0)})]
    ranked = rank([("alice", 8), ("alice.7", 30)], views, book, 300.0, now=1000.0, groups={"alice": "physics/theory"})
    assert [(r.user, r.job, r.group, r.priority) for r in ranked] == [
        ("alice", "7", "physics/theory", 30), ("alice", "", "physics/theory", 8)]   # mallory: not readable
    assert ranked[0].pressure == pytest.approx(1.0)
    assert [r.job for r in rank([("alice", 8)], views, book, 300.0, now=1000.0)] == ["7", ""]  # her priority then
    assert rank([("alice", 8)], views, book, 300.0, now=1000.0)[0].priority == 8


def test_the_pressure_rpc_answers_and_refuses_a_bad_window(coordinator):
    cluster, channel, _ = coordinator
    link, admin = pb_grpc.AgentLinkStub(channel), pb_grpc.AdminStub(channel)
    link.Register(pb.RegisterRequest(node_id="dn1", backend="blkio-v1",
                                     devices=[pb.Device(name="/dev/loop7", major=7, minor=7)]), timeout=5)
    now = cluster.ledger.now()
    link.StreamUsage(iter([report("dn1", now - 1, {"alice": 0.0}),
                           usage_report("dn1", now, {("alice", "/dev/loop7"): (20 * MB, 0.0)}, {"alice"},
                                        {"alice": 1.0})]), timeout=5)
    answer = admin.Pressure(pb.PressureRequest(window_seconds=60), timeout=5)
    assert [u.user for u in answer.users] == ["alice"]
    node = answer.users[0].nodes[0]
    assert node.held_at_limit and node.held_seconds == pytest.approx(1.0)
    assert node.allowed_read_bps == 20 * MB and node.read_bps == pytest.approx(20 * MB, rel=0.01)
    assert answer.window_seconds == 60 and answer.sharing == "static"
    with pytest.raises(grpc.RpcError) as e:
        admin.Pressure(pb.PressureRequest(window_seconds=-1), timeout=5)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "invalid window" in e.value.details()
