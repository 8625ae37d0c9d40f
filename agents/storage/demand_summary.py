"""The demand summary a storage agent sends: what moved since its last one, or everything at a slow period.

Each (user, device) entry is sent again only when a held flag flipped or its demand in either
direction moved by more than THRESHOLD of itself and FLOOR_BPS: a node of a thousand steady users
sends nearly nothing, and the coordinator's cost per report follows what changed. Every
FULL_SECONDS, and after the link reconnects (the coordinator may have restarted, or a report may
have been lost with the old stream), the summary lists every entry (full), which also heals any
entry lost on the way.
"""

import math
from dataclasses import dataclass

from vnode_sync.wire import vnode_pb2 as pb

THRESHOLD = 0.1
FLOOR_BPS = 100_000.0
FULL_SECONDS = 30.0
# A move this sharp (a user stopped or came back, or its demand more than halved or doubled: the
# change is above this part of the larger of old and new) is reported between reports
# (agents/storage/report_interval.py): the center would otherwise lend or give back a period late.
SHARP = 0.5


@dataclass(frozen=True)
class Entry:
    """One user on one device, as the demand estimator sees it."""

    read_bps: float
    write_bps: float
    read_held: bool
    write_held: bool
    read_demand_bps: float
    write_demand_bps: float

    def moved_from(self, sent: "Entry") -> bool:
        if (self.read_held, self.write_held) != (sent.read_held, sent.write_held):
            return True
        return any(abs(new - old) > max(THRESHOLD * old, FLOOR_BPS)
                   for new, old in ((self.read_demand_bps, sent.read_demand_bps),
                                    (self.write_demand_bps, sent.write_demand_bps)))

    def moved_sharply_from(self, sent: "Entry") -> bool:
        return any(abs(new - old) > max(SHARP * max(new, old), FLOOR_BPS)
                   for new, old in ((self.read_demand_bps, sent.read_demand_bps),
                                    (self.write_demand_bps, sent.write_demand_bps)))


class SummaryBuilder:
    def __init__(self):
        self._sent: dict[tuple[str, str], Entry] = {}
        self._held_sent: dict[str, float] = {}
        self._last_full = -math.inf
        self._full_wanted = True

    def want_full(self) -> None:
        """The next summary lists every entry (after a reconnect)."""
        self._full_wanted = True

    def build(self, entries: dict[tuple[str, str], Entry], now: float) -> pb.DemandSummary:
        """The summary of `entries` ((user, device) -> Entry) as of `now` (monotonic seconds)."""
        full = self._full_wanted or now - self._last_full >= FULL_SECONDS
        if full:
            changed = dict(entries)
            self._last_full, self._full_wanted = now, False
        else:
            changed = {key: e for key, e in entries.items() if key not in self._sent or e.moved_from(self._sent[key])}
        gone = sorted({user for user, _ in self._sent} - {user for user, _ in entries})
        for key, entry in changed.items():
            self._sent[key] = entry
        for key in set(self._sent) - set(entries):
            del self._sent[key]
        return packed(changed, full, [] if full else gone)

    def moved_sharply(self, entries: dict[tuple[str, str], Entry]) -> bool:
        """Whether some entry moved sharply (SHARP) from what was last sent (nothing is marked sent)."""
        quiet = Entry(0.0, 0.0, False, False, 0.0, 0.0)
        return any(e.moved_sharply_from(self._sent.get(key, quiet)) for key, e in entries.items())

    def held_to_send(self, held_seconds: dict[str, float], full: bool) -> set[str]:
        """The users whose held time to list: every one in a full report, else those whose time grew."""
        send = set(held_seconds) if full else {u for u, s in held_seconds.items() if self._held_sent.get(u) != s}
        self._held_sent = {u: s for u, s in held_seconds.items() if u in send or u in self._held_sent}
        for user in send:
            self._held_sent[user] = held_seconds[user]
        return send


def packed(entries: dict[tuple[str, str], Entry], full: bool, gone: list[str]) -> pb.DemandSummary:
    users = sorted({user for user, _ in entries})
    devices = sorted({device for _, device in entries})
    user_at = {u: i for i, u in enumerate(users)}
    device_at = {d: i for i, d in enumerate(devices)}
    keys = sorted(entries)
    return pb.DemandSummary(
        full=full, users=users, devices=devices, gone=gone,
        user_index=[user_at[u] for u, _ in keys], device_index=[device_at[d] for _, d in keys],
        read_bps=[entries[k].read_bps for k in keys], write_bps=[entries[k].write_bps for k in keys],
        read_held=[entries[k].read_held for k in keys], write_held=[entries[k].write_held for k in keys],
        read_demand_bps=[entries[k].read_demand_bps for k in keys],
        write_demand_bps=[entries[k].write_demand_bps for k in keys])


def unpacked(summary: pb.DemandSummary) -> dict[tuple[str, str], Entry]:
    return {(summary.users[u], summary.devices[d]): Entry(rb, wb, rh, wh, rd, wd)
            for u, d, rb, wb, rh, wh, rd, wd in zip(summary.user_index, summary.device_index, summary.read_bps,
                                                    summary.write_bps, summary.read_held, summary.write_held,
                                                    summary.read_demand_bps, summary.write_demand_bps)}


def merged(older: pb.DemandSummary, newer: pb.DemandSummary) -> pb.DemandSummary:
    """One summary saying what both say (a report replaced before it was sent must not lose its entries)."""
    if newer.full:
        return newer
    entries = unpacked(older)
    gone = set(older.gone)
    for user in newer.gone:
        gone.add(user)
        entries = {k: e for k, e in entries.items() if k[0] != user}
    for key, entry in unpacked(newer).items():
        entries[key] = entry
        gone.discard(key[0])
    return packed(entries, older.full, [] if older.full else sorted(gone))
