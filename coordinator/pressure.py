"""Who is held back: each (node, user)'s held time from the agents' reports, and the users sorted
by how hard they press on their share (the Pressure RPC, `vnodectl top`).

Agents report a cumulative held time per VNode (HeldTime: wall-clock seconds held at the limit
since the agent started, measured by the backend or estimated by the agent). The book keeps, per
(node, user) ever held, one sample every HISTORY_STEP_SECONDS for MAX_WINDOW_SECONDS, made
monotonic across agent restarts, so "held for how long in the last minutes" is one subtraction.
Pairs never held keep nothing.
"""

import collections
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from vnode_sync.errors import InvalidArgument
from vnode_sync.wire import vnode_pb2 as pb

DEFAULT_WINDOW_SECONDS = 300.0
MAX_WINDOW_SECONDS = 3600.0
# Held time within a window is exact to this step (the window's start falls between two samples).
HISTORY_STEP_SECONDS = 5.0


@dataclass
class _Held:
    source: int
    offset: float = 0.0          # held seconds reported before the agent last restarted
    reported: float = 0.0        # the agent's last cumulative value
    now: bool = False
    since: float = 0.0           # start of the current held stretch (unix seconds)
    samples: collections.deque = field(default_factory=collections.deque)   # (unix seconds, monotonic total)

    @property
    def total(self) -> float:
        return self.offset + self.reported


@dataclass(frozen=True)
class NodeShareView:
    """What the coordinator knows of one node when it answers: measured rates, allowed rates, held."""

    node_id: str
    rates: Mapping[str, tuple[float, float]]      # user -> measured (read, write) bytes/s
    allowed: Mapping[str, tuple[int, int]]        # user -> allocation or target (read, write) bytes/s


class PressureBook:
    def __init__(self, clock: Callable[[], float] = time.time):
        self._clock = clock
        self._lock = threading.Lock()
        self._held: dict[str, dict[str, _Held]] = {}   # node -> user -> held history
        self._last_report: dict[str, float] = {}   # node -> when its previous report was sampled
        self.started = clock()

    def now(self) -> float:
        return self._clock()

    def observe(self, report: pb.UsageReport, known_users: set[str]) -> None:
        """One usage report: each listed VNode's cumulative held time (users unknown here are ignored).
        VNodes the report no longer lists (users gone from the node) are forgotten."""
        at = report.sampled_at_unix or self._clock()
        held_now = {u.user for u in report.usage if u.held_at_limit}
        with self._lock:
            previous = self._last_report.get(report.node_id)
            self._last_report[report.node_id] = at
            node = self._held.setdefault(report.node_id, {})
            listed = set()
            for held in report.held:
                if held.user and held.user not in known_users:
                    continue
                listed.add(held.user)
                entry = node.get(held.user)
                if entry is None:
                    if held.held_seconds <= 0:
                        continue   # never held: nothing to keep
                    entry = node[held.user] = _Held(held.source)
                    if previous is not None:
                        # Pairs never held are not kept, so a pair first seen held after the node's first
                        # report was at 0 in the previous one (or had no VNode yet).
                        entry.samples.append((previous, 0.0))
                if held.held_seconds < entry.reported:
                    entry.offset += entry.reported   # the agent restarted: its counter began again
                entry.reported, entry.source = held.held_seconds, held.source
                is_held = held.user in held_now
                if is_held and not entry.now:
                    entry.since = at
                entry.now = is_held
                if not entry.samples or at - entry.samples[-1][0] >= HISTORY_STEP_SECONDS:
                    entry.samples.append((at, entry.total))
                while len(entry.samples) > 1 and entry.samples[1][0] <= at - MAX_WINDOW_SECONDS:
                    entry.samples.popleft()
            for gone in set(node) - listed:
                del node[gone]

    def held(self, node_id: str, user: str, window: float, now: float) -> tuple[float, bool, float, int]:
        """(held seconds within the last `window` s, held now, held since, source) for one pair."""
        with self._lock:
            entry = self._held.get(node_id, {}).get(user)
            if entry is None:
                return 0.0, False, 0.0, pb.HELD_SOURCE_UNSPECIFIED
            start = now - window
            base = entry.samples[0][1] if entry.samples else entry.total
            for at, total in entry.samples:
                if at > start:
                    break
                base = total
            return max(0.0, entry.total - base), entry.now, entry.since if entry.now else 0.0, entry.source

    def held_pairs(self) -> list[tuple[str, str]]:
        with self._lock:
            return [(node, user) for node, users in self._held.items() for user in users]

    def held_now(self) -> dict[str, int]:
        """user -> the number of nodes where it is held now."""
        counts: dict[str, int] = {}
        with self._lock:
            for users in self._held.values():
                for user, entry in users.items():
                    if entry.now:
                        counts[user] = counts.get(user, 0) + 1
        return counts


def window_of(requested: float) -> float:
    if requested == 0:
        return DEFAULT_WINDOW_SECONDS
    if not math.isfinite(requested) or not 0 < requested <= MAX_WINDOW_SECONDS:
        raise InvalidArgument(f"invalid window {requested!r} s: must be above 0 and at most {MAX_WINDOW_SECONDS:.0f}")
    return requested


def _ratio(rate: float, allowed: int) -> float:
    return rate / allowed if allowed else 0.0


def rank(users: Iterable[tuple[str, int]], nodes: Iterable[NodeShareView], book: PressureBook, window: float,
         limit: int = 0, now: float | None = None) -> list[pb.UserPressure]:
    """Users (name, priority) that move bytes or were held within the window, hardest pressed first:
    held now on most nodes, then the longest held within the window, then the highest rate/allowed."""
    now = book.now() if now is None else now
    priorities = dict(users)
    held_pairs: dict[str, set[str]] = {}
    for node_id, user in book.held_pairs():
        held_pairs.setdefault(node_id, set()).add(user)
    rows: dict[str, pb.UserPressure] = {}
    for view in nodes:
        for user in set(view.rates) | held_pairs.get(view.node_id, set()):
            if user not in priorities:
                continue
            read, write = view.rates.get(user, (0.0, 0.0))
            allowed_read, allowed_write = view.allowed.get(user, (0, 0))
            seconds, is_held, since, source = book.held(view.node_id, user, window, now)
            if not (read or write or seconds or is_held):
                continue
            row = rows.get(user)
            if row is None:
                row = rows[user] = pb.UserPressure(user=user, priority=priorities[user])
            row.nodes.append(pb.NodePressure(node_id=view.node_id, read_bps=read, write_bps=write,
                                             allowed_read_bps=allowed_read, allowed_write_bps=allowed_write,
                                             held_at_limit=is_held, held_since_unix=since, held_seconds=seconds,
                                             held_source=source))
            row.pressure = max(row.pressure, _ratio(read, allowed_read), _ratio(write, allowed_write))
            row.held_seconds = max(row.held_seconds, seconds)
            row.nodes_held += is_held
    ranked = sorted(rows.values(), key=lambda r: (-r.nodes_held, -r.held_seconds, -r.pressure, r.user))
    for row in ranked:
        row.nodes.sort(key=lambda n: (not n.held_at_limit, -n.held_seconds, n.node_id))
    return ranked[:limit] if limit else ranked
