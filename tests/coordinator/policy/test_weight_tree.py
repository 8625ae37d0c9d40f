"""The tree of weights: its arrays, what it refuses, and the floors and ceilings it splits down."""

import math

import numpy as np
import pytest

from vnode_sync.coordinator.policy.weight_tree import Group, User, WeightTree, node_ceilings, pair_bounds
from vnode_sync.errors import InvalidArgument

MB = 1e6
INF = math.inf


def test_the_nodes_are_numbered_in_pre_order_and_the_users_take_the_callers_rows():
    tree = WeightTree((Group("physics", 2, (User("ann", 1), Group("lab", 3, (User("bob", 1), User("cy", 2))))),
                       User("dee", 1)))
    arrays = tree.arrays(["dee", "cy", "bob", "ann"])
    assert arrays.names == ("physics", "ann", "lab", "bob", "cy", "dee")
    assert arrays.parent.tolist() == [-1, 0, 0, 2, 2, -1]
    assert arrays.depth.tolist() == [1, 2, 2, 3, 3, 1]
    assert arrays.row.tolist() == [-1, 3, -1, 2, 1, 0]
    assert arrays.members[0].tolist() == [1, 2, 3] and arrays.members[2].tolist() == [1, 2]
    assert arrays.height == 3
    # Level 2: physics' children, and dee, a user above it.
    assert [arrays.names[n] for n in arrays.frontier(2)] == ["ann", "lab", "dee"]
    assert tree.users() == ["ann", "bob", "cy", "dee"]


def test_a_flat_tree_is_todays_claims():
    arrays = WeightTree.flat(["a", "b"], [4, 8], [1 * MB, 0], [INF, 5 * MB]).arrays()
    assert arrays.height == 1
    assert arrays.weight.tolist() == [4, 8] and arrays.floor.tolist() == [1 * MB, 0] and arrays.ceiling[1] == 5 * MB


@pytest.mark.parametrize("tree,rows,message", [
    (WeightTree((Group("g", 1, (User("a", 1),)), Group("h", 1, (User("a", 1),)))), ["a"],
     "user a is in the tree twice"),
    (WeightTree((Group("g", 1, (User("a", 1),)), Group("g", 1, (User("b", 1),)))), ["a", "b"],
     "group g is in the tree twice"),
    (WeightTree((User("a", 0),)), ["a"], "user a: weight must be finite and above 0"),
    (WeightTree((Group("g", 1, (User("a", 1),), floor=5 * MB, ceiling=1 * MB),)), ["a"], "group g: ceiling must be >="),
    (WeightTree((User("a", 1, floor=-1),)), ["a"], "floor must be finite"),
    (WeightTree((User("a", 1),)), ["a", "b"], "user b has a row but is not in the tree"),
    (WeightTree((User("a", 1), User("b", 1))), ["a"], "user b is in the tree but has no row"),
])
def test_a_bad_tree_is_refused_in_one_line(tree, rows, message):
    with pytest.raises(InvalidArgument, match=message) as refused:
        tree.arrays(rows)
    assert "\n" not in str(refused.value)


def test_a_groups_floor_is_split_by_weight_among_its_users_that_want_bytes_there():
    """lab (floor 12 MB/s) has bob (1) and cy (2): 4 and 8 on r0; on r1 only bob wants bytes (2 MB/s),
    so he gets his 2 and the rest of the floor has no taker there; ann, outside, has none."""
    tree = WeightTree((Group("lab", 1, (User("bob", 1), User("cy", 2)), floor=12 * MB), User("ann", 1)))
    arrays = tree.arrays(["bob", "cy", "ann"])
    demand = np.array([[INF, 2 * MB], [INF, 0], [INF, INF]])
    ceiling, floor = pair_bounds(arrays, np.array([60 * MB, 60 * MB]), demand)
    assert floor[:, 0] == pytest.approx([4 * MB, 8 * MB, 0])
    assert floor[:, 1] == pytest.approx([2 * MB, 0, 0])
    assert ceiling[0, 1] == 2 * MB and ceiling[2, 0] == 60 * MB


def test_a_groups_ceiling_bounds_what_its_subtree_can_take_on_each_resource():
    tree = WeightTree((Group("lab", 1, (User("bob", 1), User("cy", 2)), ceiling=30 * MB), User("ann", 1)))
    arrays = tree.arrays(["bob", "cy", "ann"])
    demand = np.array([[INF, 4 * MB], [INF, INF], [INF, INF]])
    capacity = np.array([60 * MB, 60 * MB])
    reach = node_ceilings(arrays, capacity, demand)
    assert reach[0] == pytest.approx([30 * MB, 30 * MB])          # lab: its ceiling on each resource
    assert reach[1] == pytest.approx([60 * MB, 4 * MB])           # bob: the capacity, and his demand
