"""The work-conserving control loop's cadence: a period counted from each tick's start, so a tick
that takes longer than the period (the weight step at site size) is followed at once rather than a
whole period later, and a quick tick still waits out the rest of its period; after a tick that sent
weights, the next waits for every node's report measured under them, or AWAIT_PERIODS periods."""

import asyncio
import time
from types import SimpleNamespace

from vnode_sync.coordinator.api.control_loop import AWAIT_PERIODS, allocation_loop

PERIOD = 0.5
SLOW_TICK = 1.0


class _Cluster:
    """What the loop touches of a Cluster: its policy's period, the published rows (users and jobs) and groups, one tick."""

    def __init__(self, durations: list[float], reports_after: float | None = 0.0):
        self.config = SimpleNamespace(policy=SimpleNamespace(control_seconds=PERIOD))
        self.publishing = SimpleNamespace(add_listener=lambda listener: None, refresh_snapshot=lambda: None,
                                          snapshot=lambda: SimpleNamespace(rows=(), groups=()))
        self.weights = SimpleNamespace(on_capped_user_held=lambda listener: None)
        self.durations = durations
        self.reports_after = reports_after     # seconds from a tick's end to the reports under its weights (None: never)
        self.starts: list[float] = []
        self.ended = 0.0

    def awaiting_reports(self) -> bool:
        return self.reports_after is None or time.monotonic() < self.ended + self.reports_after

    def control_tick(self, users, groups) -> set[str]:
        self.starts.append(time.monotonic())
        time.sleep(self.durations[min(len(self.starts) - 1, len(self.durations) - 1)])
        self.ended = time.monotonic()
        return set()


def _starts(durations: list[float], ticks: int, reports_after: float | None = 0.0) -> list[float]:
    cluster = _Cluster(durations, reports_after)
    fan_out = SimpleNamespace(wake=lambda: None)

    async def run() -> None:
        task = asyncio.create_task(allocation_loop(cluster, fan_out, store_thread=None))
        while len(cluster.starts) < ticks:
            await asyncio.sleep(0.02)
        task.cancel()

    asyncio.run(run())
    return cluster.starts


def test_a_tick_longer_than_the_period_is_followed_at_once_and_a_quick_one_a_period_after_it_began():
    starts = _starts([SLOW_TICK, 0.0], ticks=4)
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    # Counted from the end, the slow tick would be followed after SLOW_TICK + PERIOD.
    assert SLOW_TICK <= gaps[0] < SLOW_TICK + PERIOD / 2, gaps
    assert all(PERIOD * 0.9 <= gap < PERIOD * 1.5 for gap in gaps[1:]), gaps


def test_the_next_tick_waits_for_reports_under_the_last_weights_and_no_longer_than_the_limit():
    late = PERIOD * 1.6     # the reports come after the period, before the limit
    starts = _starts([0.0], ticks=3, reports_after=late)
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert all(late <= gap < late + PERIOD / 2 for gap in gaps), gaps
    starts = _starts([0.0], ticks=2, reports_after=None)
    # The limit counts from the tick's start on the event loop, a little before its executor thread runs.
    assert AWAIT_PERIODS * PERIOD - 0.1 <= starts[1] - starts[0] < (AWAIT_PERIODS + 0.5) * PERIOD
