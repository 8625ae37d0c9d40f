"""Only nodes where a user's rate would move beyond the hysteresis are sent anything."""

import numpy as np
import pytest

from vnode_sync.coordinator.policy.hysteresis import nodes_to_send, rates_moved
from vnode_sync.coordinator.policy.local_weights import local_weights

MB = 1e6
# Three nodes with two resources each (e.g. one device, read and write); three users.
NODE_OF = np.array([0, 0, 1, 1, 2, 2])
BEFORE = np.full((3, 6), 20 * MB)


def sent(after, before=BEFORE):
    return nodes_to_send(rates_moved(before, after), NODE_OF, 3).tolist()


def test_steady_rates_send_nothing():
    assert sent(BEFORE.copy()) == []


def test_a_move_below_the_threshold_is_not_sent_and_one_beyond_it_goes_to_its_node_only():
    small = BEFORE.copy()
    small[0, 2] *= 1.01
    assert sent(small) == []
    large = BEFORE.copy()
    large[0, 2] *= 1.1
    assert sent(large) == [1]


def test_a_trace_wobbling_is_not_a_move_but_growing_into_a_real_rate_is():
    before = BEFORE.copy()
    before[2, 4] = 1_000.0        # 1 kB/s beside 20 MB/s
    wobble = before.copy()
    wobble[2, 4] = 3_000.0
    assert sent(wobble, before) == []
    grown = before.copy()
    grown[2, 4] = 5 * MB
    assert sent(grown, before) == [2]


def test_at_a_node_with_a_thousand_users_a_small_rate_moving_is_sent():
    """Each moves ~0.1% of the node: a floor in percent of the capacity would hide every move."""
    before = np.full((1000, 2), 0.06 * MB)
    after = before.copy()
    after[7, 1] *= 1.5
    assert nodes_to_send(rates_moved(before, after), np.array([0, 1]), 2).tolist() == [1]


def test_never_sent_is_moved():
    before = BEFORE.copy()
    before[1, 5] = np.nan
    assert sent(BEFORE.copy(), before) == [2]


@pytest.mark.parametrize("scale", [1.0, 7.5])
def test_weights_are_judged_by_the_rates_they_give_so_a_rescaled_resource_is_no_move(scale):
    demand = np.array([[np.inf, np.inf], [np.inf, 5 * MB], [0.0, np.inf]])
    step = local_weights(np.array([60 * MB, 60 * MB]), np.array([1.0, 2.0, 4.0]), demand, np.zeros(3),
                         np.full(3, np.inf))
    rescaled = step.weight.copy()
    rescaled[:, 1] *= scale
    assert not rates_moved(step.realised(rescaled), step.allocation).any()
    stale = step.weight.copy()
    stale[2, 1] = stale[1, 1]               # the bulk user at resource 1 weighs as little as the light one
    assert rates_moved(step.realised(stale), step.allocation).tolist() == [False, True]


def test_a_busy_users_move_counts_beside_users_holding_large_standby_weights():
    """Ten light users given all they want hold standby weights far above the bulk user's; halving the
    bulk user's weight halves its share of what the light users leave: a move."""
    demand = np.vstack([np.full((10, 1), 0.5 * MB), [[np.inf], [np.inf]]])
    step = local_weights(np.array([60 * MB]), np.ones(12), demand, np.zeros(12), np.full(12, np.inf))
    halved = step.weight.copy()
    halved[10, 0] /= 2
    assert rates_moved(step.realised(halved), step.allocation).tolist() == [True]
