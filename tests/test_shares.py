"""Algorithm 1 (paper section 3.2)."""

import pytest

from vnode_sync.errors import InvalidArgument
from vnode_sync.shares import priority_shares

MB = 1_000_000


def test_papers_example_200_mb_per_node_priorities_4_8_8():
    assert priority_shares(200 * MB, {"a": 4, "b": 8, "c": 8}) == {"a": 40 * MB, "b": 80 * MB, "c": 80 * MB}


def test_one_active_user_gets_all_of_bw():
    assert priority_shares(200 * MB, {"a": 3}) == {"a": 200 * MB}


def test_no_active_users_get_nothing():
    assert priority_shares(200 * MB, {}) == {}


def test_a_user_becoming_inactive_gives_its_share_to_the_rest():
    before = priority_shares(60 * MB, {"alice": 4, "bob": 8, "carol": 8})
    after = priority_shares(60 * MB, {"alice": 4, "bob": 8})
    assert before["alice"] == 12 * MB
    assert after == {"alice": 20 * MB, "bob": 40 * MB}


@pytest.mark.parametrize("bw,priorities", [
    (100, {"a": 1, "b": 1, "c": 1}),
    (1_000_003, {"a": 7, "b": 13, "c": 29, "d": 100}),
    (10, {f"u{i}": 1 + i % 100 for i in range(37)}),
])
def test_rounding_never_gives_more_than_bw_in_total(bw, priorities):
    shares = priority_shares(bw, priorities)
    assert sum(shares.values()) <= bw
    assert bw - sum(shares.values()) < len(priorities)  # at most one unit lost per user


def test_shares_keep_priority_ratios():
    shares = priority_shares(60 * MB, {"alice": 4, "bob": 8})
    assert shares["bob"] == 2 * shares["alice"]


@pytest.mark.parametrize("bad", [0, 101, -1])
def test_priorities_outside_1_to_100_are_refused(bad):
    with pytest.raises(InvalidArgument, match="1 to 100"):
        priority_shares(MB, {"a": bad, "b": 5})


