"""testbed.share_watch: the measures the HDFS share tests and benchmarks assert on."""

import itertools

from testbed.share_watch import interval_rates, seconds_until, steady_ratio

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
