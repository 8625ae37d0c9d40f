"""The weight step for a tree: today's step for one level, groups' totals by weight, idle shares kept in the group."""

import math

import numpy as np
import pytest

from benchmarks.tree_instances import random_tree_cluster
from vnode_sync.coordinator.policy.hierarchical_max_min import within_parents
from vnode_sync.coordinator.policy.local_weights import local_weights
from vnode_sync.coordinator.policy.tree_step import tree_weights
from vnode_sync.coordinator.policy.weight_tree import Group, User, WeightTree
from vnode_sync.errors import InvalidArgument

MB = 1e6
INF = math.inf
ONE_DISK = np.array([90 * MB])
TWO_TO_ONE = WeightTree((Group("physics", 2, (User("ann", 1),)),
                         Group("biology", 1, (User("bob", 1), User("cy", 1), User("dee", 1)))))
TREES = 100


@pytest.mark.parametrize("seed", range(6))
def test_a_tree_of_one_level_gives_exactly_todays_step(seed):
    rng = np.random.default_rng(seed)
    users, resources = int(rng.integers(2, 25)), int(rng.integers(1, 30))
    capacity = rng.uniform(20, 100, resources) * MB
    weight = rng.integers(1, 11, users).astype(float)
    demand = np.where(rng.random((users, resources)) < 0.3, INF, rng.pareto(1.2, (users, resources)) * 5 * MB)
    demand[rng.random((users, resources)) > rng.uniform(0.1, 0.9)] = 0.0
    floor = np.where(rng.random(users) < 0.2, rng.uniform(0, 5, users) * MB, 0.0)
    ceiling = np.where(rng.random(users) < 0.2, rng.uniform(5, 60, users) * MB, INF)
    names = [f"u{i}" for i in range(users)]
    tree = WeightTree.flat(names, weight, floor, ceiling).arrays(names)
    flat = local_weights(capacity, weight, demand, floor, ceiling)
    step = tree_weights(capacity, tree, demand)
    assert np.array_equal(step.step.weight, flat.weight) and np.array_equal(step.allocation, flat.allocation)
    again = tree_weights(capacity, tree, demand, previous=step)
    warm = local_weights(capacity, weight, demand, floor, ceiling, previous=flat.weight, previous_level=flat.level)
    assert np.array_equal(again.step.weight, warm.weight)


@pytest.mark.parametrize("active", [(1, 3), (1, 2), (1, 1)])
def test_two_groups_at_2_to_1_split_2_to_1_whatever_the_number_of_their_active_users(active):
    _, second = active
    demand = np.array([[INF] + [INF] * second + [0.0] * (3 - second)]).T
    step = tree_weights(ONE_DISK, TWO_TO_ONE.arrays(), demand)
    assert step.totals[0] == pytest.approx(60 * MB, rel=0.01)
    assert step.totals[2] == pytest.approx(30 * MB, rel=0.01)
    assert step.user_totals()[1:1 + second] == pytest.approx([30 * MB / second] * second, rel=0.01)
    # The edges, sharing the disk by the step's weights alone, give the same split.
    weights = step.step.weight[:, 0]
    active_users = demand[:, 0] > 0
    assert weights[0] / weights[active_users].sum() == pytest.approx(2 / 3, rel=0.01)


def test_an_idle_users_share_goes_to_its_own_group_first():
    step = tree_weights(ONE_DISK, TWO_TO_ONE.arrays(), np.array([[INF, INF, INF, 0.0]]).T)
    assert step.user_totals() == pytest.approx([60 * MB, 15 * MB, 15 * MB, 0], rel=0.01, abs=1)
    met = tree_weights(ONE_DISK, TWO_TO_ONE.arrays(), np.array([[10 * MB, INF, INF, 0.0]]).T)
    assert met.user_totals() == pytest.approx([10 * MB, 40 * MB, 40 * MB, 0], rel=0.01, abs=1)
    nested = WeightTree((Group("physics", 1, (User("ann", 1), User("eve", 1))),
                         Group("biology", 1, (User("bob", 1), User("cy", 1)))))
    step = tree_weights(ONE_DISK, nested.arrays(), np.array([[INF, 5 * MB, INF, INF]]).T)
    assert step.user_totals() == pytest.approx([40 * MB, 5 * MB, 22.5 * MB, 22.5 * MB], rel=0.01)


def test_an_idle_or_met_user_keeps_a_standby_weight_of_its_due_so_it_takes_its_share_when_it_reads():
    """The control loop's next demand is what a user moved under these weights. ann is met at 10 MB/s,
    dee idle: bob and cy get biology's 80. dee weighs what a sibling that reads gets (40), not ~0 (she
    would move ~nothing once back, want ~nothing at the next tick, and stay there); ann weighs physics'
    due (2 x biology's 80), not her 10."""
    step = tree_weights(ONE_DISK, TWO_TO_ONE.arrays(), np.array([[10 * MB, INF, INF, 0.0]]).T)
    weights = step.step.weight[:, 0]
    assert weights == pytest.approx([160 * MB, 40 * MB, 40 * MB, 40 * MB], rel=0.02)
    # Under them the edge gives what the step planned while the demands hold.
    assert step.step.realised(step.step.weight)[:, 0] == pytest.approx([10 * MB, 40 * MB, 40 * MB, 0], rel=0.01,
                                                                        abs=1)


def test_a_held_user_keeps_no_standby_weight_where_it_takes_bytes():
    """ann waited (held): her demand, 40, is only a lower bound (on a node that delivers less than its
    configured 90 she may want her 60 yet show 40), so she weighs what she is given and the node splits
    what it delivers as the step planned, 40 : 50. Not held, she is met at 40 and weighs physics' due
    (2 x biology's 50): two thirds of the weights, taken at once if she wants more."""
    demand = np.array([[40 * MB, INF, INF, INF]]).T
    held = tree_weights(ONE_DISK, TWO_TO_ONE.arrays(), demand, held=np.ones((4, 1), dtype=bool)).step.weight[:, 0]
    assert held[0] / held.sum() == pytest.approx(40 / 90, rel=0.01)
    unheld = tree_weights(ONE_DISK, TWO_TO_ONE.arrays(), demand).step.weight[:, 0]
    assert unheld[0] / unheld.sum() == pytest.approx(2 / 3, rel=0.01)


def test_a_capped_groups_user_keeps_the_weight_the_levels_gave_it_where_it_takes_bytes():
    """physics is capped at 20 MB/s: ann, reading all she gets, weighs her 20 (her due would take physics
    past its ceiling at an edge that knows only weights); eve, idle, her due."""
    tree = WeightTree((Group("physics", 1, (User("ann", 1), User("eve", 1)), ceiling=20 * MB),
                       Group("biology", 1, (User("bob", 1),))))
    step = tree_weights(ONE_DISK, tree.arrays(), np.array([[INF, 0.0, INF]]).T)
    weights = step.step.weight[:, 0]
    assert step.user_totals() == pytest.approx([20 * MB, 0, 70 * MB], rel=0.01, abs=1)
    assert weights[0] == pytest.approx(20 * MB, rel=0.01)
    assert weights[1] >= 20 * MB
    # ann held at physics' ceiling (a cap-only edge holds her there) on a disk with room: still 20, not
    # the weighted share of the disk a held user's demand is raised to in the flat step
    room = tree_weights(ONE_DISK, tree.arrays(), np.array([[40 * MB, 0.0, 10 * MB]]).T,
                        held=np.array([[True, False, False]]).T)
    assert room.user_totals() == pytest.approx([20 * MB, 0, 10 * MB], rel=0.01, abs=1)


def test_between_groups_children_are_served_as_their_parent_owes_them():
    """ann (9) on r0 and bob (1) on r1 in physics; cy in biology on both: ann 9, bob 1, cy 1 + 9."""
    tree = WeightTree((Group("physics", 1, (User("ann", 9), User("bob", 1))), Group("biology", 1, (User("cy", 1),))))
    step = tree_weights(np.array([10 * MB, 10 * MB]), tree.arrays(), np.array([[INF, 0.0], [0.0, INF], [INF, INF]]))
    assert step.allocation == pytest.approx(np.array([[9 * MB, 0], [0, 1 * MB], [1 * MB, 9 * MB]]), rel=0.02, abs=1e4)


def _fairness_over_trees() -> tuple[np.ndarray, np.ndarray]:
    """Per random tree (fixed seeds, weights only): the fast step against the definition computed exactly
    (hierarchical_max_min.within_parents on the step's allocation): min over every node of its total /
    the exact one given its parent's bytes; and the same over the root's children (groups), whose exact
    totals are the exact reference's first level. The flat step's index (benchmarks.tree_instances.fairness):
    nodes whose exact total is below 1e-6 of the largest capacity are not counted."""
    nodes, groups = [], []
    for seed in range(TREES):
        cluster = random_tree_cluster(np.random.default_rng(seed), max_users=50, max_resources=6)
        step = tree_weights(cluster.capacity, cluster.arrays, cluster.demand)
        allocation = step.allocation.astype(np.float64)
        exact = within_parents(cluster.capacity, cluster.arrays, cluster.demand, allocation)
        counted = exact > 1e-6 * cluster.capacity.max()
        ratio = step.totals[counted] / exact[counted]
        nodes.append(float(ratio.min(initial=1.0)))
        top = counted[cluster.arrays.children(-1)]
        groups.append(float((step.totals[cluster.arrays.children(-1)][top] /
                             exact[cluster.arrays.children(-1)][top]).min(initial=1.0)))
    return np.array(nodes), np.array(groups)


def _distribution(values: np.ndarray) -> str:
    worst = np.argsort(values)[:5]
    return (f"min {values.min():.4f} p5 {np.percentile(values, 5):.4f} median {np.median(values):.4f}; "
            f">= 0.95 on {(values >= 0.95).sum()}/{len(values)}; worst seeds {worst.tolist()}")


@pytest.fixture(scope="module")
def over_random_trees():
    return _fairness_over_trees()


def test_groups_totals_come_within_5_percent_of_the_exact_on_100_random_trees(over_random_trees):
    _, groups = over_random_trees
    assert groups.min() >= 0.95, _distribution(groups)


def test_every_nodes_total_comes_within_5_percent_of_the_exact_within_its_parents_bytes_on_100_random_trees(
        over_random_trees):
    nodes, _ = over_random_trees
    assert nodes.min() >= 0.95, _distribution(nodes)


def test_the_users_rows_may_come_in_any_order():
    cluster = random_tree_cluster(np.random.default_rng(7), max_users=30, max_resources=4)
    names = [f"u{i}" for i in range(cluster.shape[0])]
    order = np.random.default_rng(7).permutation(len(names))
    shuffled = tree_weights(cluster.capacity, cluster.tree.arrays([names[i] for i in order]), cluster.demand[order])
    in_order = tree_weights(cluster.capacity, cluster.arrays, cluster.demand)
    assert cluster.arrays.height > 1
    assert np.array_equal(shuffled.allocation, in_order.allocation[order])


def test_a_capped_groups_users_are_held_to_its_ceiling_where_the_resource_has_room():
    tree = WeightTree((Group("physics", 1, (User("ann", 1), User("eve", 1)), ceiling=20 * MB),
                       Group("biology", 1, (User("bob", 1),))))
    step = tree_weights(ONE_DISK, tree.arrays(), np.array([[INF, INF, 30 * MB]]).T)
    assert step.user_totals() == pytest.approx([10 * MB, 10 * MB, 30 * MB], rel=0.01)


def test_bad_input_is_refused_in_one_line():
    with pytest.raises(InvalidArgument, match="shapes"):
        tree_weights(ONE_DISK, TWO_TO_ONE.arrays(), np.full((3, 1), INF))
    with pytest.raises(InvalidArgument, match="demand must be >= 0"):
        tree_weights(ONE_DISK, TWO_TO_ONE.arrays(), np.array([[1.0, np.nan, 0, 0]]).T)
