"""Random trees of weights over random clusters, for the tree step's tests and benchmark.

A tree cluster is a WeightTree (users u0..uN-1 as leaves under groups, depth 1-3) with capacity[r]
and demand[u, r] in bytes/s, users in the tree's rows in name order.
"""

from dataclasses import dataclass

import numpy as np

from vnode_sync.coordinator.policy.weight_tree import Group, TreeArrays, User, WeightTree

MB = 1e6
INF = np.inf


@dataclass(frozen=True)
class TreeCluster:
    tree: WeightTree
    arrays: TreeArrays
    capacity: np.ndarray
    demand: np.ndarray

    @property
    def shape(self) -> tuple[int, int]:
        return self.demand.shape


def random_tree_cluster(rng: np.random.Generator, max_users: int = 50, max_resources: int = 20,
                        bounds: bool = False) -> TreeCluster:
    """2..max_users users under a tree of depth 1-3 (2-5 children a group; a lone user sometimes right
    under a group's parent), weights 1-10; skewed demand as benchmarks.policy_instances.small (a random
    fraction of the resources, Pareto bytes/s, 30% without bound). `bounds`: a tenth of the users and
    groups with a floor (0-5 MB/s) or a ceiling (5-60 MB/s users, 20-100 MB/s groups)."""
    users = int(rng.integers(2, max_users + 1))
    resources = int(rng.integers(1, max_resources + 1))
    depth = int(rng.integers(1, 4))
    chance = 0.1 if bounds else 0.0
    names = [f"u{i}" for i in range(users)]

    def user(name: str) -> User:
        return User(name, float(rng.integers(1, 11)),
                    floor=float(rng.uniform(0, 5) * MB) if rng.random() < chance else 0.0,
                    ceiling=float(rng.uniform(5, 60) * MB) if rng.random() < chance else INF)

    def level(members: list[str], left: int, prefix: str) -> tuple:
        if left == 1 or len(members) <= 1:
            return tuple(user(n) for n in members)
        parts = np.split(np.array(members), np.sort(rng.choice(np.arange(1, len(members)),
                                                               int(rng.integers(2, min(len(members), 5) + 1)) - 1,
                                                               replace=False)))
        out = []
        for i, part in enumerate(parts):
            if len(part) == 1 and rng.random() < 0.3:
                out.append(user(str(part[0])))
                continue
            out.append(Group(f"{prefix}g{i}", float(rng.integers(1, 11)), level(list(part), left - 1, f"{prefix}g{i}."),
                             floor=float(rng.uniform(0, 5) * MB) if rng.random() < chance else 0.0,
                             ceiling=float(rng.uniform(20, 100) * MB) if rng.random() < chance else INF))
        return tuple(out)

    tree = WeightTree(level(names, depth, ""))
    demand = np.where(rng.random((users, resources)) < 0.3, INF, rng.pareto(1.2, (users, resources)) * 5 * MB)
    demand[rng.random((users, resources)) > rng.uniform(0.1, 0.9)] = 0.0
    return TreeCluster(tree, tree.arrays(names), rng.uniform(20, 100, resources) * MB, demand)


def grouped_cluster(groups: int, users: int, resources: int, seed: int = 3) -> TreeCluster:
    """`users` users in `groups` groups of equal size (weights 1-10 at both levels), every user demanding
    on every resource as benchmarks.policy_instances.dense("skewed"): the tree step's cost at scale."""
    rng = np.random.default_rng(seed)
    names = [f"u{i}" for i in range(users)]
    per = users // groups
    tree = WeightTree(tuple(Group(f"g{g}", float(rng.integers(1, 11)),
                                  tuple(User(n, float(rng.integers(1, 11))) for n in names[g * per:(g + 1) * per]))
                            for g in range(groups)))
    demand = rng.pareto(1.0, (users, resources)) * 0.05 * MB
    demand[rng.random((users, resources)) < 0.1] = INF
    demand = np.maximum(demand, 1.0)
    return TreeCluster(tree, tree.arrays(names), rng.uniform(50, 200, resources) * MB, demand)


def fairness(allocation: np.ndarray, exact: np.ndarray, scale: float) -> float:
    """The fairness index of the weight step's tests: min over users of total / exact total, over users
    whose exact total is not ~0 (below 1e-6 of `scale`, the largest capacity)."""
    got, want = allocation.sum(axis=1), exact.sum(axis=1)
    counted = want > 1e-6 * scale
    return float((got[counted] / want[counted]).min(initial=1.0))
