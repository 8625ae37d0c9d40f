"""Watching shares move on a real HDFS: how soon a rate reaches a level, and what clients see.

- `seconds_until(counters, at_least, within)`: seconds until every key's rate over a sliding window
  (counters sampled every 50 ms) was at least `at_least`; disjoint windows would add up to a
  window's length to what is measured.
- `ClientBytes`: bytes a client process moved as the kernel counts them for it (/proc/PID/io:
  rchar for a writer reading its local file, wchar for a reader writing it out): the client's side,
  independent of vnode-sync's own counters.
"""

import collections
import time
from collections.abc import Callable


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


def mean_rates(counters: Callable[[], dict], seconds: float) -> dict:
    before, t0 = counters(), time.monotonic()
    time.sleep(seconds)
    after, t1 = counters(), time.monotonic()
    return {k: (after[k] - before.get(k, 0)) / (t1 - t0) for k in after}


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
