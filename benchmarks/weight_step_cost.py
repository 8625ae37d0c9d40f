"""Control cost: CPU of one global weight step, against the exact solver measured in the same run.

    .venv/bin/python -m benchmarks.weight_step_cost [--sizes 500x2400 1000x10000] [--converged-iterations 400]

Part 1, the baseline: at sizes the exact solver (policy.exact_max_min, what the control loop runs
today, per direction) can do, random clusters with each user on ~30% of the resources: CPU of the
exact solver and of the weight step on the same cluster, their ratio, and the weight step's worst
user against the exact totals.
Part 2, the targets: every user demanding on every resource (benchmarks.policy_instances.DENSE_KINDS,
four shapes of skew), 500 x 2,400 (200 DataNodes x 12 disks) and 1,000 x 10,000. Per shape: CPU
of a cold step (no previous weights), of a warm one (the previous step's weights, demand unchanged:
the control loop's steady state), the iterations, and the cold step's worst user against the same
step run to convergence (--converged-iterations, tolerance 0; the exact solver cannot run there).
CPU is the process's (time.process_time) with the step's passes on one thread (ColumnShards with one
worker): "of one core". Targets: <= 0.25 s at 500 x 2,400, <= 2 s at 1,000 x 10,000. Beside it, the
elapsed time of the same cold step with its blocks of resources on every core (policy.column_shards,
what the coordinator runs).
"""

import argparse
import os
import sys
import time

import numpy as np

from benchmarks.policy_instances import DENSE_KINDS, Cluster, dense, exact_allocation, machine
from benchmarks.scenario_runner import cpu
from vnode_sync.coordinator.policy.column_shards import ColumnShards, cores
from vnode_sync.coordinator.policy.local_weights import local_weights

MB = 1e6
TARGETS = {(500, 2400): 0.25, (1000, 10000): 2.0}
BASELINE_SIZES = ((50, 20), (100, 100), (200, 100), (100, 300))


def sparse_cluster(users: int, resources: int, seed: int) -> Cluster:
    """The issue's baseline shape: each user on ~30% of the resources, random demand, no floors or ceilings."""
    rng = np.random.default_rng(seed)
    demand = np.where(rng.random((users, resources)) < 0.5, np.inf, rng.uniform(0.1, 20, (users, resources)) * MB)
    demand[rng.random((users, resources)) >= 0.3] = 0.0
    return Cluster(capacity=rng.uniform(20, 100, resources) * MB, weight=rng.integers(1, 11, users).astype(float),
                   demand=demand, reservation=np.zeros(users), limit=np.full(users, np.inf))



def elapsed(call):
    t0 = time.perf_counter()
    result = call()
    return result, time.perf_counter() - t0


def baseline(seed: int) -> None:
    print("Part 1: the exact solver (the baseline) and the weight step on the same clusters, ~30% density")
    print(f"{'users x resources':>18} {'exact s':>8} {'step s':>8} {'step/exact':>10} {'iterations':>10} "
          f"{'worst user step/exact':>21}")
    for users, resources in BASELINE_SIZES:
        cluster = sparse_cluster(users, resources, seed)
        exact, exact_cpu = cpu(lambda: exact_allocation(cluster))
        step, step_cpu = cpu(lambda: local_weights(*cluster.args(), shards=ColumnShards(cluster.demand.shape, 1)))
        totals = exact.sum(axis=1)
        counted = totals > 1e-6 * cluster.capacity.max()
        worst = float((step.totals()[counted] / totals[counted]).min(initial=1.0))
        print(f"{users:>8} x {resources:<7} {exact_cpu:>8.2f} {step_cpu:>8.3f} {step_cpu / exact_cpu:>10.4f} "
              f"{step.iterations:>10} {worst:>21.4f}", flush=True)


def targets(sizes, converged_iterations: int) -> bool:
    print()
    print("Part 2: every user demanding on every resource (shapes: "
          + "; ".join(f"{k}: {v}" for k, v in DENSE_KINDS.items()) + ")")
    print(f"{'users x resources':>18} {'shape':>8} {'cold s':>7} {'iter':>5} {'warm s':>7} {'iter':>5} "
          f"{'target s':>8} {'cold/target':>11} {'worst user vs converged':>23} {f'cold on {cores()} cores':>16}")
    met = True
    for users, resources in sizes:
        target = TARGETS.get((users, resources))
        for kind in DENSE_KINDS:
            cluster = dense(kind, users, resources)
            one_core = ColumnShards(cluster.demand.shape, 1)
            cold, cold_cpu = cpu(lambda: local_weights(*cluster.args(), shards=one_core))
            warm, warm_cpu = cpu(lambda: local_weights(*cluster.args(), previous=cold.weight, shards=one_core))
            _, cores_seconds = elapsed(lambda: local_weights(*cluster.args()))
            reference = local_weights(*cluster.args(), max_iterations=converged_iterations, tolerance=0.0).totals()
            counted = reference > 1e-6 * cluster.capacity.max()
            worst = float((cold.totals()[counted] / reference[counted]).min(initial=1.0))
            ratio = f"{cold_cpu / target:>11.2f}" if target else f"{'-':>11}"
            print(f"{users:>8} x {resources:<7} {kind:>8} {cold_cpu:>7.2f} {cold.iterations:>5} {warm_cpu:>7.2f} "
                  f"{warm.iterations:>5} {target or '-':>8} {ratio} {worst:>23.4f} {cores_seconds:>14.2f} s",
                  flush=True)
            if target and cold_cpu > target:
                met = False
            del cold, warm, reference
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="*", default=["500x2400", "1000x10000"])
    parser.add_argument("--converged-iterations", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-baseline", action="store_true")
    args = parser.parse_args()
    sizes = [tuple(int(n) for n in s.split("x")) for s in args.sizes]
    print(f"# {machine()}")
    print(f"$ python -m benchmarks.weight_step_cost --sizes {' '.join(args.sizes)} "
          f"--converged-iterations {args.converged_iterations}", flush=True)
    if not args.no_baseline:
        baseline(args.seed)
    met = targets(sizes, args.converged_iterations)
    print(f"targets (cold step, every shape): {'met' if met else 'NOT met'}; load average at the end "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
