"""Algorithm 1 of the paper (section 3.2): split a node's bandwidth by priority.

    N = 1          -> tht_1 = BW
    N > 1          -> tht_i = BW * p_i / sum(p)

Shares are whole bytes/s rounded down, so their sum never exceeds BW.
"""

from collections.abc import Mapping

from vnode_sync.validation import priority as _valid_priority

BFQ_WEIGHT_MIN = 1
BFQ_WEIGHT_MAX = 1000
# The wire's ResourceShare.device (and ShareTable's) of the node as a whole, where its edge shares the node.
NODE = ""


def priority_shares(bandwidth: int, priorities: Mapping[str, int]) -> dict[str, int]:
    """Each active user's share of `bandwidth` (bytes/s or iops) by Algorithm 1."""
    if bandwidth < 0:
        raise ValueError(f"bandwidth must be >= 0, got {bandwidth}")
    for value in priorities.values():
        _valid_priority(value)
    if len(priorities) == 1:
        (user,) = priorities
        return {user: bandwidth}
    total = sum(priorities.values())
    return {user: bandwidth * p // total for user, p in priorities.items()}


def weighted_shares(bandwidth: int, weights: Mapping[str, float]) -> dict[str, int]:
    """Algorithm 1 with local weights (any positive numbers): `bandwidth * w_i / sum(w)`, rounded down."""
    if bandwidth < 0:
        raise ValueError(f"bandwidth must be >= 0, got {bandwidth}")
    total = sum(w for w in weights.values() if w > 0)
    if total <= 0:
        return {user: 0 for user in weights}
    return {user: int(bandwidth * w // total) if w > 0 else 0 for user, w in weights.items()}


def bfq_weights(weights: Mapping[str, float]) -> dict[str, int]:
    """Local weights of the VNodes on one device as BFQ integers 1..1000 with their ratios kept: the
    largest becomes 1000 (BFQ compares sibling cgroups' weights, so only ratios matter)."""
    largest = max((w for w in weights.values() if w > 0), default=0.0)
    if largest <= 0:
        return {user: 0 for user in weights}
    return {user: max(BFQ_WEIGHT_MIN, min(BFQ_WEIGHT_MAX, round(w * BFQ_WEIGHT_MAX / largest))) if w > 0 else 0
            for user, w in weights.items()}
