"""benchmarks.bootstrap: the interval of a ratio of percentiles, drawn again from the measured values, and of
a median of paired ratios with what it lets a run claim."""

import random
import statistics

import pytest

from benchmarks.bootstrap import Interval, describe_ratios, median_interval, p50, p99, ratio_interval, target_verdict


def test_a_ratio_of_constant_samples_has_no_spread():
    assert ratio_interval([0.05] * 40, [0.025] * 30, p50) == Interval(2.0, 2.0)


def test_two_samples_of_one_distribution_give_an_interval_around_one():
    draw = random.Random(7)
    measured, baseline = ([draw.lognormvariate(-3, 0.3) for _ in range(100)] for _ in range(2))
    interval = ratio_interval(measured, baseline, p50)
    assert interval.low < 1.0 < interval.high
    assert interval.high - interval.low < 0.4


def test_a_sample_twice_as_slow_gives_an_interval_around_two_that_leaves_out_one():
    draw = random.Random(8)
    baseline = [draw.lognormvariate(-3, 0.2) for _ in range(100)]
    measured = [2 * draw.lognormvariate(-3, 0.2) for _ in range(100)]
    interval = ratio_interval(measured, baseline, p50)
    assert 1.0 < interval.low < 2.0 < interval.high


def test_a_p99_interval_is_wider_than_the_p50_one_for_the_same_samples():
    draw = random.Random(9)
    measured, baseline = ([draw.lognormvariate(-3, 0.5) for _ in range(100)] for _ in range(2))
    wide, narrow = ratio_interval(measured, baseline, p99), ratio_interval(measured, baseline, p50)
    assert wide.high - wide.low > narrow.high - narrow.low


def test_the_same_values_give_the_same_interval_each_time():
    values = [0.01 * i for i in range(1, 50)]
    assert ratio_interval(values, values[::-1], p99) == ratio_interval(values, values[::-1], p99)


@pytest.mark.parametrize("measured, baseline, kwargs", [([], [1.0], {}), ([1.0], [], {}),
                                                        ([1.0], [1.0], {"confidence": 1.0}),
                                                        ([1.0], [1.0], {"draws": 0})])
def test_empty_sides_and_meaningless_settings_are_refused(measured, baseline, kwargs):
    with pytest.raises(ValueError):
        ratio_interval(measured, baseline, p50, **kwargs)


def test_describe_ratios_prints_both_percentiles_with_their_intervals():
    assert describe_ratios([0.03] * 5, [0.02] * 5) == "p50  1.50 (1.50-1.50)  p99  1.50 (1.50-1.50)"


@pytest.mark.parametrize("target, claim", [(0.97, "met"), (0.98, "within 2 %")])
def test_the_verdict_claims_the_target_only_when_the_interval_allows(target, claim):
    assert target_verdict(0.99, 0.985, 20, target, claim) == f"{claim} (the whole interval)"
    assert target_verdict(0.99, 0.94, 20, target, claim).startswith(f"{claim} by the median")
    assert target_verdict(0.95, 0.90, 20, target, claim) == f"NOT {claim}"
    assert target_verdict(1.0, 1.0, 1, target, claim).startswith("too few rounds")


def test_the_median_interval_is_repeatable_and_holds_the_median():
    ratios = [0.91, 0.95, 1.02, 0.88, 0.97, 1.05, 0.93, 0.99]
    low, high = median_interval(ratios)
    assert (low, high) == median_interval(ratios)
    assert low <= statistics.median(ratios) <= high
