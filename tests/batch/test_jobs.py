import pytest

from vnode_sync.batch.jobs import JobPhase, from_pbs_argv, from_slurm_env, requested_priority
from vnode_sync.errors import InvalidArgument

SLURM_PROLOG_ENV = {  # as Debian's slurmd 22.05 gives its Prolog (trimmed)
    "SLURM_JOB_ID": "42", "SLURM_JOBID": "42", "SLURM_JOB_USER": "alice", "SLURM_JOB_UID": "1001",
    "SLURM_JOB_GID": "1001", "SLURM_JOB_ACCOUNT": "physics", "SLURM_JOB_PARTITION": "long",
    "SLURM_JOB_COMMENT": "vnode_priority=20", "SLURMD_NODENAME": "cn7", "SLURM_SCRIPT_CONTEXT": "prolog_slurmd",
}


def test_slurm_prolog_environment():
    event = from_slurm_env(JobPhase.START, SLURM_PROLOG_ENV)
    assert (event.job_id, event.user, event.uid, event.node) == ("42", "alice", 1001, "cn7")
    assert (event.account, event.queue, event.requested_priority) == ("physics", "long", 20)


def test_slurm_epilog_ignores_the_priority():
    assert from_slurm_env(JobPhase.END, SLURM_PROLOG_ENV).requested_priority == 0


def test_slurm_without_job_variables_says_what_is_missing():
    with pytest.raises(InvalidArgument, match="SLURM_JOB_ID is not set"):
        from_slurm_env(JobPhase.START, {})


def test_slurm_bad_uid_is_named():
    with pytest.raises(InvalidArgument, match="'x1'"):
        from_slurm_env(JobPhase.START, {**SLURM_PROLOG_ENV, "SLURM_JOB_UID": "x1"})


@pytest.mark.parametrize("text, wanted", [
    ("", 0),
    ("no request here", 0),
    ("vnode_priority=20", 20),
    ("run 3 vnode_priority=35 please", 35),
    ("neednodes=1,nodes=1,walltime=00:10:00,vnode_priority=7", 7),
    ("other=vnode_priority=12,walltime=01:00:00", 12),   # TORQUE's free-form "other" resource
    ("vnode_priority=500", 100),                          # clamped to 1..100, the coordinator clamps further
    ("vnode_priority=-3", 1),
    ("vnode_priority=0", 1),
    ("vnode_priority=high", 0),                           # unreadable: as if none, never an error
    ("my_vnode_priority=9", 0),
    ("vnode_priority=5 vnode_priority=9", 9),
])
def test_requested_priority(text, wanted):
    assert requested_priority(text) == wanted


def test_clamping_is_logged(caplog):
    requested_priority("vnode_priority=500", "77")
    assert "job 77: vnode_priority=500 clamped to 100 (allowed 1..100)" in caplog.text


def test_torque_prologue_argv():
    # job id, user, group, job name, resource limits, queue, account
    argv = ["123.pbs.example", "nobody", "nogroup", "sim", "nodes=1,walltime=00:05:00,vnode_priority=30",
            "batch", "physics"]
    event = from_pbs_argv(JobPhase.START, argv, node="cn2")
    assert (event.job_id, event.user, event.uid, event.node) == ("123.pbs.example", "nobody", 65534, "cn2")
    assert (event.queue, event.account, event.requested_priority, event.sister) == ("batch", "physics", 30, False)


def test_torque_epilogue_argv():
    # ... 5 session id, 6 resource limits, 7 resources used, 8 queue, 9 account, 10 exit status
    argv = ["123.pbs.example", "nobody", "nogroup", "sim", "4242", "nodes=1,vnode_priority=30",
            "cput=00:00:01,mem=1kb", "batch", "physics", "0"]
    event = from_pbs_argv(JobPhase.END, argv, sister=True, node="cn3")
    assert (event.queue, event.account, event.requested_priority, event.sister) == ("batch", "physics", 0, True)


def test_pbs_pro_prologue_has_three_arguments():
    event = from_pbs_argv(JobPhase.START, ["9.srv", "nobody", "nogroup"], node="cn1")
    assert (event.job_id, event.queue, event.account, event.requested_priority) == ("9.srv", "", "", 0)


def test_pbs_unknown_user_is_named():
    with pytest.raises(InvalidArgument, match="vnode-sync-nosuchuser"):
        from_pbs_argv(JobPhase.START, ["9.srv", "vnode-sync-nosuchuser", "g"])


def test_pbs_root_job_is_refused():
    with pytest.raises(InvalidArgument, match="not root"):
        from_pbs_argv(JobPhase.START, ["9.srv", "root", "root"])
