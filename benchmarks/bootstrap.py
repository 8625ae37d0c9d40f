"""How far a ratio of two measured percentiles could move by chance: a percentile bootstrap.

A benchmark cell compares one policy's transfer times with the baseline's from the same run, e.g.
p50 1.03x of static caps. Whether 1.03 says "slower" or "the same, measured twice" depends on how
much either side's percentile moves when its transfers are drawn again. Each draw resamples both
sides with replacement, as many transfers as were measured, and takes the ratio of their percentiles;
the interval holds the middle CONFIDENCE of those ratios.

A benchmark that runs its cases in rounds has a paired ratio per round instead (managed/none, one round's
two trials); there the interval is that of the median ratio, and it says what the run may claim of a
target such as "within 3 %".
"""

import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from benchmarks.percentile import percentile

DRAWS = 2000
CONFIDENCE = 0.95
MIN_ROUNDS_FOR_INTERVAL = 5  # below this a bootstrap interval of the median says nothing


@dataclass(frozen=True)
class Interval:
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.low:.2f}-{self.high:.2f}"


def p50(values: Sequence[float]) -> float:
    return statistics.median(values)


def p99(values: Sequence[float]) -> float:
    return percentile(list(values), 99)


def ratio_interval(measured: Sequence[float], baseline: Sequence[float],
                   statistic: Callable[[Sequence[float]], float], draws: int = DRAWS,
                   confidence: float = CONFIDENCE, seed: int = 0) -> Interval:
    """The CONFIDENCE interval of statistic(measured) / statistic(baseline) over DRAWS resamplings."""
    if not measured or not baseline:
        raise ValueError("both sides need at least one value")
    if not 0 < confidence < 1 or draws < 1:
        raise ValueError(f"confidence={confidence}, draws={draws}: need 0 < confidence < 1 and draws >= 1")
    draw = random.Random(seed).choices   # seeded: a report printed twice says the same
    ratios = sorted(statistic(draw(measured, k=len(measured))) / statistic(draw(baseline, k=len(baseline)))
                    for _ in range(draws))
    tail = (1 - confidence) / 2
    return Interval(ratios[int(tail * (draws - 1))], ratios[int(round((1 - tail) * (draws - 1)))])


def describe_ratios(measured: Sequence[float], baseline: Sequence[float]) -> str:
    """p50 and p99 of MEASURED over BASELINE, each with its interval: 'p50 1.02 (0.97-1.08)  p99 ...'."""
    return "  ".join(f"{name} {statistic(measured) / statistic(baseline):5.2f} "
                     f"({ratio_interval(measured, baseline, statistic)})"
                     for name, statistic in (("p50", p50), ("p99", p99)))


def median_interval(values: list[float], resamples: int = 10_000) -> tuple[float, float]:
    """95 % percentile-bootstrap interval of the median (seeded: the same data print the same interval)."""
    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(resamples))
    return medians[int(0.025 * resamples)], medians[int(0.975 * resamples) - 1]


def target_verdict(median_ratio: float, interval_low: float, rounds: int, target: float, claim: str) -> str:
    """What a run of ROUNDS paired ratios may CLAIM ('within 2 %') of ratios at or above TARGET."""
    if rounds < MIN_ROUNDS_FOR_INTERVAL:
        return f"too few rounds to tell (at least {MIN_ROUNDS_FOR_INTERVAL})"
    if interval_low >= target:
        return f"{claim} (the whole interval)"
    if median_ratio >= target:
        return f"{claim} by the median, not by the whole interval (more rounds narrow it)"
    return f"NOT {claim}"
