"""A tree of weights: users as leaves under groups, groups under groups, and its arrays for the policies.

Every node (a user, or a group: a project, a Slurm account, a Unix group) has a weight, a floor and
a ceiling. The weight says how the node shares what its parent gets with its siblings (only the
ratios among siblings matter); the floor and ceiling are bytes/s on each resource, as a user's
reservation and limit are today: a group's ceiling bounds the sum of its users' bytes/s on every
resource, a group's floor is granted first on every resource where its users want bytes (see
pair_bounds). The root is the cluster; a tree of one level (users only) is today's flat claims.

`WeightTree.arrays(users)` numbers the nodes in pre-order for the array code (tree_step.py,
hierarchical_max_min.py), with the users in the caller's row order.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from vnode_sync.coordinator.policy.water_filling import water_fill
from vnode_sync.errors import InvalidArgument


@dataclass(frozen=True)
class User:
    """A leaf: one user (or, later, one job)."""

    name: str
    weight: float
    floor: float = 0.0            # bytes/s on each resource where it has demand
    ceiling: float = math.inf     # bytes/s on each resource


@dataclass(frozen=True)
class Group:
    """An inner node: its children share what it gets, by their weights."""

    name: str
    weight: float
    children: tuple["Group | User", ...] = ()
    floor: float = 0.0            # bytes/s on each resource where its users have demand, together
    ceiling: float = math.inf     # bytes/s on each resource, its users together


@dataclass(frozen=True)
class TreeArrays:
    """The tree's nodes (not the root) in pre-order, as arrays; `user` names the rows of demand."""

    parent: np.ndarray       # per node: its parent's node index, -1 under the root
    depth: np.ndarray        # per node: 1 under the root
    weight: np.ndarray
    floor: np.ndarray
    ceiling: np.ndarray
    row: np.ndarray          # per node: its user's row, -1 for a group
    leaf: np.ndarray         # per row: its user's node
    names: tuple[str, ...]   # per node
    members: list[np.ndarray] = field(repr=False)   # per node: the rows of the users under it (itself, for a user)

    @property
    def nodes(self) -> int:
        return len(self.parent)

    @property
    def height(self) -> int:
        """The deepest level (1: users only)."""
        return int(self.depth.max(initial=1))

    def children(self, node: int) -> np.ndarray:
        """The children of `node` (-1: the root)."""
        return np.flatnonzero(self.parent == node)

    def frontier(self, level: int) -> np.ndarray:
        """The nodes at `level`, and the users above it: a partition of the users, in pre-order."""
        return np.flatnonzero((self.depth == level) | ((self.depth < level) & (self.row >= 0)))

    def subtree_sum(self, per_row: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """Per node of `nodes`, the sum of `per_row` (rows first) over the users under it."""
        return np.stack([per_row[self.members[n]].sum(axis=0) for n in nodes]) if len(nodes) else \
            np.zeros((0, *per_row.shape[1:]))


@dataclass(frozen=True)
class WeightTree:
    """The cluster: the root's children."""

    children: tuple[Group | User, ...]

    @classmethod
    def flat(cls, names: Sequence[str], weight: Sequence[float], floor: Sequence[float] | None = None,
             ceiling: Sequence[float] | None = None) -> "WeightTree":
        """Today's claims: every user right under the root."""
        floor = floor if floor is not None else [0.0] * len(names)
        ceiling = ceiling if ceiling is not None else [math.inf] * len(names)
        return cls(tuple(User(n, float(w), float(f), float(c)) for n, w, f, c in zip(names, weight, floor, ceiling)))

    def users(self) -> list[str]:
        """The users' names, in pre-order."""
        out: list[str] = []
        stack = list(reversed(self.children))
        while stack:
            node = stack.pop()
            if isinstance(node, User):
                out.append(node.name)
            else:
                stack.extend(reversed(node.children))
        return out

    def arrays(self, users: Sequence[str] | None = None) -> TreeArrays:
        """The arrays, users' rows in the order of `users` (None: pre-order). Refused, in one line: a
        user or group named twice, a user listed in `users` and not in the tree or the reverse, a weight
        not finite and above 0, a floor not finite and >= 0, a ceiling below 0 or below the floor."""
        order = list(users) if users is not None else self.users()
        rows = {name: i for i, name in enumerate(order)}
        if len(rows) != len(order):
            raise InvalidArgument("a user is listed twice in the rows")
        parent, depth, weight, floor, ceiling, row, names = [], [], [], [], [], [], []
        seen_users: set[str] = set()
        seen_groups: set[str] = set()

        def visit(node: Group | User, up: int, level: int) -> None:
            _check(node)
            index = len(parent)
            parent.append(up)
            depth.append(level)
            weight.append(float(node.weight))
            floor.append(float(node.floor))
            ceiling.append(float(node.ceiling))
            names.append(node.name)
            if isinstance(node, User):
                if node.name in seen_users:
                    raise InvalidArgument(f"user {node.name} is in the tree twice: a user sits under one group")
                if node.name not in rows:
                    raise InvalidArgument(f"user {node.name} is in the tree but has no row")
                seen_users.add(node.name)
                row.append(rows[node.name])
                return
            if node.name in seen_groups:
                raise InvalidArgument(f"group {node.name} is in the tree twice")
            seen_groups.add(node.name)
            row.append(-1)
            for child in node.children:
                visit(child, index, level + 1)

        for child in self.children:
            visit(child, -1, 1)
        missing = [name for name in order if name not in seen_users]
        if missing:
            raise InvalidArgument(f"user {missing[0]} has a row but is not in the tree")
        parent_a, row_a = np.array(parent, dtype=np.int64), np.array(row, dtype=np.int64)
        leaf = np.empty(len(order), dtype=np.int64)
        leaf[row_a[row_a >= 0]] = np.flatnonzero(row_a >= 0)
        members: list[list[int]] = [[] for _ in parent]
        for node in np.flatnonzero(row_a >= 0):
            up = int(node)
            while up >= 0:
                members[up].append(int(row_a[node]))
                up = parent[up]
        return TreeArrays(parent_a, np.array(depth, dtype=np.int64), np.array(weight), np.array(floor),
                          np.array(ceiling), row_a, leaf, tuple(names),
                          [np.array(sorted(m), dtype=np.int64) for m in members])


def _check(node: Group | User) -> None:
    kind = "user" if isinstance(node, User) else "group"
    if not (math.isfinite(node.weight) and node.weight > 0):
        raise InvalidArgument(f"{kind} {node.name}: weight must be finite and above 0, got {node.weight}")
    if not (math.isfinite(node.floor) and node.floor >= 0):
        raise InvalidArgument(f"{kind} {node.name}: floor must be finite and >= 0 bytes/s, got {node.floor}")
    if not node.ceiling >= node.floor:
        raise InvalidArgument(f"{kind} {node.name}: ceiling must be >= its floor {node.floor} bytes/s "
                              f"(inf = none), got {node.ceiling}")


def node_ceilings(tree: TreeArrays, capacity: np.ndarray, demand: np.ndarray) -> np.ndarray:
    """Per node and resource, the most its users could take there together: their demands, each
    user's ceiling, every group ceiling on the way and the capacity (nodes x resources)."""
    reach = np.zeros((tree.nodes, len(capacity)))
    for node in range(tree.nodes - 1, -1, -1):     # children come after their parent in pre-order
        if tree.row[node] >= 0:
            reach[node] = np.minimum(demand[tree.row[node]], tree.ceiling[node])
        else:
            reach[node] = np.minimum(reach[tree.children(node)].sum(axis=0), tree.ceiling[node])
        np.minimum(reach[node], capacity, out=reach[node])
    return reach


def pair_bounds(tree: TreeArrays, capacity: np.ndarray, demand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ceiling, floor) per user and resource, the definition both solvers share.

    Ceiling: the least of the user's demand, its ceiling and the capacity (group ceilings are the
    solvers' own business). Floor: on every resource where its users want bytes, a node's floor
    there (its own, at most what its users could take, or its part of its parent's, whichever is
    more) is water-filled among its children by weight (each up to what it could take), granted first and counted in the
    users' totals; floors that add up to more than a resource has are scaled down alike (admission
    should prevent it)."""
    capacity = np.asarray(capacity, dtype=np.float64)
    reach = node_ceilings(tree, capacity, demand)
    ceiling = np.minimum(np.minimum(demand, tree.ceiling[tree.leaf][:, None]), capacity[None, :])
    floor = np.zeros_like(reach)
    for node in range(tree.nodes):
        own = np.minimum(tree.floor[node], reach[node])
        floor[node] = np.maximum(own, floor[node])
        kids = tree.children(node)
        if len(kids) and floor[node].any():
            weights = np.broadcast_to(tree.weight[kids][:, None], (len(kids), reach.shape[1]))
            floor[kids] = water_fill(np.ascontiguousarray(weights), floor[node], np.ascontiguousarray(reach[kids]))[0]
    pair_floor = floor[tree.leaf]
    booked = pair_floor.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        pair_floor *= np.where(booked > capacity, capacity / booked, 1.0)[None, :]
    return ceiling, np.minimum(pair_floor, ceiling)


def water_level(total: float, weight: np.ndarray, reach: np.ndarray) -> float:
    """The level L at which children given min(reach, weight * L) add up to `total` (water-filling by
    weight, what one cannot take going to the others; inf if all their reach is less than `total`):
    weight * L is what a child is due of its parent's total, at every weight alike."""
    free = reach > 0
    left = total
    while free.any():
        level = left / weight[free].sum()
        full = free & (weight * level >= reach)
        if not full.any():
            return float(level)
        left -= reach[full].sum()
        free &= ~full
    return math.inf
