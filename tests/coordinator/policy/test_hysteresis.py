"""Only nodes where a weight (or rate) moved beyond the hysteresis are sent anything."""

import numpy as np

from vnode_sync.coordinator.policy.hysteresis import moved, nodes_to_send, shares

# Three nodes with two resources each (e.g. one device, read and write); three users.
NODE_OF = np.array([0, 0, 1, 1, 2, 2])
BEFORE = np.array([[1.0, 1.0, 4.0, 4.0, 2.0, 2.0],
                   [2.0, 2.0, 4.0, 4.0, 2.0, 2.0],
                   [1.0, 1.0, 0.5, 0.5, 2.0, 2.0]])


def sent(after):
    return nodes_to_send(moved(shares(BEFORE), shares(after)), NODE_OF, 3).tolist()


def test_steady_weights_send_nothing():
    assert sent(BEFORE.copy()) == []


def test_a_resource_rescaled_as_a_whole_is_no_move():
    after = BEFORE.copy()
    after[:, 2:4] *= 7.5          # only ratios among a resource's users matter
    assert sent(after) == []


def test_a_move_below_the_threshold_is_not_sent_and_one_beyond_it_goes_to_its_node_only():
    small = BEFORE.copy()
    small[0, 2] *= 1.03
    assert sent(small) == []
    large = BEFORE.copy()
    large[0, 2] *= 1.5
    assert sent(large) == [1]


def test_a_tiny_share_wobbling_is_not_a_move():
    before = BEFORE.copy()
    before[2, 4] = 0.001          # ~0.02% of node 2's resource
    after = before.copy()
    after[2, 4] = 0.003           # tripled, but still far below 1% of the resource
    assert nodes_to_send(moved(shares(before), shares(after)), NODE_OF, 3).tolist() == []


def test_rates_compare_in_bytes_per_second_and_never_sent_means_moved():
    capacity = np.full(6, 60e6)
    before = np.full((3, 6), 20e6)
    before[1, 5] = np.nan                       # never sent to node 2
    after = np.full((3, 6), 20e6)
    after[0, 0] = 20.5e6                        # 2.5%: within the hysteresis
    assert nodes_to_send(moved(before, after, 0.05, 0.01 * capacity), NODE_OF, 3).tolist() == [2]
    after[0, 0] = 30e6
    assert nodes_to_send(moved(before, after, 0.05, 0.01 * capacity), NODE_OF, 3).tolist() == [0, 2]
