"""The global weight step: local weights whose edge shares add up to the weighted max-min."""

import math

import numpy as np
import pytest

from vnode_sync.coordinator.policy.column_shards import ColumnShards
from vnode_sync.coordinator.policy.exact_max_min import Claim, allocate
from vnode_sync.coordinator.policy.local_weights import local_weights
from vnode_sync.coordinator.policy.water_filling import water_fill
from vnode_sync.errors import InvalidArgument

MB = 1e6
INF = math.inf
NONE = np.zeros(2)
NO_LIMIT = np.full(2, INF)


def test_on_one_resource_backlogged_users_get_the_ratio_of_their_priorities():
    step = local_weights(np.array([60 * MB]), np.array([4.0, 8.0]), np.full((2, 1), INF), NONE, NO_LIMIT)
    assert step.allocation[:, 0] == pytest.approx([20 * MB, 40 * MB], rel=1e-3)
    assert step.weight[1, 0] / step.weight[0, 0] == pytest.approx(2, rel=1e-3)


def test_skew_alice_on_one_node_bob_on_both_get_equal_totals_not_per_node_shares():
    """Per-node Algorithm 1 gives alice (8) 40 and bob (4) 20 + 60; the weighted max-min is 60 and 60:
    bob's weight moves to dn1, where only he reads."""
    demand = np.array([[INF, 0.0], [INF, INF]])
    step = local_weights(np.array([60 * MB, 60 * MB]), np.array([8.0, 4.0]), demand, NONE, NO_LIMIT,
                         max_iterations=200)
    assert step.totals() == pytest.approx([60 * MB, 60 * MB], rel=0.02)
    assert step.weight[0, 0] > 30 * step.weight[1, 0]   # on dn0, alice's weight dwarfs bob's


def test_users_wanting_every_node_alike_get_their_priorities_on_each_whatever_the_last_step_found():
    """Any split of 80 and 40 over two nodes is max-min; a lopsided one from earlier steps (alice mostly
    on dn0, bob on dn1) would leave a replicated writer, whose pipeline crosses both, at its worse node's pace."""
    demand = np.full((2, 2), INF)
    lopsided = np.array([[8.0, 1.0], [1.0, 8.0]])
    step = local_weights(np.array([60 * MB, 60 * MB]), np.array([8.0, 4.0]), demand, NONE, NO_LIMIT,
                         previous=lopsided)
    assert step.weight[0] / step.weight[1] == pytest.approx([2, 2], rel=1e-4)
    assert step.allocation == pytest.approx(np.array([[40 * MB, 40 * MB], [20 * MB, 20 * MB]]), rel=1e-3)


def test_a_finite_demand_is_met_and_its_user_keeps_a_standby_weight_for_more():
    """a reads 5 MB/s on r0 beside b and c, and without pause on r1 beside d, e, f (all weight 1)."""
    demand = np.array([[5 * MB, INF], [INF, 0], [INF, 0], [0, INF], [0, INF], [0, INF]])
    step = local_weights(np.array([60 * MB, 60 * MB]), np.ones(6), demand, np.zeros(6), np.full(6, INF))
    assert step.allocation[:3, 0] == pytest.approx([5 * MB, 27.5 * MB, 27.5 * MB], rel=1e-3)
    assert step.allocation[:, 1] == pytest.approx([11.25 * MB, 0, 0, 16.25 * MB, 16.25 * MB, 16.25 * MB], rel=1e-3)
    # Met on r0, a keeps its whole weight there (not the 5/16.25 of it that its total puts there):
    # a burst of a's on r0 is served at 1:1:1 at once, before any step moves a weight.
    assert step.weight[0, 0] == pytest.approx(step.weight[1, 0], rel=1e-3)


def test_an_idle_user_holds_nothing_back_and_keeps_a_weight_to_come_back_with():
    demand = np.array([[0.0, 0.0], [INF, INF]])
    step = local_weights(np.array([60 * MB, 60 * MB]), np.array([8.0, 4.0]), demand, NONE, NO_LIMIT)
    assert step.allocation[1] == pytest.approx([60 * MB, 60 * MB], rel=1e-4)
    assert (step.allocation[0] == 0).all()
    # Back on one node, its first packets are served at 8 against bob's weight there (his total spans two nodes).
    assert step.weight[0] == pytest.approx([8, 8])
    back, _ = water_fill(step.weight, np.array([60 * MB, 60 * MB]), np.array([[60 * MB, 0], [60 * MB, 60 * MB]]))
    assert back[0, 0] >= 2 / 3 * 60 * MB


def test_a_reservation_holds_against_three_heavier_users_and_a_limit_caps_on_every_resource():
    demand = np.full((4, 2), INF)
    weight = np.array([1.0, 8.0, 8.0, 8.0])
    step = local_weights(np.array([60 * MB, 60 * MB]), weight, demand, np.array([15 * MB, 0, 0, 0]),
                         np.array([INF, INF, 10 * MB, INF]))
    assert step.allocation[0] == pytest.approx([15 * MB, 15 * MB], rel=1e-3)
    assert step.allocation[2] == pytest.approx([10 * MB, 10 * MB], rel=1e-3)
    assert step.allocation[1] == pytest.approx([17.5 * MB, 17.5 * MB], rel=1e-3)


def _random_cluster(rng, users, resources):
    capacity = rng.uniform(20, 100, resources) * MB
    weight = rng.integers(1, 11, users).astype(float)
    demand = np.where(rng.random((users, resources)) < 0.3, INF, rng.pareto(1.2, (users, resources)) * 5 * MB)
    demand[rng.random((users, resources)) > rng.uniform(0.1, 0.9)] = 0.0
    reservation = np.where(rng.random(users) < 0.2, rng.uniform(0, 5, users) * MB, 0.0)
    limit = np.where(rng.random(users) < 0.2, rng.uniform(5, 60, users) * MB, INF)
    return capacity, weight, demand, reservation, limit


def _exact_totals(capacity, weight, demand, reservation, limit):
    users, resources = demand.shape
    claims = {u: Claim(weight[u], reservation[u], limit[u]) for u in range(users)}
    wanted = {(u, r): demand[u, r] for u in range(users) for r in range(resources) if demand[u, r] > 0}
    totals = np.zeros(users)
    for (u, _), value in allocate(dict(enumerate(capacity)), claims, wanted).items():
        totals[u] += value
    return totals


@pytest.mark.parametrize("seed", range(12))
def test_random_clusters_come_within_5_percent_of_the_exact_weighted_max_min(seed):
    rng = np.random.default_rng(seed)
    capacity, weight, demand, reservation, limit = _random_cluster(rng, int(rng.integers(2, 25)),
                                                                    int(rng.integers(1, 30)))
    exact = _exact_totals(capacity, weight, demand, reservation, limit)
    step = local_weights(capacity, weight, demand, reservation, limit)
    counted = exact > 1e-6 * capacity.max()
    assert (step.totals()[counted] / exact[counted]).min() >= 0.95
    # Feasible and work-conserving: no resource over capacity or anyone over its ceiling; a resource
    # with unmet demand is full.
    ceiling = np.minimum(np.minimum(demand, limit[:, None]), capacity[None, :])
    assert (step.allocation <= ceiling * (1 + 1e-4) + 1).all()
    load = step.allocation.sum(axis=0)
    assert (load <= capacity * (1 + 2e-4)).all()
    short = (step.allocation < ceiling * (1 - 1e-3)).any(axis=0)
    assert (load[short] >= capacity[short] * 0.999).all()
    assert (step.weight > 0).all()


def test_a_warm_start_from_the_last_weights_settles_in_fewer_steps():
    rng = np.random.default_rng(5)
    capacity, weight, demand, reservation, limit = _random_cluster(rng, 30, 40)
    cold = local_weights(capacity, weight, demand, reservation, limit, max_iterations=200)
    warm = local_weights(capacity, weight, demand, reservation, limit, previous=cold.weight, max_iterations=200)
    assert warm.converged and warm.iterations < cold.iterations
    assert warm.totals() == pytest.approx(cold.totals(), rel=0.01)


def test_the_last_levels_only_warm_start_the_fills_and_a_time_budget_ends_the_step_after_one_iteration():
    rng = np.random.default_rng(7)
    capacity, weight, demand, reservation, limit = _random_cluster(rng, 30, 40)
    last = local_weights(capacity, weight, demand, reservation, limit, max_iterations=200)
    moved = demand * rng.uniform(0.8, 1.2, demand.shape)
    plain = local_weights(capacity, weight, moved, reservation, limit, previous=last.weight, max_iterations=200)
    leveled = local_weights(capacity, weight, moved, reservation, limit, previous=last.weight, max_iterations=200,
                            previous_level=last.level)
    assert leveled.totals() == pytest.approx(plain.totals(), rel=0.01)
    timed = local_weights(capacity, weight, moved, reservation, limit, previous=last.weight, seconds=0.0)
    assert timed.iterations == 1 and not timed.converged
    with pytest.raises(InvalidArgument, match="previous levels"):
        local_weights(capacity, weight, demand, reservation, limit, previous_level=last.level[:-1])


@pytest.mark.parametrize("seed", range(3))
def test_blocks_of_resources_worked_on_threads_give_the_step_one_thread_gives(seed):
    rng = np.random.default_rng(seed)
    capacity, weight, demand, reservation, limit = _random_cluster(rng, 25, 60)
    held = rng.random(demand.shape) < 0.2
    last = local_weights(capacity, weight, demand, reservation, limit, max_iterations=3)
    args = dict(previous=last.weight, previous_level=last.level, held=held, max_iterations=200)
    one = local_weights(capacity, weight, demand, reservation, limit, **args)
    blocks = local_weights(capacity, weight, demand, reservation, limit, **args,
                           shards=ColumnShards(demand.shape, workers=3, pairs_per_block=1))
    # Totals, not weights: where users want several resources alike, many splits are max-min, and a
    # rounding in another order may end in another.
    assert blocks.totals() == pytest.approx(one.totals(), rel=1e-3, abs=1e-4 * capacity.max())
    with pytest.raises(InvalidArgument, match="column shards for 59 resources"):
        local_weights(capacity, weight, demand, reservation, limit, shards=ColumnShards((25, 59)))


@pytest.mark.parametrize("change,message", [
    ({"weight": np.array([1.0, 0.0])}, "global weights"),
    ({"demand": np.array([[1.0, -1.0], [0.0, 0.0]])}, "demand"),
    ({"capacity": np.array([1.0])}, "shapes"),
    ({"limit": np.array([np.nan, 1.0])}, "limit"),
])
def test_bad_input_is_refused_in_one_line(change, message):
    args = {"capacity": np.array([60 * MB, 60 * MB]), "weight": np.array([1.0, 2.0]),
            "demand": np.full((2, 2), INF), "reservation": NONE, "limit": NO_LIMIT, **change}
    with pytest.raises(InvalidArgument, match=message):
        local_weights(**args)


def test_a_held_users_demand_is_at_least_its_weighted_share_so_a_corner_cannot_hold_it_to_a_trickle():
    """alice and bob (8 : 8) read from dn0 and dn1. The step began at a corner (alice 0.58 : 7.42 on dn0,
    the reverse on dn1: equal totals, which max-min allows); held at 0.58, alice moved ~2 MB/s on dn0,
    and 4x that (7 MB/s) as her demand there kept her weight there small. Counted on for her weighted
    share there instead, the step leaves the corner at once: 30 each on each node."""
    demand = np.array([[7 * MB, 200 * MB], [200 * MB, 7 * MB]])
    held = np.ones((2, 2), dtype=bool)
    corner = np.array([[0.585, 7.415], [7.415, 0.585]])
    step = local_weights(np.array([60 * MB, 60 * MB]), np.array([8.0, 8.0]), demand, NONE, NO_LIMIT,
                         previous=corner, held=held)
    assert step.allocation == pytest.approx(np.full((2, 2), 30 * MB), rel=0.02)
    assert step.weight[0, 0] == pytest.approx(step.weight[1, 0], rel=0.05)


def test_a_held_user_is_counted_on_for_its_weighted_share_and_gets_no_standby_weight():
    """Held at 5 MB/s beside two others on resource 0 (all at weight 1): the step counts on its share
    there (20 of 60), not the 5 it moved, and plans a weight for it rather than a standby one."""
    demand = np.array([[5 * MB, INF], [INF, 0], [INF, 0], [0, INF], [0, INF], [0, INF]])
    held = np.zeros((6, 2), dtype=bool)
    held[0, 0] = True
    step = local_weights(np.array([60 * MB, 60 * MB]), np.ones(6), demand, np.zeros(6), np.full(6, INF), held=held)
    assert step.allocation[0, 0] == pytest.approx(20 * MB, rel=1e-2)
    assert step.allocation[1:3, 0] == pytest.approx([20 * MB, 20 * MB], rel=1e-2)
    assert step.weight[0, 0] == pytest.approx(step.weight[1, 0], rel=1e-2)


def test_a_user_held_where_it_moved_nothing_keeps_its_standby_weight_there_rather_than_a_trace():
    """bob waited a whole span on dn0 and moved nothing (held, demand bound 0): at a trace weight
    he would move nothing again, held, for good; at his standby weight the edge serves him."""
    demand = np.array([[INF, INF], [0.0, INF]])
    held = np.array([[True, True], [True, True]])
    step = local_weights(np.array([60 * MB, 60 * MB]), np.array([8.0, 4.0]), demand, NONE, NO_LIMIT, held=held)
    assert step.weight[1, 0] == pytest.approx(4.0, rel=1e-3)
    assert step.weight[1, 0] > 0.2 * step.weight[0, 0]


def test_a_user_held_where_it_moved_a_trickle_is_counted_on_for_its_weighted_share_not_the_trickle():
    """bob's writes, just back, moved 20 KB/s on dn1 in the span (his first bytes fell at its end) and
    waited there: a weight for 20 KB/s would have dn1 serve one 64 KiB packet of his in seconds. He is
    counted on for his weighted share there (4 of 12); at a node with many users, for his share there."""
    demand = np.array([[INF, INF], [7 * MB, 20_000.0]])
    held = np.array([[True, True], [False, True]])
    step = local_weights(np.array([60 * MB, 60 * MB]), np.array([8.0, 4.0]), demand, NONE, NO_LIMIT, held=held)
    assert step.allocation[1, 1] == pytest.approx(20 * MB, rel=0.02)
    many = local_weights(np.array([60 * MB]), np.array([4.0] + [8.0] * 29), np.vstack([[20_000.0], np.full((29, 1), INF)]),
                         np.zeros(30), np.full(30, INF), held=np.ones((30, 1), dtype=bool))
    assert many.ceiling[0, 0] == pytest.approx(4 / 236 * 60 * MB, rel=0.02)
