"""Lend and reclaim times of a drawn scenario's cell, from the DataNode's own per-user byte counters.

A timeline is the agent's counters sampled every STEP seconds of the cell's window: (seconds into the
window, {slot: bytes moved so far}). An interactive user's transfers are spans (start, end) in the
same seconds, as its client timed them. Interval k runs from sample k-1 to sample k.

- **Reclaim**, per transfer: from its start to the end of the first interval (starting at or after
  it) in which its user moves at least FRACTION of what it moves in that transfer's median interval:
  how soon a returning user has back what it then keeps. Whether what it keeps is its share is the
  transfer time against static caps', judged apart (edge_scenarios.judge).
- **Lend**, per idle time after a transfer: from the transfer's end to the end of the first interval
  in which the other users together move at least FRACTION of their median interval over that idle
  time: how soon what the user left is taken up.

A transfer or an idle time of fewer than MIN_INTERVALS whole intervals is not timed: a median of
fewer says nothing. Every time is a multiple of the sampling, so STEP is its resolution.
"""

import statistics
from collections.abc import Mapping, Sequence

STEP = 0.1              # s between samples of the agent's counters: the times' resolution
FRACTION = 0.9          # of the steady rate: "has it back" (the target's 10 %)
MIN_INTERVALS = 3       # whole intervals a transfer or an idle time needs to have a median
TARGET_SECONDS = 1.0    # issue 58: lend and reclaim within 1 s

Timeline = Sequence[tuple[float, Mapping[int, int]]]
Span = tuple[float, float]


def _intervals(timeline: Timeline, slots: Sequence[int]) -> list[tuple[float, float, int]]:
    """(start, end, bytes the SLOTS moved together) of each interval."""
    return [(t0, t1, sum(after.get(s, 0) - before.get(s, 0) for s in slots))
            for (t0, before), (t1, after) in zip(timeline, timeline[1:])]


def _settled(intervals: list[tuple[float, float, int]], begin: float, end: float) -> float | None:
    """Seconds from BEGIN to the end of the first interval from BEGIN on that moves FRACTION of the median
    interval within BEGIN..END; None when fewer than MIN_INTERVALS intervals lie within."""
    within = [moved for t0, t1, moved in intervals if t0 >= begin and t1 <= end]
    if len(within) < MIN_INTERVALS:
        return None
    steady = statistics.median(within)
    for t0, t1, moved in intervals:
        if t0 >= begin and moved >= FRACTION * steady:
            return t1 - begin
    return None


def reclaim_times(timeline: Timeline, spans: Sequence[Span], slot: int) -> list[float]:
    intervals = _intervals(timeline, [slot])
    return [t for start, end in spans if (t := _settled(intervals, start, end)) is not None]


def lend_times(timeline: Timeline, spans: Sequence[Span], slot: int, others: Sequence[int],
               window_end: float) -> list[float]:
    """After each of SLOT's transfers, until its next one starts (or the window ends)."""
    intervals = _intervals(timeline, others)
    ordered = sorted(spans)
    idle = [(end, next_start) for (_, end), (next_start, _) in zip(ordered, ordered[1:])]
    if ordered:
        idle.append((ordered[-1][1], window_end))
    return [t for end, until in idle if (t := _settled(intervals, end, until)) is not None]


def cell_times(timeline: Timeline, spans: Mapping[int, Sequence[Span]], slots: Sequence[int],
               window_end: float) -> tuple[list[float], list[float]]:
    """(lend, reclaim) times of every interactive user (a slot with spans) of a cell."""
    lend, reclaim = [], []
    for slot, mine in spans.items():
        lend += lend_times(timeline, mine, slot, [s for s in slots if s != slot], window_end)
        reclaim += reclaim_times(timeline, mine, slot)
    return lend, reclaim
