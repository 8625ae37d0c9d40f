"""Which nodes must be sent new weights (or rates): only those where one moved beyond a threshold.

Each message to a node costs the coordinator CPU and the node a reconcile, and steady demand must
cost nothing. A resource moved when some user's value there changed by more than `threshold` of its
old value and by more than `floor` (so that a user's tiny share wobbling does not count); a node
is sent new values when any of its resources moved. Weights are compared as shares of their
resource (only ratios among its users matter, so rescaling a whole resource is no move); rates as
bytes/s.
"""

import numpy as np

# The defaults the control loop uses: a share moved by more than 5% of itself and 1% of its resource.
THRESHOLD = 0.05
SHARE_FLOOR = 0.01


def shares(weight: np.ndarray) -> np.ndarray:
    """Each user's part of its resource's total weight (users x resources, columns summing to 1)."""
    total = weight.sum(axis=0, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total > 0, weight / total, 0.0)


def moved(previous: np.ndarray, new: np.ndarray, threshold: float = THRESHOLD,
          floor: float | np.ndarray = SHARE_FLOOR) -> np.ndarray:
    """Per resource: did some user's value move by more than `threshold` of its old one and by more
    than `floor` (a number, or one per resource)? NaN in `previous` means never sent: moved."""
    change = np.abs(new - previous)
    with np.errstate(invalid="ignore"):
        beyond = (change > np.maximum(threshold * np.abs(previous), floor)) | np.isnan(previous)
    return beyond.any(axis=0)


def nodes_to_send(moved_resources: np.ndarray, node_of: np.ndarray, nodes: int) -> np.ndarray:
    """Indices (ascending) of the nodes that hold a moved resource; `node_of[r]` is resource r's node."""
    hit = np.zeros(nodes, dtype=bool)
    hit[node_of[moved_resources]] = True
    return np.flatnonzero(hit)
