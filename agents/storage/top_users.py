"""Which users a storage agent's metrics name, and what the users it does not name add up to.

A node with 1,000 users would serve a dozen series for each (docs/metrics.md, Cardinality). The page
names the `top_users` users held or busiest at the last usage sample (held first, then by bytes/s
moved), and the default VNode; every other user is folded into user="(other)". So that (other) and
the node's totals stay counters while users move between named and folded, they grow by each VNode's
increase from one sample to the next (a VNode made anew counts from zero): over any span, the node's
increase is its named users' plus (other)'s. A sample is folded once, whatever the scrapes.
"""

import heapq
import threading
from dataclasses import dataclass, field

from vnode_sync.kernel.backend import user_of_vnode
from vnode_sync.kernel.types import DeviceNumber, IoCounters

OTHER_USER = "(other)"   # parentheses: no user name can be this (vnode_sync.validation.user_name)
IO_FIELDS = ("read_bytes", "write_bytes", "read_ios", "write_ios")


@dataclass
class Folded:
    """Cumulative counts of a set of VNodes, grown by their increases."""

    devices: dict[DeviceNumber, list[float]] = field(default_factory=dict)   # IO_FIELDS order
    held_seconds: float = 0.0
    held_source: str | None = None
    read_wait_seconds: float = 0.0
    write_wait_seconds: float = 0.0
    measured_waits: bool = False

    def add_io(self, device: DeviceNumber, increase: tuple[float, ...]) -> None:
        counts = self.devices.setdefault(device, [0.0] * len(IO_FIELDS))
        for i, value in enumerate(increase):
            counts[i] += value


@dataclass(frozen=True)
class View:
    """What the scrapes of one sample serve beyond the named VNodes' own series."""

    named: frozenset[str]        # VNodes served by name: the top users and the default VNode
    other: Folded                # every other VNode, folded
    node: Folded                 # every VNode
    other_held: int = 0          # folded users held now
    other_threads: int = 0       # handler threads placed in folded VNodes
    users: int = 0               # users with a VNode on the node
    users_held: int = 0          # of them, held now


def _increase(now: float, before: float | None) -> float:
    """A counter's increase; a counter that fell was made anew, so all of it is new."""
    return now if before is None or now < before else now - before


@dataclass
class _Last:
    devices: dict[DeviceNumber, IoCounters]
    held_seconds: float | None
    waits: tuple[float | None, float | None]


class TopUsers:
    def __init__(self, top_users: int):
        self.top_users = top_users
        self._lock = threading.Lock()   # scrapes run on the endpoint's threads, perhaps at once
        self._sample = None
        self._view: View | None = None
        self._last: dict[str, _Last] = {}
        self._other, self._node = Folded(), Folded()

    def view(self, sample) -> View:
        """The view of `sample` (an agents.storage.reconciler.UsageSample), folding it the first time."""
        with self._lock:
            if sample is not self._sample:
                self._view = self._fold(sample)
                self._sample = sample
            return self._view

    def named(self, sample) -> frozenset[str]:
        """Held users first, then the busiest (bytes/s over the sample's interval), then by name."""
        def rank(vnode: str):
            demand = sample.demand.get(vnode)
            if demand is None:
                return (True, 0.0, vnode)
            moved = sum(r.rate + w.rate for r, w in demand.devices.values())
            return (not demand.held, -moved, vnode)
        users = [v for v in set(sample.usage) | set(sample.limits) if user_of_vnode(v)]
        chosen = heapq.nsmallest(self.top_users, users, key=rank)
        return frozenset(chosen) | {v for v in set(sample.usage) | set(sample.limits) if not user_of_vnode(v)}

    def _fold(self, sample) -> View:
        named = self.named(sample)
        last: dict[str, _Last] = {}
        for vnode, usage in sample.usage.items():
            before = self._last.get(vnode)
            into = (self._node,) if vnode in named else (self._node, self._other)
            for device, counters in usage.devices.items():
                earlier = before.devices.get(device) if before else None
                increase = tuple(_increase(getattr(counters, f), getattr(earlier, f) if earlier else None)
                                 for f in IO_FIELDS)
                for folded in into:
                    folded.add_io(device, increase)
            demand = sample.demand.get(vnode)
            held = demand.seconds if demand is not None and demand.source is not None else None
            if held is not None:
                grown = _increase(held, before.held_seconds if before else None)
                for folded in into:
                    folded.held_seconds += grown
                    folded.held_source = demand.source
            waits = (usage.read_wait_seconds, usage.write_wait_seconds)
            if waits != (None, None):
                grown_read = _increase(waits[0] or 0.0, before.waits[0] if before else None)
                grown_write = _increase(waits[1] or 0.0, before.waits[1] if before else None)
                for folded in into:
                    folded.read_wait_seconds += grown_read
                    folded.write_wait_seconds += grown_write
                    folded.measured_waits = True
            last[vnode] = _Last(dict(usage.devices), held, waits)
        self._last = last
        folded_vnodes = [v for v in set(sample.usage) | set(sample.limits) if v not in named]
        users = [v for v in set(sample.usage) | set(sample.limits) if user_of_vnode(v)]
        return View(named, _copy(self._other), _copy(self._node),
                    other_held=sum(1 for v in folded_vnodes if v in sample.held and sample.held[v].held),
                    other_threads=sum(sample.threads.get(v, 0) for v in folded_vnodes),
                    users=len(users), users_held=sum(1 for v in users if v in sample.held and sample.held[v].held))


def _copy(folded: Folded) -> Folded:
    """A snapshot for the view: the next sample grows the live one while a scrape may still read it."""
    return Folded({d: list(c) for d, c in folded.devices.items()}, folded.held_seconds, folded.held_source,
                  folded.read_wait_seconds, folded.write_wait_seconds, folded.measured_waits)
