"""Caps for edges that can only cap (blkio throttle without BFQ, io.max, Lustre TBF), from the weight step.

Such an edge does not lend by itself: a user capped at exactly what it moved could never show that it
wants more. So each user's cap on a resource is what the step gives it there plus the room the
resource has left (a user given all it wants may grow into it at once, as a standby weight lets it
at a weighted edge), and at least a probe: its priority's part of the resource, at most
`probe_fraction` of it, so a user that comes back moves at its probe, is seen held there by its
agent and is given its share by the next step. Never above the user's limit.
"""

import numpy as np


def caps(allocation: np.ndarray, capacity: np.ndarray, weight: np.ndarray, limit: np.ndarray,
         probe_fraction: float) -> np.ndarray:
    """users x resources bytes/s: `allocation` the step's (users x resources), `capacity` per resource,
    `weight` and `limit` per user (inf: none)."""
    spare = np.maximum(0.0, capacity - allocation.sum(axis=0, dtype=np.float64))
    part = weight / weight.sum() if len(weight) else weight
    probe = np.minimum(probe_fraction, part)[:, None] * capacity[None, :]
    return np.minimum(limit[:, None], np.maximum(allocation + spare[None, :], probe))
