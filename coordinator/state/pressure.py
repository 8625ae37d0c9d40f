"""Who is held back: the VNodes (a user's own, and each of its running jobs') sorted by how hard they
press on their share (the Pressure RPC, `vnodectl top`), from the held time the usage ledger books per
(node, VNode)."""

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from vnode_sync.coordinator.state.usage_ledger import MAX_WINDOW_SECONDS, UsageLedger
from vnode_sync.errors import InvalidArgument
from vnode_sync.validation import JOB_VNODE_SEPARATOR
from vnode_sync.wire import vnode_pb2 as pb

DEFAULT_WINDOW_SECONDS = 300.0


@dataclass(frozen=True)
class NodeShareView:
    """What the coordinator knows of one node when it answers: measured rates, allowed rates, held."""

    node_id: str
    rates: Mapping[str, tuple[float, float]]      # VNode -> measured (read, write) bytes/s
    allowed: Mapping[str, tuple[int, int]]        # VNode -> allocation or target (read, write) bytes/s


def window_of(requested: float) -> float:
    if requested == 0:
        return DEFAULT_WINDOW_SECONDS
    if not math.isfinite(requested) or not 0 < requested <= MAX_WINDOW_SECONDS:
        raise InvalidArgument(f"invalid window {requested!r} s: must be above 0 and at most {MAX_WINDOW_SECONDS:.0f}")
    return requested


def _ratio(rate: float, allowed: int) -> float:
    return rate / allowed if allowed else 0.0


def rank(users: Iterable[tuple[str, int]], nodes: Iterable[NodeShareView], book: UsageLedger, window: float,
         limit: int = 0, now: float | None = None, groups: Mapping[str, str] | None = None) -> list[pb.UserPressure]:
    """The VNodes that move bytes or were held within the window, hardest pressed first: held now on
    most nodes, then the longest held within the window, then the highest rate/allowed. `users`:
    (VNode, priority) of the users the caller may read and of their jobs' VNodes (`user.job`); a job
    VNode not listed takes its user's. `groups`: user -> its group's path from the root."""
    now = book.now() if now is None else now
    priorities = dict(users)
    groups = groups or {}
    held_pairs: dict[str, set[str]] = {}
    for node_id, user in book.held_pairs():
        held_pairs.setdefault(node_id, set()).add(user)
    rows: dict[str, pb.UserPressure] = {}
    for view in nodes:
        for vnode in set(view.rates) | held_pairs.get(view.node_id, set()):
            user, _, job = vnode.partition(JOB_VNODE_SEPARATOR)
            if user not in priorities:
                continue   # not a user the caller may read, nor one of its jobs
            read, write = view.rates.get(vnode, (0.0, 0.0))
            allowed_read, allowed_write = view.allowed.get(vnode, (0, 0))
            held = book.held(view.node_id, vnode, window, now)
            if not (read or write or held.seconds or held.now):
                continue
            row = rows.get(vnode)
            if row is None:
                row = rows[vnode] = pb.UserPressure(user=user, job=job, group=groups.get(user, ""),
                                                    priority=priorities.get(vnode, priorities[user]))
            row.nodes.append(pb.NodePressure(node_id=view.node_id, read_bps=read, write_bps=write,
                                             allowed_read_bps=allowed_read, allowed_write_bps=allowed_write,
                                             held_at_limit=held.now, held_since_unix=held.since,
                                             held_seconds=held.seconds, held_source=held.source))
            row.pressure = max(row.pressure, _ratio(read, allowed_read), _ratio(write, allowed_write))
            row.held_seconds = max(row.held_seconds, held.seconds)
            row.nodes_held += held.now
    ranked = sorted(rows.values(), key=lambda r: (-r.nodes_held, -r.held_seconds, -r.pressure, r.user, r.job))
    for row in ranked:
        row.nodes.sort(key=lambda n: (not n.held_at_limit, -n.held_seconds, n.node_id))
    return ranked[:limit] if limit else ranked
