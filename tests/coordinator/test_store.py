"""SQLite state: changes are whole or absent, and survive a restart."""

import pytest

from vnode_sync.coordinator.store import StateStore
from vnode_sync.errors import InvalidArgument, NotFound


def test_users_and_priorities_survive_a_restart(tmp_path):
    path = str(tmp_path / "state.sqlite")
    store = StateStore(path)
    store.add_user("alice", 1001, 4, True)
    store.set_priority("alice", 9)
    generation = store.generation()
    store.close()
    again = StateStore(path)
    assert again.user("alice").priority == 9 and again.user("alice").active
    assert again.generation() == generation


def test_every_change_bumps_the_generation_and_no_op_changes_do_not(tmp_path):
    store = StateStore(str(tmp_path / "s.sqlite"))
    g0 = store.generation()
    store.add_user("alice", 1001, 4, False)
    g1, old = store.set_priority("alice", 8)
    assert g1 > g0 and old == 4
    g2, _ = store.set_priority("alice", 8)
    assert g2 == g1


def test_unknown_users_and_duplicates_change_nothing(tmp_path):
    store = StateStore(str(tmp_path / "s.sqlite"))
    store.add_user("alice", 1001, 4, False)
    g = store.generation()
    with pytest.raises(NotFound):
        store.set_priority("mallory", 5)
    with pytest.raises(InvalidArgument):
        store.add_user("alice", 1002, 5, True)
    assert store.generation() == g and store.user("alice").uid == 1001


def test_jobs_are_reference_counted_and_idempotent(tmp_path):
    store = StateStore(str(tmp_path / "s.sqlite"))
    store.start_job("10", "c1", "bob", 1002, None, 10)
    store.start_job("10", "c1", "bob", 1002, None, 10)   # repeated prologue
    store.start_job("11", "c2", "bob", 1002, 30, 10)
    assert store.user("bob").running_jobs == 2 and store.user("bob").effective_priority == 30
    store.end_job("11", "c2")
    assert store.user("bob").active and store.user("bob").effective_priority == 10
    store.end_job("10", "c1")
    store.end_job("10", "c1")  # repeated epilogue
    assert not store.user("bob").active


def test_jobs_not_confirmed_in_time_expire(tmp_path):
    store = StateStore(str(tmp_path / "s.sqlite"))
    store.start_job("10", "c1", "bob", 1002, None, 10)
    assert store.expire_jobs(older_than=0) == []
    assert store.expire_jobs(older_than=2**40) == [("10", "c1")]
    assert not store.user("bob").active
