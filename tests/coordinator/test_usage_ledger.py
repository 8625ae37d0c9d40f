"""The one usage ledger: each report's demand summary booked once."""

import pytest

from tests.fakes.clock import Clock
from vnode_sync.agents.storage.demand_summary import Entry, packed
from vnode_sync.coordinator.state.usage_ledger import STALE_SECONDS, UsageLedger
from vnode_sync.wire import vnode_pb2 as pb

MB = 1_000_000


def summary_report(at, entries, full=False, gone=(), held=None):
    demand = packed({k: Entry(r, w, rh, wh, r * (4 if rh else 1), w * (4 if wh else 1))
                     for k, (r, w, rh, wh) in entries.items()}, full, list(gone))
    return pb.UsageReport(node_id="dn1", sampled_at_unix=at, demand=demand,
                          held=[pb.HeldTime(user=u, held_seconds=s) for u, s in (held or {}).items()])


def test_a_summary_changes_only_the_entries_it_lists_a_full_one_replaces_and_gone_users_leave():
    clock = Clock()
    ledger = UsageLedger(clock)
    users = {"alice", "bob", "carol"}
    ledger.observe(summary_report(1000.0, {("alice", "/d0"): (10 * MB, 0, False, False),
                                           ("alice", "/d1"): (5 * MB, 0, False, False),
                                           ("bob", "/d0"): (20 * MB, 0, True, False),
                                           ("carol", "/d0"): (1 * MB, 0, False, False)}, full=True), users)
    ledger.observe(summary_report(1001.0, {("alice", "/d0"): (30 * MB, 0, False, False)}, gone=["carol"]), users)
    clock.now = 1001.0
    assert ledger.rates("dn1") == {"alice": (35 * MB, 0.0), "bob": (20 * MB, 0.0)}
    assert ledger.held_users("dn1") == {"bob"}
    assert ledger.flows("dn1")[("bob", "/d0")].read_demand_bps == 80 * MB
    ledger.observe(summary_report(1002.0, {("bob", "/d0"): (1 * MB, 0, False, False)}, full=True), users)
    assert ledger.rates("dn1") == {"bob": (1 * MB, 0.0)}


def test_unknown_users_are_not_booked_and_a_silent_node_moves_nothing():
    clock = Clock()
    ledger = UsageLedger(clock)
    ledger.observe(summary_report(1000.0, {("alice", "/d0"): (MB, 0, False, False),
                                           ("mallory", "/d0"): (MB, 0, False, False)}, full=True), {"alice"})
    assert set(ledger.rates("dn1")) == {"alice"}
    clock.now = 1000.0 + STALE_SECONDS + 1
    assert ledger.rates("dn1") == {}


def test_listeners_are_told_what_changed_after_the_ledger_lets_go_of_its_lock():
    ledger = UsageLedger(Clock(1000.0))
    told = []

    def listener(node_id, full, changed, gone):
        # Another module's listener takes its own lock: never while the ledger's is held.
        free = ledger._lock.acquire(timeout=1.0)
        if free:
            ledger._lock.release()
        told.append((node_id, full, sorted(changed), gone, free, ledger.rates(node_id)))

    ledger.on_flows(listener)
    ledger.observe(summary_report(1000.0, {("alice", "/d0"): (MB, 0, False, False)}, full=True), {"alice"})
    ledger.observe(summary_report(1000.5, {}, gone=["alice"]), {"alice"})
    assert told == [("dn1", True, [("alice", "/d0")], [], True, {"alice": (MB, 0.0)}),
                    ("dn1", False, [], ["alice"], True, {})]



def test_held_time_is_booked_once_per_report_and_kept_for_users_a_partial_report_does_not_list():
    clock = Clock()
    ledger = UsageLedger(clock)
    users = {"alice", "bob"}
    ledger.observe(summary_report(1000.0, {("alice", "/d0"): (MB, 0, True, False), ("bob", "/d0"): (MB, 0, False, False)},
                                  full=True, held={"alice": 1.0}), users)
    ledger.observe(summary_report(1010.0, {}, held={"alice": 11.0}), users)
    ledger.observe(summary_report(1011.0, {}), users)        # nothing listed: alice is as before
    alice = ledger.held("dn1", "alice", 60.0, 1011.0)
    assert (alice.seconds, alice.now) == (pytest.approx(10.0), True)   # 1 s was before the first report
    assert ledger.held_now() == {"alice": 1}
    ledger.observe(summary_report(1012.0, {}, gone=["alice"]), users)
    assert ledger.held_pairs() == []


def test_each_users_rate_over_the_cluster_follows_every_nodes_reports_and_leaves_silent_nodes_out():
    clock = Clock(1000.0)
    ledger = UsageLedger(clock)
    users = {"alice", "bob"}

    def report(node, at, entries, full=False, gone=()):
        booked = summary_report(at, entries, full, gone)
        booked.node_id = node
        ledger.observe(booked, users)

    report("dn1", 1000.0, {("alice", "/d0"): (10 * MB, MB, False, False), ("alice", "/d1"): (5 * MB, 0, False, False),
                           ("bob", "/d0"): (2 * MB, 0, False, False)}, full=True)
    report("dn2", 1000.0, {("alice", "/d0"): (20 * MB, 0, False, False)}, full=True)
    assert ledger.user_rates() == {"alice": (35 * MB, MB), "bob": (2 * MB, 0.0)}
    report("dn1", 1001.0, {("alice", "/d0"): (1 * MB, 0, False, False)}, gone=["bob"])
    assert ledger.user_rates() == {"alice": (26 * MB, 0.0), "bob": (0.0, 0.0)}
    report("dn2", 1002.0, {("bob", "/d0"): (3 * MB, 0, False, False)}, full=True)
    assert ledger.user_rates() == {"alice": (6 * MB, 0.0), "bob": (3 * MB, 0.0)}
    clock.now = 1001.0 + STALE_SECONDS + 0.5   # dn1 silent, dn2 not yet
    assert ledger.user_rates() == {"alice": (0.0, 0.0), "bob": (3 * MB, 0.0)}
    assert ledger.rates("dn2") == {"bob": (3 * MB, 0.0)}   # the same book, read per node
