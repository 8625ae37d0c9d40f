"""Reservations and limits: durable, per job through the batch hooks, and stores made before them."""


import pytest

from vnode_sync import validation
from vnode_sync.batch.jobs import JobPhase, from_pbs_argv, from_slurm_env, requested_limit, requested_reservation
from vnode_sync.coordinator.state.store import StateStore
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


def test_a_running_jobs_limit_applies_while_every_running_job_has_one(tmp_path):
    store = StateStore(str(tmp_path / "state.sqlite"))
    store.start_job("7", "cn1", "bob", 1002, None, 10, limit_bps=30 * MB)
    store.start_job("7", "cn2", "bob", 1002, None, 10, limit_bps=30 * MB)    # the same job on a second node
    assert store.user("bob").effective_limit == 30 * MB
    store.start_job("8", "cn1", "bob", 1002, None, 10, limit_bps=50 * MB)
    assert store.user("bob").effective_limit == 50 * MB       # one VNode for both: the higher holds
    store.set_limit("bob", 40 * MB)
    assert store.user("bob").effective_limit == 40 * MB       # the admin's ceiling always holds
    store.start_job("9", "cn1", "bob", 1002, None, 10)
    assert store.user("bob").effective_limit == 40 * MB       # a job without one: only the admin's
    store.set_limit("bob", 0)
    assert store.user("bob").effective_limit == 0
    for job, node in (("7", "cn1"), ("7", "cn2"), ("8", "cn1"), ("9", "cn1")):
        store.end_job(job, node)
    assert store.user("bob").effective_limit == 0


def test_a_jobs_new_limit_is_a_change_and_the_same_start_again_is_not(tmp_path):
    store = StateStore(str(tmp_path / "state.sqlite"))
    first = store.start_job("7", "cn1", "bob", 1002, None, 10, limit_bps=30 * MB)
    assert store.start_job("7", "cn1", "bob", 1002, None, 10, limit_bps=30 * MB) == first
    assert store.start_job("7", "cn1", "bob", 1002, None, 10, limit_bps=20 * MB) > first
    assert store.user("bob").effective_limit == 20 * MB


@pytest.mark.parametrize("text,bps", [("15MB/s", 15 * MB), ("800KB", 800_000), ("1.5GiB/s", int(1.5 * (1 << 30))),
                                      ("none", 0), ("0", 0), ("12 MB/s", 12 * MB)])
def test_rates_in_words(text, bps):
    assert validation.rate(text) == bps


@pytest.mark.parametrize("text", ["fast", "-3MB/s", "5MB/h", "MB", "1e9"])
def test_bad_rates_are_refused_in_one_line(text):
    with pytest.raises(InvalidArgument, match="invalid rate"):
        validation.rate(text)


def test_a_job_asks_for_a_reservation_and_a_limit_in_its_comment_or_resource_list():
    env = {"SLURM_JOB_ID": "42", "SLURM_JOB_USER": "alice", "SLURM_JOB_UID": "1001",
           "SLURM_JOB_COMMENT": "vnode_priority=20,vnode_reservation=15MB/s,vnode_limit=100MB/s"}
    start = from_slurm_env(JobPhase.START, env)
    assert (start.requested_reservation, start.requested_limit) == (15 * MB, 100 * MB)
    end = from_slurm_env(JobPhase.END, env)
    assert (end.requested_reservation, end.requested_limit) == (0, 0)
    pbs = from_pbs_argv(JobPhase.START, ["5.srv", "nobody", "grp", "job",
                                         "other=vnode_reservation=8MB/s+vnode_limit=20MB/s", "q", "acct"])
    assert (pbs.requested_reservation, pbs.requested_limit) == (8 * MB, 20 * MB)


def test_an_unreadable_job_reservation_or_limit_is_ignored_not_fatal(caplog):
    assert requested_reservation("vnode_reservation=lots", "42") == 0
    assert requested_reservation("nothing here") == 0
    assert requested_limit("vnode_limit=-5MB/s", "43") == 0
    assert "job 43: ignoring it: invalid vnode_limit '-5MB/s'" in caplog.text
