"""Usage reports in the one shape a storage agent sends: a demand summary of each user's rates."""

from collections.abc import Collection, Mapping

from vnode_sync.agents.storage.demand_summary import Entry, packed
from vnode_sync.wire import vnode_pb2 as pb

Rates = Mapping[tuple[str, str], tuple[float, float]]   # (user, device) -> (read, write) bytes/s


def usage_report(node_id: str, at: float, rates: Rates, held: Collection[str] = (),
                 held_seconds: Mapping[str, float] | None = None, full: bool = True, applied_generation: int = 0,
                 source: int = pb.HELD_SOURCE_ESTIMATED) -> pb.UsageReport:
    """A report sampled at `at` (unix seconds); the users in `held` are held on each of their devices
    and want twice what they moved; `full`: the node has no other users."""
    entries = {(user, device): Entry(read, write, user in held, user in held,
                                     read * (2 if user in held else 1), write * (2 if user in held else 1))
               for (user, device), (read, write) in rates.items()}
    return pb.UsageReport(node_id=node_id, sampled_at_unix=at, applied_generation=applied_generation,
                          demand=packed(entries, full, []),
                          held=[pb.HeldTime(user=user, held_seconds=seconds, source=source)
                                for user, seconds in (held_seconds or {}).items()])
