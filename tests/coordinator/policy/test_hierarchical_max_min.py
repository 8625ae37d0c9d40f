"""The exact hierarchical weighted max-min: groups' totals first, then their children's within them; and the
definition level by level (within_parents): every group's children within the bytes the group holds."""

import math

import numpy as np
import pytest

from benchmarks.tree_instances import random_tree_cluster
from vnode_sync.coordinator.policy.exact_max_min import Claim, allocate
from vnode_sync.coordinator.policy.hierarchical_max_min import hierarchical_max_min, within_parents
from vnode_sync.coordinator.policy.weight_tree import Group, User, WeightTree, pair_bounds
from vnode_sync.errors import InvalidArgument

MB = 1e6
INF = math.inf
ONE_DISK = np.array([90 * MB])
# Two groups at 2 : 1, one user in the first and three in the second (issue 61's demonstration).
TWO_TO_ONE = WeightTree((Group("physics", 2, (User("ann", 1),)),
                         Group("biology", 1, (User("bob", 1), User("cy", 1), User("dee", 1)))))


@pytest.mark.parametrize("active", [(1, 3), (1, 1), (1, 2)])
def test_two_groups_at_2_to_1_split_2_to_1_whatever_the_number_of_their_active_users(active):
    first, second = active
    demand = np.array([[INF] * first + [0.0] * (1 - first) + [INF] * second + [0.0] * (3 - second)]).T
    got = hierarchical_max_min(ONE_DISK, TWO_TO_ONE.arrays(), demand)
    assert got.totals[0] == pytest.approx(60 * MB, rel=1e-6)     # physics
    assert got.totals[2] == pytest.approx(30 * MB, rel=1e-6)     # biology
    assert got.user_totals()[1:1 + second] == pytest.approx([30 * MB / second] * second, rel=1e-6)


def test_an_idle_users_share_goes_to_its_own_group_first():
    """ann wants only 10 of physics' 60: the other 50 go to biology, the only other group; dee idle in
    biology: his third goes to bob and cy, not to physics."""
    got = hierarchical_max_min(ONE_DISK, TWO_TO_ONE.arrays(), np.array([[10 * MB, INF, INF, 0.0]]).T)
    assert got.user_totals() == pytest.approx([10 * MB, 40 * MB, 40 * MB, 0], rel=1e-6, abs=1)
    nested = WeightTree((Group("physics", 1, (User("ann", 1), User("eve", 1))),
                         Group("biology", 1, (User("bob", 1), User("cy", 1)))))
    got = hierarchical_max_min(ONE_DISK, nested.arrays(), np.array([[INF, 5 * MB, INF, INF]]).T)
    # eve met at 5: ann takes the rest of physics' 45, not biology.
    assert got.user_totals() == pytest.approx([40 * MB, 5 * MB, 22.5 * MB, 22.5 * MB], rel=1e-6)


def test_a_groups_ceiling_caps_its_users_together_on_every_resource_and_the_rest_is_lent():
    tree = WeightTree((Group("physics", 8, (User("ann", 1), User("eve", 1)), ceiling=20 * MB),
                       Group("biology", 1, (User("bob", 1),))))
    got = hierarchical_max_min(np.array([60 * MB, 60 * MB]), tree.arrays(), np.full((3, 2), INF))
    assert got.allocation[:2].sum(axis=0) == pytest.approx([20 * MB, 20 * MB], rel=1e-6)
    assert got.allocation[2] == pytest.approx([40 * MB, 40 * MB], rel=1e-6)


def test_between_groups_the_children_are_measured_against_what_their_parent_owes_them():
    """Two resources of 10: physics' ann (9) wants only r0, its bob (1) only r1; biology's cy wants both.
    Groups 10 and 10; within physics 9 : 1, so cy takes 1 of r0 and 9 of r1."""
    tree = WeightTree((Group("physics", 1, (User("ann", 9), User("bob", 1))), Group("biology", 1, (User("cy", 1),))))
    demand = np.array([[INF, 0.0], [0.0, INF], [INF, INF]])
    got = hierarchical_max_min(np.array([10 * MB, 10 * MB]), tree.arrays(), demand)
    assert got.allocation == pytest.approx(np.array([[9 * MB, 0], [0, 1 * MB], [1 * MB, 9 * MB]]), rel=1e-6, abs=1)


@pytest.mark.parametrize("seed", range(8))
def test_a_tree_of_one_level_is_the_flat_exact_weighted_max_min(seed):
    rng = np.random.default_rng(seed)
    users, resources = int(rng.integers(2, 20)), int(rng.integers(1, 8))
    capacity = rng.uniform(20, 100, resources) * MB
    weight = rng.integers(1, 11, users).astype(float)
    demand = np.where(rng.random((users, resources)) < 0.3, INF, rng.pareto(1.2, (users, resources)) * 5 * MB)
    demand[rng.random((users, resources)) > 0.6] = 0.0
    floor = np.where(rng.random(users) < 0.2, rng.uniform(0, 5, users) * MB, 0.0)
    ceiling = np.where(rng.random(users) < 0.2, rng.uniform(5, 60, users) * MB, INF)
    names = [f"u{i}" for i in range(users)]
    got = hierarchical_max_min(capacity, WeightTree.flat(names, weight, floor, ceiling).arrays(names), demand)
    flat = allocate(dict(enumerate(capacity)), {u: Claim(weight[u], floor[u], ceiling[u]) for u in range(users)},
                    {(u, r): demand[u, r] for u in range(users) for r in range(resources) if demand[u, r] > 0})
    totals = np.zeros(users)
    for (u, _), value in flat.items():
        totals[u] += value
    assert got.user_totals() == pytest.approx(totals, rel=1e-6, abs=1e-6 * capacity.max())


@pytest.mark.parametrize("seed", range(12))
def test_random_trees_are_feasible_work_conserving_and_keep_every_groups_total(seed):
    cluster = random_tree_cluster(np.random.default_rng(seed), max_users=30, max_resources=6, bounds=True)
    tree, capacity, demand = cluster.arrays, cluster.capacity, cluster.demand
    got = hierarchical_max_min(capacity, tree, demand)
    ceiling, floor = pair_bounds(tree, capacity, demand)
    tol = 1e-6 * capacity.max()
    assert (got.allocation <= ceiling + tol).all() and (got.allocation >= floor - tol).all()
    load = got.allocation.sum(axis=0)
    assert (load <= capacity + tol).all()
    for g in np.flatnonzero((tree.row < 0) & np.isfinite(tree.ceiling)):
        assert (got.allocation[tree.members[g]].sum(axis=0) <= tree.ceiling[g] + tol).all()
    # A resource some user wants more of is full, or the user's groups are at their ceilings there.
    for u, r in zip(*np.nonzero(got.allocation < ceiling - tol)):
        capped = [g for g in np.flatnonzero(tree.row < 0) if u in tree.members[g]
                  and got.allocation[tree.members[g], r].sum() >= tree.ceiling[g] - tol]
        assert load[r] >= capacity[r] - 10 * tol or capped, (u, r)
    # Every node's total is its users' (the levels below kept what the levels above fixed).
    for node in range(tree.nodes):
        assert got.totals[node] == pytest.approx(got.user_totals()[tree.members[node]].sum(), abs=10 * tol)


def test_within_parents_shares_what_each_group_holds_on_each_resource_among_its_children_by_weight():
    """ann (9) wants r0 only, bob (1) r1 only; biology's cy both. The groups' totals are 10 and 10 whatever
    the split; within physics, ann and bob get what physics holds where each wants bytes."""
    tree = WeightTree((Group("physics", 1, (User("ann", 9), User("bob", 1))), Group("biology", 1, (User("cy", 1),))))
    capacity, demand = np.array([10 * MB, 10 * MB]), np.array([[INF, 0.0], [0.0, INF], [INF, INF]])
    for physics_r0 in (9 * MB, 5 * MB):
        allocation = np.array([[physics_r0, 0], [0, 10 * MB - physics_r0], [10 * MB - physics_r0, physics_r0]])
        got = within_parents(capacity, tree.arrays(), demand, allocation)
        assert got == pytest.approx([10 * MB, physics_r0, 10 * MB - physics_r0, 10 * MB, 10 * MB])
    # Siblings on one disk: by weight of what their group holds, an idle one's part to the others.
    allocation = np.array([[60 * MB], [30 * MB], [0.0], [0.0]])
    got = within_parents(ONE_DISK, TWO_TO_ONE.arrays(), np.array([[INF, INF, 0.0, 0.0]]).T, allocation)
    assert got == pytest.approx([60 * MB, 60 * MB, 30 * MB, 30 * MB, 0, 0], abs=1)


@pytest.mark.parametrize("seed", range(4))
def test_within_parents_at_the_root_is_the_exact_references_first_level(seed):
    cluster = random_tree_cluster(np.random.default_rng(seed), max_users=30, max_resources=6, bounds=seed % 2 == 1)
    exact = hierarchical_max_min(cluster.capacity, cluster.arrays, cluster.demand)
    got = within_parents(cluster.capacity, cluster.arrays, cluster.demand, exact.allocation)
    top = cluster.arrays.children(-1)
    assert got[top] == pytest.approx(exact.totals[top], abs=1e-6 * cluster.capacity.max())


def test_bad_input_is_refused_in_one_line():
    with pytest.raises(InvalidArgument, match="shapes"):
        within_parents(ONE_DISK, TWO_TO_ONE.arrays(), np.full((4, 1), INF), np.zeros((3, 1)))
    with pytest.raises(InvalidArgument, match="shapes"):
        hierarchical_max_min(ONE_DISK, TWO_TO_ONE.arrays(), np.full((3, 1), INF))
    with pytest.raises(InvalidArgument, match="demand must be >= 0"):
        hierarchical_max_min(ONE_DISK, TWO_TO_ONE.arrays(), np.array([[1.0, -1.0, 0, 0]]).T)
