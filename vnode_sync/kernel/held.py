"""When a VNode is held at its limit: the one rule every backend and the agent's demand estimate use.

Held, in a direction, means it had bytes waiting while others were served: it wants more than it
moved (agents/storage/demand.py turns that into demand; the coordinator books the flag as reported).
- A throttle that times its waits (the DataNode's): held when it waited at least WAIT_FRACTION of the
  interval.
- Otherwise against the limit in force: held when what it moved reached HIT_FRACTION of what the
  limit allows over the same span (a cgroup v1 throttle runs a VNode at 95-105 % of its limit,
  docs/architecture; Lustre TBF's RPC rate against its rule likewise), and once held until it falls
  below STILL_HELD_FRACTION, so a loaded host's jitter does not make it flap. No limit, never held:
  weights (BFQ) are no limit.
"""

WAIT_FRACTION = 0.1
HIT_FRACTION = 0.9
STILL_HELD_FRACTION = 0.8


def waited_held(waited_seconds: float, interval_seconds: float) -> bool:
    """A throttle made it wait at least WAIT_FRACTION of the interval."""
    return interval_seconds > 0 and waited_seconds >= WAIT_FRACTION * interval_seconds


def at_limit(moved: float, allowed: float, was_held: bool = False) -> bool:
    """`moved` reached HIT_FRACTION of `allowed` (same unit and span; STILL_HELD_FRACTION once held);
    never where `allowed` is 0 (no limit)."""
    return allowed > 0 and moved >= (STILL_HELD_FRACTION if was_held else HIT_FRACTION) * allowed
