"""Watching shares move on a real HDFS: how soon a rate reaches a level, and what clients see.

- `seconds_until(counters, at_least, within)`: seconds until every key's rate over a sliding window
  (counters sampled every 50 ms) was at least `at_least`; disjoint windows would add up to a
  window's length to what is measured.
- `sampled`, `first_at_least`, `tail_rates`: counters recorded for a while, then read after the fact:
  how soon each key's windowed rate reached a level that may itself come from the record (what a
  user moves once it has the node to itself, its own pace rather than the node's).
- `interval_rates`, `steady_ratio`: rates over consecutive short intervals, and the median ratio of
  two users' rates over those where both moved: the split while both move, not skewed by the moments
  a write pipeline changes blocks and both stall.
- `first_window_that_holds`: a split judged on the first of a few windows that holds it (a window on
  a busy host can fall where a client is not backlogged; wrong weights miss every one).
- `ClientBytes`: bytes a client process moved as the kernel counts them for it (/proc/PID/io:
  rchar for a writer reading its local file, wchar for a reader writing it out): the client's side,
  independent of vnode-sync's own counters.
- `CacheDropper`: keeps block files out of the page cache, so re-reads stay the (paced) disk's.
"""

import collections
import os
import threading
import time
from collections.abc import Callable
from typing import TypeVar

Window = TypeVar("Window")


def seconds_until(counters: Callable[[], dict], at_least: float, within: float,
                  window: float = 0.5) -> tuple[float | None, dict]:
    """Seconds from now until every key's rate over the last `window` s was >= `at_least`
    (bytes/s); None if not within `within` s. Also the last rates."""
    since = time.monotonic()
    samples: collections.deque = collections.deque([(since, counters())])
    rates: dict = {}
    while time.monotonic() - since < within:
        time.sleep(0.05)
        now, latest = time.monotonic(), counters()
        samples.append((now, latest))
        while len(samples) > 2 and now - samples[1][0] >= window:
            samples.popleft()
        start, first = samples[0]
        if now - start >= window:
            rates = {k: (latest[k] - first.get(k, 0)) / (now - start) for k in latest}
            if rates and all(r >= at_least for r in rates.values()):
                return now - since, rates
    return None, rates


def sampled(counters: Callable[[], dict], seconds: float, step: float = 0.05) -> list[tuple[float, dict]]:
    """(seconds since the start, counters) every `step` s for `seconds`."""
    since = time.monotonic()
    trace = [(0.0, counters())]
    while trace[-1][0] < seconds:
        time.sleep(step)
        trace.append((time.monotonic() - since, counters()))
    return trace


def first_at_least(trace: list[tuple[float, dict]], at_least: dict | float, window: float = 0.5) -> float | None:
    """The first time in `trace` at which every key's rate over the last `window` s was at least its
    level (`at_least[key]`, or one level for all), as seconds_until would have seen it; None: never."""
    first = 0
    for now, latest in trace[1:]:
        while first + 1 < len(trace) and now - trace[first + 1][0] >= window:
            first += 1
        start, earlier = trace[first]
        if now - start < window:
            continue
        levels = at_least if isinstance(at_least, dict) else dict.fromkeys(latest, at_least)
        if latest and all((latest[k] - earlier.get(k, 0)) / (now - start) >= levels[k] for k in latest):
            return now
    return None


def tail_rates(trace: list[tuple[float, dict]], seconds: float) -> dict:
    """Each key's rate over the last `seconds` of `trace`."""
    end, last = trace[-1]
    start, first = next((t, c) for t, c in trace if t >= end - seconds)
    return {k: (last[k] - first.get(k, 0)) / (end - start) for k in last}


def mean_rates(counters: Callable[[], dict], seconds: float) -> dict:
    before, t0 = counters(), time.monotonic()
    time.sleep(seconds)
    after, t1 = counters(), time.monotonic()
    return {k: (after[k] - before.get(k, 0)) / (t1 - t0) for k in after}


def interval_rates(counters: Callable[[], dict], seconds: float, step: float = 0.5) -> list[dict]:
    """Each key's rate (bytes/s) over each of consecutive `step`-second intervals for `seconds`."""
    out = []
    before, t0 = counters(), time.monotonic()
    for _ in range(max(1, round(seconds / step))):
        time.sleep(max(0.0, t0 + step - time.monotonic()))
        after, t1 = counters(), time.monotonic()
        out.append({k: (after[k] - before.get(k, 0)) / (t1 - t0) for k in after})
        before, t0 = after, t1
    return out


def steady_ratio(intervals: list[dict], first: str, second: str, least: float) -> tuple[float | None, int]:
    """The median of first/second over the intervals where both moved at least `least` bytes/s, and
    how many those were (None, 0 if none)."""
    ratios = sorted(i[first] / i[second] for i in intervals if i[first] >= least and i[second] >= least)
    if not ratios:
        return None, 0
    middle = len(ratios) // 2
    median = ratios[middle] if len(ratios) % 2 else (ratios[middle - 1] + ratios[middle]) / 2
    return median, len(ratios)


# A window of a few seconds can fall on a moment when a client is not backlogged (its JVM descheduled
# on a busy host, a write pipeline changing blocks). Wrong weights (an equal split, say) miss every one.
SPLIT_WINDOWS = 3


def first_window_that_holds(measure: Callable[[], Window], missed: Callable[[Window], object], what: str,
                            windows: int = SPLIT_WINDOWS) -> Window:
    """measure() until missed(its result) is falsy (the split holds), up to `windows` times; that
    result. Each miss is printed; the last one fails with AssertionError."""
    for attempt in range(1, windows + 1):
        result = measure()
        miss = missed(result)
        if not miss:
            return result
        print(f"{what}: window {attempt} of {windows} missed: {miss}")
    raise AssertionError(f"{what}: the split held in none of {windows} windows; the last missed: {miss}")


def assertion_missed(check: Callable[[Window], None]) -> Callable[[Window], str | None]:
    """A `missed` for first_window_that_holds from a check that asserts: its message, or None."""
    def missed(result: Window) -> str | None:
        try:
            check(result)
        except AssertionError as e:
            return str(e) or "an assertion failed"
        return None
    return missed


class ClientBytes:
    """Bytes a client process has read (`rchar`) or written (`wchar`) so far; its last value once it is gone."""

    def __init__(self, pid: int, field: str):
        self.pid, self.field, self.last = pid, field, 0

    def __call__(self) -> int:
        try:
            with open(f"/proc/{self.pid}/io") as f:
                for line in f:
                    key, _, value = line.partition(":")
                    if key == self.field:
                        self.last = int(value)
        except OSError:
            pass   # exited: its last count stands
        return self.last


def block_files(hdfs) -> set[str]:
    """Every block file (blk_*, not .meta) on the cluster's DataNodes now."""
    return {os.path.join(directory, name) for dn in hdfs.datanodes for data_dir in dn.data_dirs
            for directory, _, names in os.walk(data_dir)
            for name in names if name.startswith("blk_") and not name.endswith(".meta")}


class CacheDropper:
    """Drops FILES from the page cache every `interval` s while in use, so a reader that re-reads them
    keeps reading the disk. The DataNode's own drop-behind (dfs.datanode.drop.cache.behind.reads) needs
    Hadoop's native library, which the testbed does not have."""

    def __init__(self, files: set[str], interval: float = 0.25):
        self.files, self.interval = files, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cache-dropper", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            for path in self.files:
                try:
                    fd = os.open(path, os.O_RDONLY)
                except OSError:
                    continue   # a block moved away (finalized, deleted)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)

    def __enter__(self) -> "CacheDropper":
        self._thread.start()
        return self

    def __exit__(self, *_) -> None:
        self._stop.set()
        self._thread.join()
