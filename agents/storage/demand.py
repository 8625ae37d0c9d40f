"""The agent's one estimate of what each VNode wants: per device and direction its rate, whether it
was held, and per VNode its held time in all. Every backend feeds it the same VNodeUsage samples.

Held, per direction over the last interval, by what the backend can tell (VNodeUsage.held_source),
with the one rule of vnode_sync.kernel.held:
- measured (the DataNode's throttle times every wait): held when its waits in that direction took at
  least WAIT_FRACTION of the interval; held time grows by the waits, at most the interval's length
  (waits of concurrent transfers overlap).
- the backend's word (Lustre TBF, from its RPC counters against the rule's rate: one bucket for both
  directions): held in each direction that moved bytes; held time grows by the whole interval.
- nothing (cgroups: the kernel counts bytes, not throttled time): held in a direction whose rate over
  the last RATE_SPAN_SECONDS, or over the last FLOW_SPAN_SECONDS, reached HIT_FRACTION of its limit
  (bytes/s or IOs/s). The long span keeps one I/O's size from deciding for a steady reader (1 MiB
  reads at 20 MB/s are 10 % of a 0.5 s interval); the short one sees at once a user that comes back
  from idle at its cap (its long-span rate still holds its idle time), so a cap-only node's next
  step gives it its share. Weights (BFQ) are no limit: a weight-only VNode is never held.

Demand, what the center divides: a direction that was not held moved all it wanted, so its demand is
its rate; a held one wanted more than it moved. How much more, only measured waits tell: a client
that waited a fraction f of the interval moved for the rest, so it would have moved rate / (1 - f)
unheld; waits that fill the interval (or overlap, several transfers at once) say only that it wants
more, as does every other backend: HELD_GROWTH times its rate. Both are lower bounds (the center gives
no standby weight there, so it is raised again next period if it stays held; a bulk reader reaches its
share in a few periods). A barely held user is not taken to want four times what it moved: the center
would move its weight to where it wants little and away from where it wants much (measured in
benchmarks.site_simulation: a light user's total fell to half its fair one for three periods).
"""

import collections
from dataclasses import dataclass, field

from vnode_sync.kernel.backend import HELD_ESTIMATED, HELD_MEASURED, VNodeUsage
from vnode_sync.kernel.held import at_limit, waited_held
from vnode_sync.kernel.types import DeviceLimits, DeviceNumber, IoCounters

RATE_SPAN_SECONDS = 2.0
# Rates sent to the center are over this span (at least one interval): a user that stops is seen idle
# within it, so its share is lent without waiting for a 2 s average to decay.
FLOW_SPAN_SECONDS = 0.5
HELD_GROWTH = 4.0


@dataclass(frozen=True)
class Flow:
    """One direction of one VNode on one device over the last span."""

    rate: float          # bytes/s
    held: bool = False
    growth: float = HELD_GROWTH   # if held: what it wants per byte/s it moved

    @property
    def demand(self) -> float:
        return self.rate * self.growth if self.held else self.rate


def held_growth(waited: float | None, interval: float) -> float:
    """What a held direction wants per byte/s it moved, from the seconds it waited in an interval
    (None: the backend does not time its waits)."""
    if waited is None or waited >= interval * (1 - 1 / HELD_GROWTH):
        return HELD_GROWTH
    return interval / (interval - waited)


@dataclass(frozen=True)
class VNodeDemand:
    devices: dict[DeviceNumber, tuple[Flow, Flow]]   # device -> (read, write)
    held: bool           # in any direction over the last interval
    seconds: float       # cumulative held seconds since the agent started
    source: str | None   # HELD_MEASURED, HELD_ESTIMATED, or None: neither limited nor measured (never held)


@dataclass
class _Previous:
    at: float
    devices: dict[DeviceNumber, IoCounters]
    waits: tuple[float, float] | None
    seconds: float
    held: frozenset = frozenset()     # (device, direction) held at the last sample
    # (at, devices) of the samples within RATE_SPAN_SECONDS before this one, oldest first
    recent: collections.deque = field(default_factory=collections.deque)
    # (at, devices) of the looks between reports since this one, oldest first: rates span them, intervals do not
    looks: list = field(default_factory=list)


class DemandEstimator:
    def __init__(self):
        self._previous: dict[str, _Previous] = {}
        self._last_look: dict[str, _Previous] = {}   # what the last look would keep, per VNode

    def update(self, usage: dict[str, VNodeUsage], limits: dict[str, list[DeviceLimits]],
               now: float, keep: bool = True) -> dict[str, VNodeDemand]:
        """Every VNode of `usage`, as of `now` (monotonic seconds). `keep`: the sample is the next
        interval's start; a look between reports (False) only adds a sample that later rates may
        span, so held and held time still count over the intervals between reports, unless the
        look is reported after all (keep_last_look)."""
        out, sampled = {}, {}
        for vnode, measured in usage.items():
            limited = {l.device: l for l in limits.get(vnode, ())
                       if l.read_bps or l.write_bps or l.read_iops or l.write_iops}
            source = measured.held_source or (HELD_ESTIMATED if limited else None)
            waits = _waits(measured)
            previous = self._previous.get(vnode)
            seconds = previous.seconds if previous else 0.0
            flows: dict[DeviceNumber, tuple[Flow, Flow]] = {}
            held: set = set()
            if previous is not None and now > previous.at:
                interval = now - previous.at
                since, then = _span_start(previous, now, RATE_SPAN_SECONDS)
                span = now - since
                flow_since, flow_then = _span_start(previous, now, FLOW_SPAN_SECONDS)
                flow_span = now - flow_since
                waited = _waited(previous.waits, waits)
                for dev, counters in measured.devices.items():
                    moved = _moved(then.get(dev), counters)
                    last = _moved(previous.devices.get(dev), counters)
                    recent = _moved(flow_then.get(dev), counters)
                    for direction in (0, 1):
                        if _held(measured, direction, ((moved, span), (recent, flow_span)), last, interval, waited,
                                 limited.get(dev), (dev, direction) in previous.held):
                            held.add((dev, direction))
                        flows[dev] = tuple(Flow(recent[d] / flow_span, (dev, d) in held,
                                            _growth(measured, waited, d, interval)) for d in (0, 1))
                # The backend's word is about the VNode: its time counts even in an interval with no bytes.
                if held or (measured.held_source == HELD_ESTIMATED and measured.held_at_limit):
                    seconds += min(interval, sum(waited)) if measured.held_source == HELD_MEASURED and waited \
                        else interval
            else:   # no interval yet: only the backend's word
                flows = {dev: (Flow(0.0), Flow(0.0)) for dev in measured.devices}
            sampled[vnode] = _Previous(now, measured.devices, waits, seconds, frozenset(held))
            says_held = measured.held_at_limit and (previous is None or measured.held_source != HELD_MEASURED)
            out[vnode] = VNodeDemand(flows, bool(held) or says_held, seconds, source)
        if keep:
            self._keep(sampled)
        else:
            for vnode, sample in sampled.items():
                previous = self._previous.get(vnode)
                if previous is not None and sample.at > previous.at:
                    previous.looks.append((sample.at, sample.devices))
            self._last_look = sampled
        return out

    def keep_last_look(self) -> None:
        """The last look is reported after all: it starts the next interval, as if it had been kept."""
        self._keep(self._last_look)

    def _keep(self, sampled: dict[str, _Previous]) -> None:
        """Each VNode's sample starts its next interval; the samples before it within RATE_SPAN_SECONDS
        (the last interval's start, and the looks since, but the sample's own) are its recent ones."""
        for vnode, sample in sampled.items():
            previous = self._previous.get(vnode)
            recent = previous.recent if previous else collections.deque()
            if previous is not None:
                recent.append((previous.at, previous.devices))
                recent.extend(look for look in previous.looks if look[0] < sample.at)
                while len(recent) > 1 and recent[1][0] <= sample.at - RATE_SPAN_SECONDS:
                    recent.popleft()
            sample.recent = recent
            self._previous[vnode] = sample
        for gone in set(self._previous) - set(sampled):
            del self._previous[gone]
        self._last_look = {}


def _held(measured: VNodeUsage, direction: int, spans: tuple[tuple[tuple[int, int, int, int], float], ...],
          last: tuple[int, int, int, int], interval: float, waited: tuple[float, float] | None,
          limit: DeviceLimits | None, was_held: bool) -> bool:
    """`spans`: (what it moved, seconds) over each span its rate is judged on."""
    if measured.held_source == HELD_MEASURED:
        return waited is not None and waited_held(waited[direction], interval)
    if measured.held_source == HELD_ESTIMATED or measured.held_at_limit:
        return measured.held_at_limit and last[direction] > 0
    if limit is None:
        return False
    allowed_bytes, allowed_ios = (limit.read_bps, limit.read_iops) if direction == 0 else (limit.write_bps,
                                                                                          limit.write_iops)
    return any(at_limit(moved[direction], allowed_bytes * span, was_held) or
               at_limit(moved[2 + direction], allowed_ios * span, was_held) for moved, span in spans)


def _growth(measured: VNodeUsage, waited: tuple[float, float] | None, direction: int, interval: float) -> float:
    timed = measured.held_source == HELD_MEASURED and waited is not None
    return held_growth(waited[direction] if timed else None, interval)


def _moved(old: IoCounters | None, new: IoCounters) -> tuple[int, int, int, int]:
    """Bytes and IOs since `old` (read, write, read IOs, write IOs); counters that went back (a VNode made
    anew) count from 0."""
    if old is None:
        return 0, 0, 0, 0
    pairs = ((old.read_bytes, new.read_bytes), (old.write_bytes, new.write_bytes), (old.read_ios, new.read_ios),
             (old.write_ios, new.write_ios))
    return tuple(b - a if b >= a else 0 for a, b in pairs)


def _span_start(previous: _Previous, now: float, span: float) -> tuple[float, dict[DeviceNumber, IoCounters]]:
    """The newest sample at least `span` seconds before `now`, else the oldest one kept."""
    for at, devices in reversed(previous.looks):
        if at <= now - span:
            return at, devices
    if previous.at <= now - span or not previous.recent:
        return previous.at, previous.devices
    for at, devices in reversed(previous.recent):
        if at <= now - span:
            return at, devices
    return previous.recent[0]


def _waits(measured: VNodeUsage) -> tuple[float, float] | None:
    if measured.read_wait_seconds is None and measured.write_wait_seconds is None:
        return None
    return measured.read_wait_seconds or 0.0, measured.write_wait_seconds or 0.0


def _waited(before: tuple[float, float] | None, after: tuple[float, float] | None) -> tuple[float, float] | None:
    if before is None or after is None or after[0] < before[0] or after[1] < before[1]:
        return None
    return after[0] - before[0], after[1] - before[1]
