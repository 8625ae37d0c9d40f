"""The one usage ledger: every storage node's usage as its agent reported it, booked once per report.

Per (node, user, device): the measured rates, the held flags and the demand of the agent's demand
estimator (agents/storage/demand.py), from the report's demand summary (only the entries that
moved: booking costs what changed, not the node's users). Per (node, user): the held time, one sample every
HISTORY_STEP_SECONDS for MAX_WINDOW_SECONDS, made monotonic across agent restarts, so "held for how
long in the last minutes" is one subtraction (pairs never held keep nothing). Status, the Pressure
RPC (`vnodectl top`), the metrics and the work-conserving control loop all read this book; "held"
is stored here once.
"""

import collections
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from vnode_sync.wire import vnode_pb2 as pb

HISTORY_STEP_SECONDS = 5.0
MAX_WINDOW_SECONDS = 3600.0
# A node that has not reported for this long moves nothing as far as the book says.
STALE_SECONDS = 10.0


@dataclass(frozen=True)
class Flow:
    """One user on one device of one node, as last reported."""

    read_bps: float = 0.0
    write_bps: float = 0.0
    read_held: bool = False
    write_held: bool = False
    read_demand_bps: float = 0.0
    write_demand_bps: float = 0.0

    @property
    def held(self) -> bool:
        return self.read_held or self.write_held


@dataclass(frozen=True)
class PairHeld:
    """How long one user was held on one node within a window, and whether it is held now."""

    seconds: float = 0.0         # held within the window
    now: bool = False
    since: float = 0.0           # start of the current held stretch (unix seconds; 0: not held now)
    source: int = pb.HELD_SOURCE_UNSPECIFIED   # measured by the backend or estimated by the agent


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


@dataclass
class _Node:
    flows: dict[tuple[str, str], Flow] = field(default_factory=dict)
    held_devices: dict[str, set[str]] = field(default_factory=dict)   # user -> devices where a flow is held
    held: dict[str, _Held] = field(default_factory=dict)
    last_report: float | None = None      # when its previous report was sampled (unix seconds)


FlowListener = Callable[[str, bool, dict[tuple[str, str], Flow], list[str]], None]


class UsageLedger:
    def __init__(self, clock: Callable[[], float] = time.time):
        self._clock = clock
        self._lock = threading.Lock()
        self._nodes: dict[str, _Node] = {}
        self._listeners: list[FlowListener] = []
        # user -> [read, write] bytes/s summed over every node's flows, kept as flows are booked (the
        # metrics read each user's cluster-wide rate without adding up nodes x users at a scrape)
        self._user_rates: dict[str, list[float]] = {}
        self.started = clock()

    def on_flows(self, listener: FlowListener) -> None:
        """`listener(node_id, full, changed, gone)` after each report, with the (user, device) flows it
        changed (full: the node's only ones) and the users gone from the node: the control loop keeps
        its arrays current in the cost of what changed."""
        self._listeners.append(listener)

    def now(self) -> float:
        return self._clock()

    # ---- booking -------------------------------------------------------------------

    def observe(self, report: pb.UsageReport, known_users: set[str]) -> None:
        """Book one report (users unknown here are ignored). The listeners are told after the book's
        lock is released (they take their own), in the order reports are observed: one caller, the
        event loop, observes them."""
        at = report.sampled_at_unix or self._clock()
        summary = report.demand
        with self._lock:
            node = self._nodes.setdefault(report.node_id, _Node())
            previous, node.last_report = node.last_report, at
            present = self._book_summary(node, summary, known_users)
            self._book_held(node, report, known_users, at, previous, present)
            changed: dict[tuple[str, str], Flow] = {}
            if self._listeners:
                if summary.full:
                    changed = dict(node.flows)
                else:
                    listed = set(zip((summary.users[i] for i in summary.user_index),
                                     (summary.devices[i] for i in summary.device_index)))
                    changed = {k: node.flows[k] for k in listed if k in node.flows}
            listeners = list(self._listeners)
        for listener in listeners:
            listener(report.node_id, summary.full, changed, list(summary.gone))

    def _count(self, user: str, flow: Flow, sign: int) -> None:
        if user:
            total = self._user_rates.setdefault(user, [0.0, 0.0])
            total[0] += sign * flow.read_bps
            total[1] += sign * flow.write_bps

    def _set_flow(self, node: _Node, key: tuple[str, str], flow: Flow) -> None:
        old = node.flows.get(key)
        if old is not None:
            self._count(key[0], old, -1)
        node.flows[key] = flow
        self._count(key[0], flow, 1)

    def _drop_flows(self, node: _Node, user: str | None = None) -> None:
        """The node's flows of `user` (None: all of them) leave the book."""
        for key, flow in node.flows.items():
            if user is None or key[0] == user:
                self._count(key[0], flow, -1)
        node.flows = {} if user is None else {k: f for k, f in node.flows.items() if k[0] != user}

    def _book_summary(self, node: _Node, summary: pb.DemandSummary, known: set[str]) -> set[str] | None:
        if summary.full:
            self._drop_flows(node)
            node.held_devices.clear()
        for user in summary.gone:
            self._drop_flows(node, user)
            node.held.pop(user, None)
            node.held_devices.pop(user, None)
        for u, d, rb, wb, rh, wh, rd, wd in zip(summary.user_index, summary.device_index, summary.read_bps,
                                                summary.write_bps, summary.read_held, summary.write_held,
                                                summary.read_demand_bps, summary.write_demand_bps):
            user, device = summary.users[u], summary.devices[d]
            if user and user not in known:
                continue
            self._set_flow(node, (user, device), Flow(rb, wb, rh, wh, rd, wd))
            held_at = node.held_devices.setdefault(user, set())
            if rh or wh:
                held_at.add(device)
            else:
                held_at.discard(device)
        return {user for user, _ in node.flows} if summary.full else None

    @staticmethod
    def _touched(report: pb.UsageReport) -> set[str] | None:
        """The users a summary report says something of (None: a full one, all)."""
        if report.demand.full:
            return None
        return set(report.demand.users) | set(report.demand.gone) | {h.user for h in report.held}

    def _book_held(self, node: _Node, report: pb.UsageReport, known: set[str], at: float,
                   previous: float | None, present: set[str] | None) -> None:
        """Held time per user; `present`: the users the node has now (None: the report does not say,
        users it does not list are as before)."""
        for held in report.held:
            if held.user and held.user not in known:
                continue
            entry = node.held.get(held.user)
            if entry is None:
                if held.held_seconds <= 0:
                    continue   # never held: nothing to keep
                entry = node.held[held.user] = _Held(held.source)
                if previous is not None:
                    # Pairs never held are not kept, so a pair first seen held after the node's first
                    # report was at 0 in the previous one (or had no VNode yet).
                    entry.samples.append((previous, 0.0))
            if held.held_seconds < entry.reported:
                entry.offset += entry.reported   # the agent restarted: its counter began again
            entry.reported, entry.source = held.held_seconds, held.source
            if not entry.samples or at - entry.samples[-1][0] >= HISTORY_STEP_SECONDS:
                entry.samples.append((at, entry.total))
            while len(entry.samples) > 1 and entry.samples[1][0] <= at - MAX_WINDOW_SECONDS:
                entry.samples.popleft()
        touched = self._touched(report)
        for user in node.held if touched is None else touched & set(node.held):
            entry, is_held = node.held[user], bool(node.held_devices.get(user))
            if is_held and not entry.now:
                entry.since = at
            entry.now = is_held
        if present is not None:
            for gone in set(node.held) - present:
                del node.held[gone]

    # ---- reading -------------------------------------------------------------------

    def flows(self, node_id: str) -> dict[tuple[str, str], Flow]:
        """(user, device) -> what the node's agent last said of it; nothing from a node gone silent."""
        with self._lock:
            node = self._nodes.get(node_id)
            if node is None or node.last_report is None or node.last_report < self._clock() - STALE_SECONDS:
                return {}
            return dict(node.flows)

    def rates(self, node_id: str) -> dict[str, tuple[float, float]]:
        """user -> measured (read, write) bytes/s on the node, summed over its devices; users moving nothing left out."""
        out: dict[str, list[float]] = {}
        for (user, _), flow in self.flows(node_id).items():
            if user and (flow.read_bps or flow.write_bps):
                total = out.setdefault(user, [0.0, 0.0])
                total[0] += flow.read_bps
                total[1] += flow.write_bps
        return {user: (r, w) for user, (r, w) in out.items()}

    def user_rates(self) -> dict[str, tuple[float, float]]:
        """user -> measured (read, write) bytes/s summed over every node; nodes gone silent left out."""
        with self._lock:
            totals = {user: list(rates) for user, rates in self._user_rates.items()}
            stale = self._clock() - STALE_SECONDS
            for node in self._nodes.values():
                if node.last_report is not None and node.last_report < stale:
                    for (user, _), flow in node.flows.items():
                        if user in totals:
                            totals[user][0] -= flow.read_bps
                            totals[user][1] -= flow.write_bps
        # Adding and taking away floats leaves dust where a user moved nothing: below a byte/s is none.
        return {user: (r if r >= 1.0 else 0.0, w if w >= 1.0 else 0.0) for user, (r, w) in totals.items()}

    def held_users(self, node_id: str) -> set[str]:
        """Users held on the node, as its reports last said."""
        with self._lock:
            node = self._nodes.get(node_id)
            if node is None or node.last_report is None or node.last_report < self._clock() - STALE_SECONDS:
                return set()
            return {user for user, devices in node.held_devices.items() if user and devices}

    def held(self, node_id: str, user: str, window: float, now: float) -> PairHeld:
        """The pair's held time within the last `window` seconds up to `now`."""
        with self._lock:
            node = self._nodes.get(node_id)
            entry = node.held.get(user) if node else None
            if entry is None:
                return PairHeld()
            start = now - window
            base = entry.samples[0][1] if entry.samples else entry.total
            for at, total in entry.samples:
                if at > start:
                    break
                base = total
            return PairHeld(max(0.0, entry.total - base), entry.now, entry.since if entry.now else 0.0, entry.source)

    def held_pairs(self) -> list[tuple[str, str]]:
        with self._lock:
            return [(node_id, user) for node_id, node in self._nodes.items() for user in node.held]

    def held_now(self) -> dict[str, int]:
        """user -> the number of nodes where it is held now."""
        counts: dict[str, int] = {}
        with self._lock:
            for node in self._nodes.values():
                for user, entry in node.held.items():
                    if entry.now:
                        counts[user] = counts.get(user, 0) + 1
        return counts

