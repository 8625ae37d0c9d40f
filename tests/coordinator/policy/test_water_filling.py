"""The edges' fluid model: each resource shared by weights between floors and ceilings."""

import numpy as np
import pytest

from vnode_sync.coordinator.policy.column_shards import ColumnShards
from vnode_sync.coordinator.policy.water_filling import water_fill

MB = 1e6
INF = np.inf


def column_reference(weight, capacity, ceiling, floor):
    """One resource by bisection on its level, in plain Python."""
    if sum(ceiling) <= capacity:
        return list(ceiling)
    low, high = 0.0, 1.0
    while sum(min(max(w * high, f), c) for w, c, f in zip(weight, ceiling, floor)) < capacity:
        high *= 2
    for _ in range(200):
        mid = (low + high) / 2
        if sum(min(max(w * mid, f), c) for w, c, f in zip(weight, ceiling, floor)) < capacity:
            low = mid
        else:
            high = mid
    return [min(max(w * high, f), c) for w, c, f in zip(weight, ceiling, floor)]


def test_backlogged_users_share_a_resource_in_the_ratio_of_their_weights():
    got, level = water_fill(np.array([[4.0], [8.0]]), np.array([60 * MB]), np.array([[60 * MB], [60 * MB]]))
    assert got[:, 0] == pytest.approx([20 * MB, 40 * MB], rel=1e-4)
    assert level[0] == pytest.approx(5 * MB, rel=1e-4)


def test_what_a_user_does_not_want_goes_to_the_others():
    got, _ = water_fill(np.array([[1.0], [1.0], [1.0]]), np.array([60 * MB]),
                        np.array([[5 * MB], [60 * MB], [60 * MB]]))
    assert got[:, 0] == pytest.approx([5 * MB, 27.5 * MB, 27.5 * MB], rel=1e-4)


def test_a_floor_holds_against_heavier_users_and_a_ceiling_caps():
    weight = np.array([[1.0], [8.0], [8.0], [8.0]])
    ceiling = np.array([[60 * MB], [60 * MB], [10 * MB], [60 * MB]])
    floor = np.array([[15 * MB], [0.0], [0.0], [0.0]])
    got, _ = water_fill(weight, np.array([60 * MB]), ceiling, floor)
    assert got[:, 0] == pytest.approx([15 * MB, 17.5 * MB, 10 * MB, 17.5 * MB], rel=1e-4)


def test_a_resource_whose_demands_fit_gives_everyone_its_ceiling():
    got, level = water_fill(np.array([[1.0, 1.0], [3.0, 1.0]]), np.array([60 * MB, 10 * MB]),
                            np.array([[10 * MB, 0.0], [20 * MB, 0.0]]))
    assert got[:, 0] == pytest.approx([10 * MB, 20 * MB])
    assert (got[:, 1] == 0).all()
    assert np.isinf(level).all()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_random_columns_match_a_per_column_reference(dtype):
    rng = np.random.default_rng(7)
    users, resources = 30, 40
    weight = rng.uniform(0.1, 10, (users, resources))
    ceiling = np.where(rng.random((users, resources)) < 0.3, rng.uniform(0, 20, (users, resources)) * MB, 60 * MB)
    ceiling[rng.random((users, resources)) < 0.2] = 0.0
    floor = np.where(rng.random((users, resources)) < 0.1, np.minimum(ceiling, 1 * MB), 0.0)
    capacity = rng.uniform(20, 200, resources) * MB
    got, _ = water_fill(weight.astype(dtype), capacity, ceiling.astype(dtype), floor.astype(dtype))
    for r in range(resources):
        want = column_reference(weight[:, r], capacity[r], ceiling[:, r], floor[:, r])
        assert got[:, r] == pytest.approx(want, rel=2e-3, abs=2e-3 * capacity[r]), r


def test_a_warm_start_gives_the_same_answer():
    rng = np.random.default_rng(3)
    weight = rng.uniform(0.1, 10, (20, 10))
    ceiling = rng.uniform(0, 30, (20, 10)) * MB
    capacity = np.full(10, 60 * MB)
    cold, level = water_fill(weight, capacity, ceiling)
    warm, _ = water_fill(weight, capacity, ceiling, level=level * 1.7)
    assert warm == pytest.approx(cold, rel=1e-3)


def test_blocks_of_columns_filled_on_threads_give_what_one_fill_gives():
    rng = np.random.default_rng(11)
    weight = rng.uniform(0.1, 10, (40, 90)).astype(np.float32)
    ceiling = np.where(rng.random((40, 90)) < 0.3, rng.uniform(0, 20, (40, 90)) * MB, 60 * MB).astype(np.float32)
    floor = np.where(rng.random((40, 90)) < 0.1, np.minimum(ceiling, 1 * MB), 0.0).astype(np.float32)
    capacity = rng.uniform(20, 200, 90) * MB
    whole, whole_level = water_fill(weight, capacity, ceiling, floor)
    blocks, block_level = water_fill(weight, capacity, ceiling, floor,
                                     shards=ColumnShards(weight.shape, workers=3, pairs_per_block=1))
    assert blocks == pytest.approx(whole, rel=1e-3, abs=1e-3 * capacity.max())
    assert block_level == pytest.approx(whole_level, rel=1e-3)
