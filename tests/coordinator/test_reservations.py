"""Reservations and limits: durable, per job through the batch hooks, and stores made before them."""

import sqlite3

import pytest

from vnode_sync import validation
from vnode_sync.batch.jobs import JobPhase, from_pbs_argv, from_slurm_env, requested_reservation
from vnode_sync.coordinator.store import StateStore
from vnode_sync.errors import InvalidArgument

MB = 1_000_000


def test_reservation_and_limit_survive_a_restart(tmp_path):
    path = str(tmp_path / "state.sqlite")
    store = StateStore(path)
    store.add_user("alice", 1001, 4, True)
    store.set_reservation("alice", 15 * MB)
    store.set_limit("alice", 90 * MB)
    store.close()
    again = StateStore(path, create=False)
    alice = again.user("alice")
    assert (alice.reservation_bps, alice.limit_bps, alice.effective_reservation) == (15 * MB, 90 * MB, 15 * MB)


def test_a_running_jobs_reservation_applies_while_it_runs(tmp_path):
    store = StateStore(str(tmp_path / "state.sqlite"))
    store.start_job("7", "cn1", "bob", 1002, None, 10, reservation_bps=20 * MB)
    assert store.user("bob").effective_reservation == 20 * MB
    store.end_job("7", "cn1")
    assert store.user("bob").effective_reservation == 0


def test_a_store_from_before_reservations_gets_the_columns(tmp_path):
    path = str(tmp_path / "old.sqlite")
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE users (name TEXT PRIMARY KEY, uid INTEGER NOT NULL, priority INTEGER NOT NULL, active INTEGER);
        CREATE TABLE jobs (job_id TEXT, node TEXT, user TEXT, priority INTEGER, started_at REAL, confirmed_at REAL,
                           PRIMARY KEY (job_id, node));
        CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
        INSERT INTO meta VALUES ('generation', 3);
        INSERT INTO users VALUES ('alice', 1001, 4, 1);""")
    db.commit()
    db.close()
    store = StateStore(path, create=False)
    assert store.user("alice").reservation_bps == 0
    store.set_reservation("alice", 5 * MB)
    assert store.user("alice").reservation_bps == 5 * MB


@pytest.mark.parametrize("text,bps", [("15MB/s", 15 * MB), ("800KB", 800_000), ("1.5GiB/s", int(1.5 * (1 << 30))),
                                      ("none", 0), ("0", 0), ("12 MB/s", 12 * MB)])
def test_rates_in_words(text, bps):
    assert validation.rate(text) == bps


@pytest.mark.parametrize("text", ["fast", "-3MB/s", "5MB/h", "MB", "1e9"])
def test_bad_rates_are_refused_in_one_line(text):
    with pytest.raises(InvalidArgument, match="invalid rate"):
        validation.rate(text)


def test_a_job_asks_for_a_reservation_in_its_comment_or_resource_list():
    env = {"SLURM_JOB_ID": "42", "SLURM_JOB_USER": "alice", "SLURM_JOB_UID": "1001",
           "SLURM_JOB_COMMENT": "vnode_priority=20,vnode_reservation=15MB/s"}
    assert from_slurm_env(JobPhase.START, env).requested_reservation == 15 * MB
    assert from_slurm_env(JobPhase.END, env).requested_reservation == 0
    pbs = from_pbs_argv(JobPhase.START, ["5.srv", "nobody", "grp", "job", "other=vnode_reservation=8MB/s", "q", "acct"])
    assert pbs.requested_reservation == 8 * MB


def test_an_unreadable_job_reservation_is_ignored_not_fatal():
    assert requested_reservation("vnode_reservation=lots", "42") == 0
    assert requested_reservation("nothing here") == 0
