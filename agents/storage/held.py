"""Held at the limit: per VNode, whether it is held now and for how long in all, from each usage sample.

Three cases, by what the backend can tell (VNodeUsage.held_source):
- measured (the DataNode's throttler times every wait): held time grows by the throttle's own wait
  time over the interval, at most the interval's length (waits of concurrent transfers overlap);
  held now is the backend's decision.
- estimated by the backend (Lustre TBF, from its RPC counters against the rule's rate): held time
  grows by the whole interval while the backend says held.
- nothing (cgroups: the kernel counts bytes, not throttled time): the agent estimates, and a VNode
  is held over an interval when any limited device and direction moved at least HIT_FRACTION of
  its limit (bytes/s or IOs/s), measured over the last RATE_SPAN_SECONDS. A cgroup v1 throttle
  lets a VNode run at 95-105 % of its limit (10.5 MB/s for 10 MiB/s, docs/architecture), so 0.9
  catches it held and leaves a user reading well below its share out; the span keeps one I/O's
  size from deciding (1 MiB reads at 20 MB/s are 10 % of a 0.5 s interval); a VNode held stays
  held until it falls below STILL_HELD_FRACTION, so a loaded host's jitter does not make it flap.
  Weights (BFQ) are no limit: a weight-only VNode is never held.
"""

import collections
from dataclasses import dataclass, field

from vnode_sync.kernel.backend import HELD_ESTIMATED, HELD_MEASURED, VNodeUsage
from vnode_sync.kernel.types import DeviceLimits, DeviceNumber, IoCounters

HIT_FRACTION = 0.9
STILL_HELD_FRACTION = 0.8
RATE_SPAN_SECONDS = 2.0


@dataclass(frozen=True)
class HeldState:
    held: bool            # over the last interval
    seconds: float        # cumulative held seconds since the agent started
    source: str           # HELD_MEASURED or HELD_ESTIMATED


@dataclass
class _Previous:
    at: float
    devices: dict[DeviceNumber, IoCounters]
    wait: float | None
    seconds: float
    held: bool = False
    # (at, devices) of the samples within RATE_SPAN_SECONDS before this one, oldest first
    recent: collections.deque = field(default_factory=collections.deque)


class HeldClock:
    def __init__(self):
        self._previous: dict[str, _Previous] = {}

    def update(self, usage: dict[str, VNodeUsage], limits: dict[str, list[DeviceLimits]],
               now: float) -> dict[str, HeldState]:
        """Every VNode of `usage` that has a limit or a measured wait, as of `now` (monotonic seconds)."""
        states = {}
        for vnode, measured in usage.items():
            wanted = [l for l in limits.get(vnode, ()) if l.read_bps or l.write_bps or l.read_iops or l.write_iops]
            if not wanted and measured.held_source is None:
                continue
            wait = _wait(measured)
            previous = self._previous.get(vnode)
            seconds = previous.seconds if previous else 0.0
            held = measured.held_at_limit   # the backend's word; the first sample has no interval
            source = HELD_MEASURED if measured.held_source == HELD_MEASURED else HELD_ESTIMATED
            if previous is not None and now > previous.at:
                interval = now - previous.at
                if measured.held_source == HELD_MEASURED:
                    held = measured.held_at_limit
                    if wait is not None and previous.wait is not None and wait >= previous.wait:
                        seconds += min(interval, wait - previous.wait)
                else:
                    since, then = _span_start(previous, now)
                    fraction = STILL_HELD_FRACTION if previous.held else HIT_FRACTION
                    held = measured.held_at_limit or (measured.held_source is None and _at_limit(
                        then, measured.devices, wanted, now - since, fraction))
                    seconds += interval if held else 0.0
            recent = previous.recent if previous else collections.deque()
            if previous is not None:
                recent.append((previous.at, previous.devices))
                while len(recent) > 1 and recent[1][0] <= now - RATE_SPAN_SECONDS:
                    recent.popleft()
            self._previous[vnode] = _Previous(now, measured.devices, wait, seconds, held, recent)
            states[vnode] = HeldState(held, seconds, source)
        for gone in set(self._previous) - set(usage):
            del self._previous[gone]
        return states


def _span_start(previous: _Previous, now: float) -> tuple[float, dict[DeviceNumber, IoCounters]]:
    """The newest sample at least RATE_SPAN_SECONDS before `now`, else the oldest one kept."""
    if previous.at <= now - RATE_SPAN_SECONDS or not previous.recent:
        return previous.at, previous.devices
    for at, devices in reversed(previous.recent):
        if at <= now - RATE_SPAN_SECONDS:
            return at, devices
    return previous.recent[0]


def _wait(measured: VNodeUsage) -> float | None:
    if measured.read_wait_seconds is None and measured.write_wait_seconds is None:
        return None
    return (measured.read_wait_seconds or 0.0) + (measured.write_wait_seconds or 0.0)


def _at_limit(before: dict[DeviceNumber, IoCounters], after: dict[DeviceNumber, IoCounters],
              limits: list[DeviceLimits], interval: float, fraction: float) -> bool:
    for limit in limits:
        old, new = before.get(limit.device), after.get(limit.device)
        if old is None or new is None:
            continue
        for allowed, moved in ((limit.read_bps, new.read_bytes - old.read_bytes),
                               (limit.write_bps, new.write_bytes - old.write_bytes),
                               (limit.read_iops, new.read_ios - old.read_ios),
                               (limit.write_iops, new.write_ios - old.write_ios)):
            if allowed and moved >= 0 and moved >= fraction * allowed * interval:
                return True
    return False
