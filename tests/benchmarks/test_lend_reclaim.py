"""Lend and reclaim times from a timeline of per-user bytes (benchmarks.lend_reclaim)."""

import pytest

from benchmarks.lend_reclaim import STEP, cell_times, lend_times, reclaim_times

MB = 1_000_000


def timeline(rates, seconds=4.0):
    """Samples every STEP of users moving at RATES(t) -> {slot: bytes/s}, as the agent's counters grow."""
    out, moved = [], {}
    for k in range(round(seconds / STEP) + 1):
        t = round(k * STEP, 6)
        out.append((t, dict(moved)))
        for slot, rate in rates(t).items():
            moved[slot] = moved.get(slot, 0) + int(rate * STEP)
    return out


def test_a_user_that_has_its_rate_back_at_once_reclaims_in_one_interval():
    # u1 transfers from 1.0 to 2.0 s at 20 MB/s from its first interval; u0 takes the rest.
    line = timeline(lambda t: {0: 40 * MB, 1: 20 * MB} if 1.0 <= t < 2.0 else {0: 60 * MB, 1: 0})
    assert reclaim_times(line, [(1.0, 2.0)], 1) == [pytest.approx(STEP)]


def test_a_user_held_back_for_half_a_second_reclaims_in_half_a_second():
    line = timeline(lambda t: {0: 60 * MB, 1: 1 * MB} if 1.0 <= t < 1.5 else
                    {0: 40 * MB, 1: 20 * MB} if 1.5 <= t < 3.0 else {0: 60 * MB, 1: 0})
    assert reclaim_times(line, [(1.0, 3.0)], 1) == [pytest.approx(0.6)]


def test_what_a_user_leaves_is_lent_as_soon_as_the_others_take_it():
    at_once = timeline(lambda t: {0: 40 * MB, 1: 20 * MB} if 1.0 <= t < 2.0 else {0: 60 * MB, 1: 0})
    assert lend_times(at_once, [(1.0, 2.0)], 1, [0], 4.0) == [pytest.approx(STEP)]
    # The others stay at 40 for 0.8 s after the user ended.
    late = timeline(lambda t: {0: 40 * MB, 1: 20 * MB} if 1.0 <= t < 2.0 else
                    {0: 40 * MB, 1: 0} if 2.0 <= t < 2.8 else {0: 60 * MB, 1: 0})
    assert lend_times(late, [(1.0, 2.0)], 1, [0], 4.0) == [pytest.approx(0.9)]


def test_a_transfer_or_idle_time_too_short_for_a_median_is_not_timed():
    line = timeline(lambda t: {0: 60 * MB, 1: 20 * MB if 1.0 <= t < 1.15 else 0})
    assert reclaim_times(line, [(1.0, 1.15)], 1) == []
    assert lend_times(line, [(1.0, 1.15), (1.3, 1.5)], 1, [0], 4.0) == [pytest.approx(STEP)]   # only after 1.5


def test_a_cell_times_every_interactive_user_against_all_the_others():
    line = timeline(lambda t: {0: 40 * MB, 1: 20 * MB, 2: 0} if 1.0 <= t < 2.0 else {0: 60 * MB, 1: 0, 2: 0})
    lend, reclaim = cell_times(line, {1: [(1.0, 2.0)], 2: []}, [0, 1, 2], 4.0)
    assert lend == [pytest.approx(STEP)] and reclaim == [pytest.approx(STEP)]
