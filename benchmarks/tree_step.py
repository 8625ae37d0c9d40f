"""The tree weight step against the exact hierarchical max-min on random trees, and its cost at scale.

    .venv/bin/python -m benchmarks.tree_step [--seed 1] [--trees 120] [--max-users 50] [--max-resources 20]
                                             [--groups 100] [--users 1000] [--resources 10000]

Part 1: --trees random trees (benchmarks.tree_instances.random_tree_cluster: depth 1-3, 2..--max-users
users, 1..--max-resources resources, weights 1-10 at every level, skewed demand), twice: weights only,
and with floors and ceilings on a tenth of the users and groups. Each is solved by the exact reference
(policy.hierarchical_max_min, the baseline) and the tree step (policy.tree_step) in the same run.
Per tree: the fairness index of the flat step's tests (min over users of total / exact total, users
whose exact total is not ~0), the same index over the root's children (groups), and the CPU of each.
Printed: their distribution (min, p5, median), how many trees reach 0.95, and the worst tree.
Part 2: the cost at --users users in --groups groups x --resources resources (every user demanding
on every resource, benchmarks.tree_instances.grouped_cluster): CPU of one tree step, and of today's
flat step (policy.local_weights, the users' own weights) on the same users and demand in the same
run, both with their passes on one thread ("of one core"), and their ratio.
"""

import argparse
import sys

import numpy as np

from benchmarks.policy_instances import machine
from benchmarks.scenario_runner import Cell, as_given, cpu, distribution, run_cells, steal_line, worst
from benchmarks.tree_instances import fairness, grouped_cluster, random_tree_cluster
from vnode_sync.coordinator.policy.column_shards import ColumnShards
from vnode_sync.coordinator.policy.hierarchical_max_min import hierarchical_max_min
from vnode_sync.coordinator.policy.local_weights import local_weights
from vnode_sync.coordinator.policy.tree_step import tree_weights


# Each tree solved both ways, in this order (pure CPU work: the order cannot favour one).
POLICIES = {"exact": lambda c: hierarchical_max_min(c.capacity, c.arrays, c.demand),
            "step": lambda c: tree_weights(c.capacity, c.arrays, c.demand)}


def judge(cluster, cells: dict[str, Cell]) -> dict:
    exact, step = cells["exact"].outcome, cells["step"].outcome
    scale = cluster.capacity.max()
    got, want = step.user_totals(), exact.user_totals()
    counted = want > 1e-6 * scale
    ratios = got[counted] / want[counted]
    top = cluster.arrays.children(-1)
    groups = exact.totals[top] > 1e-6 * scale
    return {"shape": cluster.shape, "height": cluster.arrays.height,
            "users": fairness(step.allocation, exact.allocation, scale),
            "groups": float((step.totals[top][groups] / exact.totals[top][groups]).min(initial=1.0)),
            "worst_user": int(np.flatnonzero(counted)[np.argmin(ratios)]) if ratios.size else -1,
            "exact_cpu": cells["exact"].cpu_seconds, "step_cpu": cells["step"].cpu_seconds, "steps": step.steps}


def fairness_part(trees: int, seed: int, max_users: int, max_resources: int, bounds: bool) -> list[dict]:
    print(f"Part 1{'b' if bounds else 'a'}: {trees} random trees, "
          f"{'floors and ceilings on a tenth of the users and groups' if bounds else 'weights only'}")
    rng = np.random.default_rng(seed)
    rows, cells = [], []
    drawn = ((i, random_tree_cluster(rng, max_users, max_resources, bounds)) for i in range(trees))
    for i, cluster, by_policy in run_cells(drawn, POLICIES, as_given):
        r = judge(cluster, by_policy)
        rows.append(r)
        cells += by_policy.values()
        print(f"  {i:>3} depth {r['height']} {r['shape'][0]:>2} users x {r['shape'][1]:>2} resources: users "
              f"{r['users']:.4f} groups {r['groups']:.4f}; {r['steps']:>2} flat steps; "
              f"CPU exact {r['exact_cpu']:.2f} s step {r['step_cpu']:.3f} s", flush=True)
    users, groups = [r["users"] for r in rows], [r["groups"] for r in rows]
    worst_tree = worst(dict(enumerate(users)))
    w = rows[worst_tree]
    print(f"  users' index (min over users of total / exact total): {distribution(users)}; "
          f">= 0.95 on {sum(u >= 0.95 for u in users)}/{len(rows)} trees")
    print(f"  groups' index (the root's children's totals):          {distribution(groups)}; "
          f">= 0.95 on {sum(g >= 0.95 for g in groups)}/{len(rows)} trees")
    for depth in (1, 2, 3):
        at = [r["users"] for r in rows if r["height"] == depth]
        if at:
            print(f"  depth {depth}: {len(at)} trees, users' index {distribution(at)}")
    print(f"  worst tree: #{worst_tree}, depth {w['height']}, {w['shape'][0]} users x {w['shape'][1]} resources, user "
          f"u{w['worst_user']} at {w['users']:.4f} of its exact total (groups' index there {w['groups']:.4f})")
    print(f"  CPU: exact median {np.median([r['exact_cpu'] for r in rows]):.3f} s (max "
          f"{max(r['exact_cpu'] for r in rows):.2f} s); step median {np.median([r['step_cpu'] for r in rows]):.4f} s")
    print(f"  {steal_line(cells)}")
    print()
    return rows


def cost_part(groups: int, users: int, resources: int) -> None:
    print(f"Part 2: {users} users in {groups} groups x {resources} resources, every user demanding on every "
          "resource; one core")
    cluster = grouped_cluster(groups, users, resources)
    one_core = ColumnShards(cluster.shape, 1)
    weight = cluster.arrays.weight[cluster.arrays.leaf]
    no_floor, no_ceiling = np.zeros(users), np.full(users, np.inf)
    flat, flat_cpu = cpu(lambda: local_weights(cluster.capacity, weight, cluster.demand, no_floor, no_ceiling,
                                               shards=one_core))
    step, step_cpu = cpu(lambda: tree_weights(cluster.capacity, cluster.arrays, cluster.demand, shards=one_core))
    print(f"  today's flat step: {flat_cpu:.2f} s ({flat.iterations} iterations)")
    print(f"  tree step:         {step_cpu:.2f} s ({step.steps} flat steps)")
    print(f"  tree / flat:       {step_cpu / flat_cpu:.2f}")
    top = cluster.arrays.children(-1)
    share = step.totals[top] / cluster.arrays.weight[top]
    print(f"  groups' totals per weight, max / min: {share.max() / share.min():.4f} (1 where every group is "
          "backlogged everywhere)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--trees", type=int, default=120)
    parser.add_argument("--max-users", type=int, default=50)
    parser.add_argument("--max-resources", type=int, default=20)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--resources", type=int, default=10000)
    args = parser.parse_args()
    if args.trees < 1 or args.max_users < 2 or args.max_resources < 1 or not 0 < args.groups <= args.users:
        parser.error("--trees >= 1, --max-users >= 2, --max-resources >= 1 and 0 < --groups <= --users")
    print(f"# {machine()}")
    print(f"$ python -m benchmarks.tree_step --seed {args.seed} --trees {args.trees} --max-users {args.max_users} "
          f"--max-resources {args.max_resources} --groups {args.groups} --users {args.users} "
          f"--resources {args.resources}", flush=True)
    plain = fairness_part(args.trees, args.seed, args.max_users, args.max_resources, bounds=False)
    fairness_part(args.trees, args.seed, args.max_users, args.max_resources, bounds=True)
    cost_part(args.groups, args.users, args.resources)
    met = min(r["users"] for r in plain) >= 0.95
    print(f"target users' index >= 0.95 on every tree (weights only): {'met' if met else 'NOT met'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
