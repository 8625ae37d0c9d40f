"""The demand summary: only what moved is sent, everything at a slow period and after a reconnect."""

import pytest

from vnode_sync.agents.storage.demand_summary import FULL_SECONDS, Entry, SummaryBuilder, merged, unpacked

MB = 1e6


def entry(read=0.0, held=False):
    return Entry(read, 0.0, held, False, read * (4 if held else 1), 0.0)


def test_the_first_summary_is_full_and_steady_users_are_not_sent_again():
    builder = SummaryBuilder()
    entries = {(f"u{i}", "/dev/sdb"): entry(10 * MB) for i in range(1000)}
    first = builder.build(entries, 0.0)
    assert first.full and len(first.user_index) == 1000
    steady = {k: entry(10.5 * MB) for k in entries}                 # 5%: within the threshold
    second = builder.build(steady, 1.0)
    assert not second.full and len(second.user_index) == 0 and second.ByteSize() < 10


def test_a_move_beyond_the_threshold_or_a_held_flag_is_sent_alone_and_a_user_gone_is_named():
    builder = SummaryBuilder()
    builder.build({("alice", "d"): entry(10 * MB), ("bob", "d"): entry(10 * MB), ("carol", "d"): entry(1 * MB)}, 0.0)
    got = builder.build({("alice", "d"): entry(15 * MB), ("bob", "d"): entry(10 * MB, held=True)}, 1.0)
    assert set(unpacked(got)) == {("alice", "d"), ("bob", "d")}
    assert unpacked(got)[("bob", "d")].read_demand_bps == pytest.approx(40 * MB)
    assert list(got.gone) == ["carol"]


def test_a_full_summary_comes_every_period_and_after_a_reconnect():
    builder = SummaryBuilder()
    entries = {("alice", "d"): entry(MB)}
    assert builder.build(entries, 0.0).full
    assert not builder.build(entries, 1.0).full
    assert builder.build(entries, FULL_SECONDS + 0.1).full
    builder.want_full()
    assert builder.build(entries, FULL_SECONDS + 1).full


def test_a_replaced_unsent_report_keeps_its_entries_in_the_newer_one():
    builder = SummaryBuilder()
    builder.build({("alice", "d"): entry(MB), ("bob", "d"): entry(MB)}, 0.0)
    older = builder.build({("alice", "d"): entry(9 * MB), ("bob", "d"): entry(MB)}, 1.0)
    newer = builder.build({("alice", "d"): entry(9 * MB), ("bob", "d"): entry(7 * MB)}, 2.0)
    both = unpacked(merged(older, newer))
    assert both[("alice", "d")].read_bps == 9 * MB and both[("bob", "d")].read_bps == 7 * MB


def test_held_time_is_listed_when_it_grew_and_every_time_in_a_full_report():
    builder = SummaryBuilder()
    assert builder.held_to_send({"alice": 0.0, "bob": 0.0}, True) == {"alice", "bob"}
    assert builder.held_to_send({"alice": 0.5, "bob": 0.0}, False) == {"alice"}
    assert builder.held_to_send({"alice": 0.5, "bob": 0.0}, False) == set()
    assert builder.held_to_send({"alice": 0.5, "bob": 0.0}, True) == {"alice", "bob"}


def test_a_user_that_stopped_came_back_or_more_than_doubled_moved_sharply_and_looking_sends_nothing():
    builder = SummaryBuilder()
    builder.build({("alice", "d"): entry(10 * MB), ("bob", "d"): entry(10 * MB)}, 0.0)
    assert not builder.moved_sharply({("alice", "d"): entry(14 * MB), ("bob", "d"): entry(6 * MB)})
    assert builder.moved_sharply({("alice", "d"): entry(0.0), ("bob", "d"): entry(10 * MB)})     # stopped
    assert builder.moved_sharply({("alice", "d"): entry(25 * MB), ("bob", "d"): entry(10 * MB)})  # x2.5
    assert builder.moved_sharply({("carol", "d"): entry(1 * MB)})                                 # new
    assert not builder.moved_sharply({("carol", "d"): entry(0.05 * MB)})                          # a trace
    # Looking marks nothing sent: the next summary still carries alice's stop.
    assert unpacked(builder.build({("alice", "d"): entry(0.0), ("bob", "d"): entry(10 * MB)}, 1.0)) == {
        ("alice", "d"): entry(0.0)}
