"""One runner for the benchmarks that compare policies over drawn scenarios (issue 59, item 5).

Their common shape: scenarios drawn by seed; on each, every policy run in turn, in an order that
moves with the seed so that the host's drift within a sitting weighs on every policy alike, not on
whichever always runs last; per cell (one policy on one scenario) its outcome, the CPU this process
spent on it and the CPU the hypervisor took from the VM meanwhile (steal: a cell that lost much
measured the host, not the policy); then the distribution over the scenarios and the worst one.
A benchmark says what a scenario and a policy are and how a cell is judged; this module does the rest.
"""

import argparse
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from benchmarks.machine_sample import cpu_ticks

Scenario = TypeVar("Scenario")
Outcome = TypeVar("Outcome")

# Named quantiles (percent) for `distribution`.
QUANTILE_NAMES = {0: "min", 50: "median", 100: "max"}


@dataclass(frozen=True)
class Cell(Generic[Outcome]):
    seed: int
    policy: str
    outcome: Outcome
    cpu_seconds: float     # this process's CPU (user and system) over the cell
    steal_seconds: float   # the VM's CPU the host ran something else on over the cell, every CPU summed


def as_given(seed: int, policies: Sequence[str]) -> tuple[str, ...]:
    """The policies in their given order for every seed (where the order cannot matter: pure CPU work)."""
    return tuple(policies)


def rotated(seed: int, policies: Sequence[str]) -> tuple[str, ...]:
    """The policies rotated by the seed, reversed every other turn: each runs first, second and last alike."""
    policies = tuple(policies)
    turn = seed % len(policies)
    order = policies[turn:] + policies[:turn]
    return order if (seed // len(policies)) % 2 == 0 else order[::-1]


def in_passes(policies: Sequence[str], passes: int) -> list[tuple[int, str]]:
    """(pass, policy) for PASSES passes over one scenario, each in the reverse order of the one before."""
    return [(n, policy) for n in range(passes) for policy in (policies if n % 2 == 0 else policies[::-1])]


def parse_seeds(text: str) -> list[int]:
    """'0-11' or '0,3,5-7' -> the seeds, in order; anything else is an argparse error."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            low, _, high = part.strip().partition("-")
            seeds += range(int(low), int(high or low) + 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds {text!r}: give N, N-M or a comma-separated list of them") from None
    if not seeds or min(seeds) < 0:
        raise argparse.ArgumentTypeError(f"seeds {text!r}: give at least one seed, none below 0")
    return seeds


def cpu(call: Callable[[], Outcome]) -> tuple[Outcome, float]:
    """CALL's result and the CPU (user and system) this process spent on it, in seconds."""
    t0 = time.process_time()
    result = call()
    return result, time.process_time() - t0


def run_cell(seed: int, policy: str, run: Callable[[], Outcome], proc: str = "/proc") -> Cell[Outcome]:
    steal_before = cpu_ticks(proc).steal
    outcome, cpu_seconds = cpu(run)
    steal = (cpu_ticks(proc).steal - steal_before) / os.sysconf("SC_CLK_TCK")
    return Cell(seed, policy, outcome, cpu_seconds, steal)


def run_cells(scenarios: Iterable[tuple[int, Scenario]], policies: Mapping[str, Callable[[Scenario], Outcome]],
              order: Callable[[int, Sequence[str]], Sequence[str]] = rotated,
              ) -> Iterable[tuple[int, Scenario, dict[str, Cell[Outcome]]]]:
    """Per (seed, scenario), as each is done: its cells by policy, in the policies' given order, each
    run in ORDER's. Scenarios are drawn lazily, so a draw that walks one generator stays the same draw."""
    for seed, scenario in scenarios:
        done = {policy: run_cell(seed, policy, lambda run=policies[policy]: run(scenario))
                for policy in order(seed, tuple(policies))}
        yield seed, scenario, {policy: done[policy] for policy in policies}


def distribution(values: Iterable[float], quantiles: Sequence[float] = (0, 5, 50), digits: int = 4) -> str:
    """'min 0.9512 p5 0.9733 median 0.9981': numpy's interpolated percentiles of VALUES."""
    import numpy as np   # only the benchmarks that print distributions need it

    v = np.asarray(list(values), dtype=float)
    return " ".join(f"{QUANTILE_NAMES.get(q, f'p{q:g}')} {np.percentile(v, q):.{digits}f}" for q in quantiles)


def worst(scores: Mapping[int, float]) -> int:
    """The seed of the lowest score (the first such, where several tie)."""
    return min(scores, key=lambda seed: scores[seed])


def steal_line(cells: Iterable[Cell]) -> str:
    """The machine's steal over every cell and in the worst one."""
    steals = [c.steal_seconds for c in cells]
    most = max(steals, default=0.0)
    return f"steal: {sum(steals):.1f} s over {len(steals)} cells, at most {most:.1f} s in one"
