"""Random clusters for the policy benchmarks, and the exact solver and Algorithm 1 on arrays.

A cluster is (capacity[r], weight[u], demand[u, r], reservation[u], limit[u]) in bytes/s, as
vnode_sync.coordinator.policy.local_weights takes it.
"""

import os
import subprocess
from dataclasses import dataclass

import numpy as np

from vnode_sync.coordinator.policy.exact_max_min import Claim, allocate
from vnode_sync.coordinator.policy.water_filling import water_fill

MB = 1e6
INF = np.inf


@dataclass(frozen=True)
class Cluster:
    capacity: np.ndarray
    weight: np.ndarray
    demand: np.ndarray
    reservation: np.ndarray
    limit: np.ndarray

    @property
    def shape(self) -> tuple[int, int]:
        return self.demand.shape

    def args(self) -> tuple:
        return self.capacity, self.weight, self.demand, self.reservation, self.limit

    def ceiling(self) -> np.ndarray:
        return np.minimum(np.minimum(self.demand, self.limit[:, None]), self.capacity[None, :])


def small(rng: np.random.Generator, max_users: int = 50, max_resources: int = 100) -> Cluster:
    """Skewed demand: each user wants on a random fraction of the resources, Pareto-distributed bytes/s
    (shape 1.2: a few users want far more than the rest) or without bound (30%); weights 1-10;
    a fifth of the users hold a reservation, a fifth a limit."""
    users, resources = int(rng.integers(2, max_users + 1)), int(rng.integers(1, max_resources + 1))
    demand = np.where(rng.random((users, resources)) < 0.3, INF, rng.pareto(1.2, (users, resources)) * 5 * MB)
    demand[rng.random((users, resources)) > rng.uniform(0.1, 0.9)] = 0.0
    return Cluster(capacity=rng.uniform(20, 100, resources) * MB,
                   weight=rng.integers(1, 11, users).astype(float),
                   demand=demand,
                   reservation=np.where(rng.random(users) < 0.2, rng.uniform(0, 5, users) * MB, 0.0),
                   limit=np.where(rng.random(users) < 0.2, rng.uniform(5, 60, users) * MB, INF))


DENSE_KINDS = {
    "skewed": "every pair Pareto(1.0)-distributed (most small, a heavy tail), 10% without bound",
    "intense": "users differ 1,000x in intensity; Pareto(1.5) over resources",
    "hot": "10% of the resources get 10x the demand; 5% of the users without bound on 30% of them",
    "groups": "20 groups: without bound on their group's resources, light everywhere else",
}


def dense(kind: str, users: int, resources: int, seed: int = 3) -> Cluster:
    """Every user demands on every resource (DENSE_KINDS says how); weights 1-10, no floors or ceilings."""
    rng = np.random.default_rng(seed)
    if kind == "skewed":
        demand = rng.pareto(1.0, (users, resources)) * 0.05 * MB
        demand[rng.random((users, resources)) < 0.1] = INF
    elif kind == "intense":
        demand = (10 ** rng.uniform(-2, 1, users) * MB)[:, None] * rng.pareto(1.5, (users, resources))
    elif kind == "hot":
        demand = rng.exponential(0.2 * MB, (users, resources)) * np.where(rng.random(resources) < 0.1, 10, 1)
        backlogged = (rng.random(users) < 0.05)[:, None] & (rng.random((users, resources)) < 0.3)
        demand[backlogged] = INF
    elif kind == "groups":
        group, home = rng.integers(0, 20, users), rng.integers(0, 20, resources)
        demand = np.where(group[:, None] == home[None, :], INF, rng.exponential(0.05 * MB, (users, resources)))
    else:
        raise ValueError(f"unknown kind {kind!r}: one of {', '.join(DENSE_KINDS)}")
    demand = np.maximum(demand, 1.0)    # every pair demands something
    return Cluster(capacity=rng.uniform(50, 200, resources) * MB, weight=rng.integers(1, 11, users).astype(float),
                   demand=demand, reservation=np.zeros(users), limit=np.full(users, INF))


def exact_allocation(cluster: Cluster) -> np.ndarray:
    """The reference: policy.exact_max_min.allocate (no probes), as users x resources."""
    users, resources = cluster.shape
    claims = {u: Claim(float(cluster.weight[u]), float(cluster.reservation[u]), float(cluster.limit[u]))
              for u in range(users)}
    wanted = {(u, r): float(cluster.demand[u, r]) for u in range(users) for r in range(resources)
              if cluster.demand[u, r] > 0}
    out = np.zeros((users, resources))
    for (u, r), value in allocate(dict(enumerate(cluster.capacity.tolist())), claims, wanted).items():
        out[u, r] = value
    return out


def static_allocation(cluster: Cluster) -> np.ndarray:
    """Algorithm 1 at the edges, work-conserving: every resource shared by the global weights (the
    priorities), with the same floors and ceilings: what the edges do before the center moves a weight."""
    ceiling = cluster.ceiling()
    floor = np.minimum(ceiling, cluster.reservation[:, None])
    floor *= np.minimum(1.0, cluster.capacity / np.maximum(floor.sum(axis=0), 1e-30))[None, :]
    weight = np.broadcast_to(cluster.weight[:, None], ceiling.shape).copy()
    return water_fill(weight, cluster.capacity, ceiling, floor)[0]


def machine() -> str:
    """One line: where and when the figures were taken."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                check=False).stdout.strip()
    except OSError:
        commit = "?"
    return (f"commit {commit or '?'}; {os.cpu_count()} CPUs; numpy {np.__version__}; "
            f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
