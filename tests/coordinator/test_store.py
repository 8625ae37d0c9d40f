"""SQLite state: changes are whole or absent, and survive a restart."""

import re
import sqlite3

import pytest

from vnode_sync.coordinator.state.store import UNFINISHED_SUFFIX, StateStore, StoreUnusable
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


class Seed:
    def __init__(self, name, uid, priority, active=False):
        self.name, self.uid, self.priority, self.active = name, uid, priority, active


def test_a_new_store_holds_its_seed_users_identity_and_generation_from_its_first_moment(tmp_path):
    path = tmp_path / "state.sqlite"
    store = StateStore(str(path), seed_users=[Seed("alice", 1001, 4, True), Seed("bob", 1002, 2)])
    assert store.created and store.store_id() != 0
    assert [(u.name, u.priority, u.active) for u in store.users()] == [("alice", 4, True), ("bob", 2, False)]
    assert store.generation() == 3, "one generation per seeded user, as before"
    store.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.sqlite", "state.sqlite.lock"]
    again = StateStore(str(path), seed_users=[Seed("carol", 1003, 5)])
    assert not again.created and [u.name for u in again.users()] == ["alice", "bob"], "the YAML seeds a new store only"


def test_a_first_start_that_fails_midway_leaves_no_state_file_and_the_next_one_makes_it_whole(tmp_path):
    path = tmp_path / "state.sqlite"
    with pytest.raises(StoreUnusable, match="cannot make a new state file .* nothing was left in its place"):
        StateStore(str(path), seed_users=[Seed("alice", 1001, 4), Seed("bob", 1002, 101)])  # CHECK fails on bob
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.sqlite.lock"]
    store = StateStore(str(path), seed_users=[Seed("alice", 1001, 4), Seed("bob", 1002, 3)])
    assert [u.name for u in store.users()] == ["alice", "bob"]


def test_an_unfinished_first_start_is_made_again_and_a_finished_store_is_never_remade(tmp_path, caplog):
    path = tmp_path / "state.sqlite"
    unfinished = tmp_path / ("state.sqlite" + UNFINISHED_SUFFIX)
    unfinished.write_bytes(b"SQLite format 3\0 half a store")   # a first start killed before its rename
    store = StateStore(str(path), seed_users=[Seed("alice", 1001, 4)])
    assert store.created and [u.name for u in store.users()] == ["alice"]
    assert not unfinished.exists() and "a first start that did not finish" in caplog.text
    identity = store.store_id()
    store.close()
    again = StateStore(str(path), seed_users=[Seed("alice", 1001, 4)])
    assert not again.created and again.store_id() == identity


@pytest.mark.parametrize("damage,message", [
    ("DROP TABLE meta", "lacks tables ['meta']"),
    ("DELETE FROM meta WHERE key = 'generation'", "has no generation"),
    ("DELETE FROM meta WHERE key = 'store_id'", "has no store_id"),
    ("ALTER TABLE users RENAME COLUMN limit_bps TO ceiling_bps", "table users has columns"),
])
def test_a_store_that_was_complete_and_lost_a_part_is_refused_not_remade(tmp_path, damage, message):
    path = tmp_path / "state.sqlite"
    StateStore(str(path), seed_users=[Seed("alice", 1001, 4)]).close()
    db = sqlite3.connect(path)
    db.execute(damage)
    db.commit()
    db.close()
    before = path.read_bytes()
    with pytest.raises(StoreUnusable, match=re.escape(message)):
        StateStore(str(path), seed_users=[Seed("alice", 1001, 4)])
    assert path.read_bytes() == before
    # The refusing store kept no connection open (its traceback, kept here, still holds it): the
    # last connection to close removes the WAL, which it cannot while another holds the file.
    last = sqlite3.connect(path)
    last.execute("PRAGMA journal_mode = WAL")
    last.execute("CREATE TABLE probe (x)")
    last.close()
    assert not (tmp_path / "state.sqlite-wal").exists()
