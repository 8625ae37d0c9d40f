"""The tree of weights in both stores (SQLite always; ZooKeeper where it runs): groups added, changed,
moved into and removed, each change whole with one new generation; every refusal changes nothing.
And the tree the weight step is given: only active users, only groups that hold one."""

import math

import pytest

from tests.coordinator.test_zookeeper_store import client, root  # noqa: F401 (fixtures; the ensemble is conftest's)
from testbed.zookeeper_ensemble import WHY_NO_ZOOKEEPER
from vnode_sync.coordinator.control.group_tree import weight_tree
from vnode_sync.coordinator.state.groups import MAX_DEPTH, GroupRecord, group_members, group_paths, roll_up
from vnode_sync.coordinator.policy.weight_tree import Group, User
from vnode_sync.coordinator.state.store import StateStore, UserRecord
from vnode_sync.errors import InvalidArgument, NotFound


@pytest.fixture(params=["sqlite", pytest.param("zookeeper", marks=pytest.mark.skipif(
    WHY_NO_ZOOKEEPER is not None, reason=WHY_NO_ZOOKEEPER or ""))])
def store(request, tmp_path):
    if request.param == "sqlite":
        made = StateStore(str(tmp_path / "s.sqlite"))
    else:
        from vnode_sync.coordinator.state.zookeeper_store import ZooKeeperStore
        made = ZooKeeperStore(request.getfixturevalue("client"), request.getfixturevalue("root"))
    made.add_user("alice", 1001, 4, True)
    made.add_user("bob", 1002, 8, True)
    yield made
    made.close()


def test_groups_are_added_changed_moved_into_and_removed_each_with_one_generation(store):
    g0 = store.generation()
    assert store.groups() == [] and store.user("alice").group == ""
    assert store.add_group(GroupRecord("physics", 2)) == g0 + 1
    assert store.add_group(GroupRecord("theory", 1, "physics", floor_bps=5, ceiling_bps=50)) == g0 + 2
    assert store.move_user("alice", "theory") == (g0 + 3, "")
    assert store.move_user("alice", "theory") == (g0 + 3, "theory"), "no change, no new generation"
    assert store.user("alice").group == "theory" and store.user("bob").group == ""
    generation, old = store.set_group(GroupRecord("physics", 3))
    assert (generation, old) == (g0 + 4, GroupRecord("physics", 2))
    assert store.groups() == [GroupRecord("physics", 3), GroupRecord("theory", 1, "physics", 5, 50)]
    assert store.move_user("alice", "") == (g0 + 5, "theory")
    assert store.remove_group("theory") == (g0 + 6, GroupRecord("theory", 1, "physics", 5, 50))
    assert store.groups() == [GroupRecord("physics", 3)]


def test_refused_changes_leave_the_tree_and_the_generation_as_they_were(store):
    store.add_group(GroupRecord("a", 1))
    store.add_group(GroupRecord("b", 1, "a"))
    store.move_user("bob", "b")
    before = (store.generation(), store.groups(), store.user("bob"))
    refusals = [
        (lambda: store.add_group(GroupRecord("a", 5)), InvalidArgument, "exists already"),
        (lambda: store.add_group(GroupRecord("c", 1, "nowhere")), NotFound, "unknown parent group 'nowhere'"),
        (lambda: store.set_group(GroupRecord("a", 1, "b")), InvalidArgument, "a tree has no loops"),
        (lambda: store.set_group(GroupRecord("a", 1, "a")), InvalidArgument, "a tree has no loops"),
        (lambda: store.set_group(GroupRecord("zz", 1)), NotFound, "unknown group 'zz'"),
        (lambda: store.remove_group("a"), InvalidArgument, "not empty (groups b)"),
        (lambda: store.remove_group("b"), InvalidArgument, "not empty (users bob)"),
        (lambda: store.remove_group("zz"), NotFound, "unknown group 'zz'"),
        (lambda: store.move_user("bob", "zz"), NotFound, "unknown group 'zz'"),
        (lambda: store.move_user("carol", "a"), NotFound, "unknown user 'carol'"),
    ]
    for change, error, message in refusals:
        with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
            change()
        assert (store.generation(), store.groups(), store.user("bob")) == before


def test_the_tree_is_at_most_max_depth_levels_of_groups(store):
    parent = ""
    for level in range(MAX_DEPTH):
        store.add_group(GroupRecord(f"l{level}", 1, parent))
        parent = f"l{level}"
    with pytest.raises(InvalidArgument, match=f"deeper than {MAX_DEPTH}"):
        store.add_group(GroupRecord("deep", 1, parent))
    store.add_group(GroupRecord("side", 1))
    store.add_group(GroupRecord("side2", 1, "side"))
    with pytest.raises(InvalidArgument, match=f"deeper than {MAX_DEPTH}"):   # a subtree moved keeps its height
        store.set_group(GroupRecord("side", 1, f"l{MAX_DEPTH - 2}"))


def _user(name: str, priority: int, group: str = "", active: bool = True, **more) -> UserRecord:
    return UserRecord(name, 1000 + len(name), priority, active, 0, None, False, group=group, **more)


def test_the_weight_step_gets_active_users_under_the_groups_that_hold_one():
    groups = [GroupRecord("g1", 2), GroupRecord("g2", 1, ceiling_bps=90), GroupRecord("sub", 3, "g2"),
              GroupRecord("idle", 5)]
    users = [_user("a", 4, "g1"), _user("b", 8, "sub"), _user("c", 2, "g2", reservation_bps=10),
             _user("d", 1, "idle", active=False), _user("e", 6)]
    tree = weight_tree(users, groups)
    assert tree.children == (
        Group("g1", 2.0, (User("a", 4.0),)),
        Group("g2", 1.0, (Group("sub", 3.0, (User("b", 8.0),)), User("c", 2.0, 10.0)), ceiling=90.0),
        User("e", 6.0))
    assert weight_tree([_user("a", 4), _user("d", 1, "idle", active=False)], groups) is None, \
        "no active user in a group: today's flat step"
    assert tree.children[1].children[1].ceiling == math.inf


def test_groups_sum_their_subtrees_users():
    groups = [GroupRecord("g1", 2), GroupRecord("sub", 1, "g1"), GroupRecord("g2", 1)]
    users = [_user("a", 4, "g1"), _user("b", 8, "sub"), _user("c", 2)]
    members = group_members(users, groups)
    assert members == {"g1": ["a", "b"], "sub": ["b"], "g2": []}
    assert roll_up(members, {"a": (1.0, 2.0), "b": (10.0, 0.0), "c": (5.0, 5.0)}) == \
        {"g1": (11.0, 2.0), "sub": (10.0, 0.0), "g2": (0.0, 0.0)}


def test_a_groups_path_runs_from_the_root_and_a_loop_read_anyway_stops():
    tree = [GroupRecord("physics", 2), GroupRecord("theory", 1, parent="physics"), GroupRecord("chem", 1),
            GroupRecord("x", 1, parent="y"), GroupRecord("y", 1, parent="x")]
    paths = group_paths(tree)
    assert paths["physics"] == "physics" and paths["theory"] == "physics/theory" and paths["chem"] == "chem"
    assert paths["x"] == "y/x" and paths["y"] == "x/y"
