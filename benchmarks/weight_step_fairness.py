"""Fairness of the weight step against the exact weighted max-min, on random clusters.

    .venv/bin/python -m benchmarks.weight_step_fairness [--instances 120] [--seed 1]

Each instance (benchmarks.policy_instances.small: <= 50 users x 100 resources, skewed demand,
weights 1-10, reservations and limits) is solved three ways in the same run: the exact solver
(policy.exact_max_min, the baseline), the weight step (policy.local_weights, its defaults: what
the edges give with its weights, water_filling's fluid model), and Algorithm 1 at the edges
(every resource shared by the priorities, work-conserving: what the edges do without a center).
Per instance: the minimum over users of (total given / exact total), users whose exact total is
not ~0; and the least utilisation among the resources whose demand exceeds their capacity.
Targets: min ratio >= 0.95 on every instance; >= 95% of capacity used wherever demand exceeds it.
"""

import argparse
import sys

import numpy as np

from benchmarks.policy_instances import exact_allocation, machine, small, static_allocation
from benchmarks.scenario_runner import Cell, as_given, distribution, run_cells, steal_line, worst
from vnode_sync.coordinator.policy.local_weights import local_weights

BUCKETS = (0.0, 0.5, 0.9, 0.95, 0.98, 0.99, 0.999, 1.0 + 1e-9)
QUANTILES = (0, 1, 5, 25, 50, 100)
# Each instance solved three ways, in this order (pure CPU work: the order cannot favour one).
POLICIES = {"exact": exact_allocation, "step": lambda cluster: local_weights(*cluster.args()),
            "static": static_allocation}


def measure(cluster) -> dict:
    """One instance's figures, its three cells run here."""
    ((_, _, cells),) = run_cells([(0, cluster)], POLICIES, as_given)
    return judge(cluster, cells)


def judge(cluster, cells: dict[str, Cell]) -> dict:
    exact, step, static = cells["exact"].outcome, cells["step"].outcome, cells["static"].outcome
    exact_totals = exact.sum(axis=1)
    counted = exact_totals > 1e-6 * cluster.capacity.max()
    oversubscribed = cluster.ceiling().sum(axis=0) > cluster.capacity * (1 + 1e-6)

    def ratios(allocation):
        return allocation.sum(axis=1)[counted] / exact_totals[counted]

    def utilisation(allocation):
        used = allocation.sum(axis=0)[oversubscribed] / cluster.capacity[oversubscribed]
        return float(used.min()) if used.size else 1.0

    return {"shape": cluster.shape, "step": ratios(step.allocation), "static": ratios(static),
            "step_min": float(ratios(step.allocation).min(initial=1.0)),
            "static_min": float(ratios(static).min(initial=1.0)),
            "step_use": utilisation(step.allocation), "exact_use": utilisation(exact),
            "static_use": utilisation(static), "iterations": step.iterations, "converged": step.converged,
            "exact_cpu": cells["exact"].cpu_seconds, "step_cpu": cells["step"].cpu_seconds}


def histogram(values) -> str:
    counts, _ = np.histogram(np.asarray(values), bins=BUCKETS)
    return "  ".join(f"[{lo:g},{min(hi, 1.0):g}{']' if hi > 1 else ')'}: {n}"
                     for lo, hi, n in zip(BUCKETS[:-1], BUCKETS[1:], counts))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=120)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(f"# {machine()}")
    print(f"$ python -m benchmarks.weight_step_fairness --instances {args.instances} --seed {args.seed}", flush=True)
    rng = np.random.default_rng(args.seed)
    rows, cells = [], []
    drawn = ((i, small(rng)) for i in range(args.instances))   # one generator: instance i as before
    for i, cluster, by_policy in run_cells(drawn, POLICIES, as_given):
        rows.append(judge(cluster, by_policy))
        cells += by_policy.values()
        r = rows[-1]
        print(f"  {i:>3} {r['shape'][0]:>3} users x {r['shape'][1]:>3} resources: min total/exact step "
              f"{r['step_min']:.4f} static {r['static_min']:.4f}; least use where oversubscribed step "
              f"{r['step_use']:.4f} exact {r['exact_use']:.4f}; {r['iterations']} iterations; CPU step/exact "
              f"{r['step_cpu'] / max(r['exact_cpu'], 1e-9):.3f}", flush=True)
    step_min = [r["step_min"] for r in rows]
    static_min = [r["static_min"] for r in rows]
    pooled_step = np.concatenate([r["step"] for r in rows])
    pooled_static = np.concatenate([r["static"] for r in rows])
    use = [r["step_use"] for r in rows]
    print()
    print(f"instances: {len(rows)}; users {sum(r['shape'][0] for r in rows)}; "
          f"sizes up to {max(r['shape'][0] for r in rows)} users x {max(r['shape'][1] for r in rows)} resources")
    print("per instance, min over users of total / exact total (the baseline, same run):")
    print(f"  weight step        {distribution(step_min, QUANTILES)}")
    print(f"  Algorithm 1 edges  {distribution(static_min, QUANTILES)}")
    print(f"  weight step histogram: {histogram(step_min)}")
    print("every user, total / exact total:")
    print(f"  weight step        {distribution(pooled_step, QUANTILES)}")
    print(f"  Algorithm 1 edges  {distribution(pooled_static, QUANTILES)}")
    print("per instance, least utilisation of a resource whose demand exceeds its capacity:")
    print(f"  weight step        {distribution(use, QUANTILES)}")
    print(f"  exact              {distribution([r['exact_use'] for r in rows], QUANTILES)}")
    print(f"iterations: median {np.median([r['iterations'] for r in rows]):.0f}, max "
          f"{max(r['iterations'] for r in rows)}; converged {sum(r['converged'] for r in rows)}/{len(rows)}")
    print(f"CPU, weight step / exact solver: median {np.median([r['step_cpu'] / r['exact_cpu'] for r in rows]):.4f} "
          f"(exact: median {np.median([r['exact_cpu'] for r in rows]):.3f} s, max {max(r['exact_cpu'] for r in rows):.2f} s)")
    w = worst(dict(enumerate(step_min)))
    print(f"worst instance: #{w}, {rows[w]['shape'][0]} users x {rows[w]['shape'][1]} resources, weight step "
          f"{step_min[w]:.4f} (Algorithm 1 edges {static_min[w]:.4f})")
    print(steal_line(cells))
    met_fair, met_use = min(step_min) >= 0.95, min(use) >= 0.95
    print(f"target min ratio >= 0.95 on every instance: {'met' if met_fair else 'NOT met'} ({min(step_min):.4f}); "
          f">= 95% used where oversubscribed: {'met' if met_use else 'NOT met'} ({min(use):.4f})")
    return 0 if met_fair and met_use else 1


if __name__ == "__main__":
    sys.exit(main())
