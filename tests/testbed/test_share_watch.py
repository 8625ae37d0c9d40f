"""testbed.share_watch: the measures the HDFS share tests and benchmarks assert on."""

import itertools

import pytest

from testbed.share_watch import (assertion_missed, first_at_least, first_window_that_holds, interval_rates, sampled,
                                 seconds_until, steady_ratio, tail_rates)

MB = 1_000_000


def test_steady_ratio_is_the_median_over_the_intervals_where_both_moved():
    intervals = [{"a": 40 * MB, "b": 20 * MB}, {"a": 0, "b": 0}, {"a": 12 * MB, "b": 12 * MB},
                 {"a": 39 * MB, "b": 20 * MB}, {"a": 5 * MB, "b": 0.5 * MB}, {"a": 42 * MB, "b": 20 * MB}]
    ratio, moving = steady_ratio(intervals, "a", "b", least=MB)
    assert moving == 4                          # the stall and the interval where b hardly moved are left out
    assert ratio == (1.95 + 2.0) / 2
    assert steady_ratio([{"a": 0, "b": 0}], "a", "b", least=MB) == (None, 0)


def test_interval_rates_and_seconds_until_measure_rates_from_counters():
    counter = itertools.count(step=1)
    rates = interval_rates(lambda: {"x": next(counter) * 100_000}, 0.3, step=0.1)
    assert len(rates) == 3 and all(r["x"] > 0 for r in rates)
    assert seconds_until(lambda: {"x": 0}, 1, within=0.3, window=0.1)[0] is None


def test_a_record_tells_when_each_key_reached_its_own_level_and_its_pace_at_the_end():
    # a: 10 MB/s for 1 s, then 50 MB/s; b: 30 MB/s throughout; sampled every 0.1 s for 3 s
    trace = [(t / 10, {"a": (10 * min(t, 10) + 50 * max(0, t - 10)) * MB / 10, "b": 3 * t * MB}) for t in range(31)]
    assert tail_rates(trace, 1.0) == {"a": 50 * MB, "b": 30 * MB}
    # 0.5 s windows: a's reaches 45 MB/s (90 % of its pace at the end) once wholly past 1 s; b's is at 27 from 0.5 s
    assert first_at_least(trace, {"a": 45 * MB, "b": 27 * MB}) == 1.5
    assert first_at_least(trace, 55 * MB) is None
    recorded = sampled(lambda: {"x": 1}, 0.2, step=0.05)
    assert recorded[0][0] == 0.0 and recorded[-1][0] >= 0.2 and len(recorded) >= 3


def test_a_split_is_taken_from_the_first_window_that_holds_it_and_fails_when_none_does():
    windows = iter([1.2, 1.9, 2.0])
    assert first_window_that_holds(lambda: next(windows), lambda r: abs(r - 2) > 0.2 and f"{r}", "split") == 1.9
    assert next(windows) == 2.0                  # no window measured past the one that held

    def check(ratio):
        assert ratio == 2, f"ratio {ratio}"
    with pytest.raises(AssertionError, match=r"none of 3 windows; the last missed: ratio 1\.0"):
        first_window_that_holds(lambda: 1.0, assertion_missed(check), "split")
