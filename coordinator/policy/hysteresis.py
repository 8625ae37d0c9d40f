"""Which nodes must be sent new weights (or caps): only those where a user's rate would move beyond a threshold.

Each message to a node costs the coordinator CPU and the node a reconcile, and steady demand must
cost nothing. Weights are judged by what they do: the rates the edges give with the weights a node
has against those with the step's new weights, for the same demands (WeightStep.realised). Weights
themselves are a poor measure: they are scale-free, and a user given all it wants holds a large
standby weight that dwarfs a busy user's small one though the busy user moves most of the bytes.
Caps of cap-only backends are compared the same way, as bytes/s.

A resource moved when some user's rate there changed by more than `threshold` of its old rate and
by more than IGNORED of the largest rate there (a trace of bytes wobbling is no move; a floor in
bytes/s or in percent of the capacity would hide every move at a node with a thousand users, where
each moves ~0.1%); a node is sent when any of its resources moved.
"""

import numpy as np

# A user's rate moving by more than this is sent: a share x short everywhere leaves its user x short of
# its fair total, so this is also how far from the step's allocation the edges may stay, well inside the
# 5 % that benchmarks/site_simulation.py counts as settled. The one number: the coordinator's tick
# (weight_control.py) and the simulation both use it.
THRESHOLD = 0.02
IGNORED = 1e-3


def rates_moved(previous: np.ndarray, new: np.ndarray, threshold: float = THRESHOLD,
                ignored: float = IGNORED) -> np.ndarray:
    """Per resource (users x resources in, one bool per resource out): did some user's rate move by more
    than `threshold` of its old rate and `ignored` of the largest rate there? NaN in `previous` means
    never sent: moved."""
    never = np.isnan(previous)
    before = np.where(never, 0.0, previous)
    largest = np.maximum(before.max(axis=0, initial=0.0), new.max(axis=0, initial=0.0))
    change = np.abs(new - before)
    beyond = change > np.maximum(threshold * before, ignored * largest)
    return (beyond | never).any(axis=0)


def nodes_to_send(moved_resources: np.ndarray, node_of: np.ndarray, nodes: int) -> np.ndarray:
    """Indices (ascending) of the nodes that hold a moved resource; `node_of[r]` is resource r's node."""
    hit = np.zeros(nodes, dtype=bool)
    hit[node_of[moved_resources]] = True
    return np.flatnonzero(hit)
