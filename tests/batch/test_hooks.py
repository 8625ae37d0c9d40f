"""The hooks as the batch systems run them: installed wrappers, real gRPC, a coordinator up, down or hung."""

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from tests.batch.conftest import serve_admin, write_batch_config
from vnode_sync.batch.cli import SLURM_WRAPPERS, install_hooks, wrapper_text
from vnode_sync.batch.jobs import JobEvent, JobPhase
from vnode_sync.batch.spool import EventSpool

SLURM_ENV = {"SLURM_JOB_ID": "42", "SLURM_JOB_USER": "nobody", "SLURM_JOB_UID": "65534",
             "SLURM_JOB_ACCOUNT": "physics", "SLURM_JOB_PARTITION": "long",
             "SLURM_JOB_COMMENT": "vnode_priority=20", "SLURMD_NODENAME": "cn1"}


@pytest.fixture
def hooks(tmp_path):
    """Install the wrappers; returns a function that writes the config they read."""
    config = tmp_path / "batch.yaml"
    install_hooks(str(tmp_path / "slurm"), SLURM_WRAPPERS, str(config))

    def configure(coordinator: str, **extra) -> str:
        return write_batch_config(config, coordinator, tmp_path, **extra)

    return configure


def run_slurm_hook(tmp_path, name: str, env=SLURM_ENV, timeout: float = 30) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    result = subprocess.run([str(tmp_path / "slurm" / name)], env=dict(env), capture_output=True, text=True,
                            timeout=timeout, cwd="/")
    return result, time.monotonic() - started


def test_wrapper_needs_no_environment_and_tolerates_a_missing_interpreter(tmp_path):
    path = tmp_path / "hook"
    path.write_text(wrapper_text("slurm-prolog", "/nonexistent/vnode-sync/python", None))
    path.chmod(0o755)
    result = subprocess.run([str(path)], env={}, capture_output=True, text=True, timeout=10)
    assert result.returncode == 0
    assert "/nonexistent/vnode-sync/python is missing; the job goes on" in result.stderr


def test_prolog_and_epilog_reach_the_coordinator(tmp_path, hooks, fake_coordinator):
    hooks(fake_coordinator.address)
    result, _ = run_slurm_hook(tmp_path, "slurm-prolog")
    assert result.returncode == 0, result.stderr
    assert "job 42 of user nobody on cn1 started: user active with 1 running job(s), job priority 20" in result.stderr
    (name, request), = fake_coordinator.admin.calls
    assert name == "StartJob"
    assert (request.job_id, request.user, request.uid, request.node) == ("42", "nobody", 65534, "cn1")
    assert (request.account, request.queue, request.requested_priority) == ("physics", "long", 20)

    result, _ = run_slurm_hook(tmp_path, "slurm-epilog")
    assert result.returncode == 0, result.stderr
    assert "job 42 of user nobody on cn1 ended: user inactive, 0 job(s) left" in result.stderr
    assert fake_coordinator.admin.names() == ["StartJob", "EndJob"]
    assert "ended: user inactive" in (tmp_path / "log" / "batch.log").read_text()


def test_prolog_sends_the_jobs_own_reservation_and_limit(tmp_path, hooks, fake_coordinator):
    hooks(fake_coordinator.address)
    env = {**SLURM_ENV, "SLURM_JOB_COMMENT": "vnode_reservation=15MB/s,vnode_limit=100MB/s"}
    result, _ = run_slurm_hook(tmp_path, "slurm-prolog", env)
    assert result.returncode == 0, result.stderr
    assert "reservation 15.0 MB/s, limit 100.0 MB/s" in result.stderr
    (_, request), = fake_coordinator.admin.calls
    assert (request.reservation_bps, request.limit_bps) == (15_000_000, 100_000_000)


def test_repeated_prolog_and_epilog_are_harmless(tmp_path, hooks, fake_coordinator):
    hooks(fake_coordinator.address)
    for name in ("slurm-prolog", "slurm-prolog", "slurm-epilog", "slurm-epilog"):
        assert run_slurm_hook(tmp_path, name)[0].returncode == 0
    assert fake_coordinator.admin.jobs == {}


def test_coordinator_refusing_connections_fails_open_fast(tmp_path, hooks, dead_address):
    hooks(dead_address)
    result, took = run_slurm_hook(tmp_path, "slurm-prolog")
    assert result.returncode == 0
    assert took < 3
    assert f"coordinator at {dead_address} unreachable for start of job 42" in result.stderr
    assert "runs without a change to its user's share" in result.stderr
    assert [e.job_id for e in EventSpool(str(tmp_path / "spool")).pending()] == ["42"]


@pytest.fixture
def hung_address():
    """A port whose listener never answers: TCP connects, the HTTP/2 handshake never completes."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield "127.0.0.1:%d" % listener.getsockname()[1]


def test_hung_coordinator_is_given_up_within_the_bound(tmp_path, hooks, hung_address):
    hooks(hung_address, timeout_seconds=2)
    result, took = run_slurm_hook(tmp_path, "slurm-prolog")
    assert result.returncode == 0
    assert took < 2 + 1.0, f"hook took {took:.1f}s with a 2s bound"
    assert "unreachable for start of job 42" in result.stderr
    assert "DEADLINE_EXCEEDED" in result.stderr


def test_fail_closed_exits_non_zero(tmp_path, hooks, dead_address):
    hooks(dead_address, fail_closed=True)
    result, _ = run_slurm_hook(tmp_path, "slurm-prolog")
    assert result.returncode == 1
    assert "unreachable" in result.stderr


def test_a_job_we_cannot_name_never_fails(tmp_path, hooks, dead_address):
    hooks(dead_address, fail_closed=True)
    result, _ = run_slurm_hook(tmp_path, "slurm-prolog", env={"SLURM_JOB_ID": "1", "SLURM_JOB_USER": "root",
                                                             "SLURM_JOB_UID": "0"})
    assert result.returncode == 0
    assert "nothing to do for this job" in result.stderr


def test_spooled_start_is_delivered_by_the_next_hook(tmp_path, hooks, dead_address):
    hooks(dead_address)
    run_slurm_hook(tmp_path, "slurm-prolog")
    coordinator = serve_admin()
    try:
        hooks(coordinator.address)
        other_job = {**SLURM_ENV, "SLURM_JOB_ID": "43"}
        result, _ = run_slurm_hook(tmp_path, "slurm-prolog", env=other_job)
        assert "delivered spooled event: job 42 of user nobody on cn1 started" in result.stderr
        assert sorted(j for j, _ in coordinator.admin.jobs) == ["42", "43"]
        assert EventSpool(str(tmp_path / "spool")).pending() == []
    finally:
        coordinator.server.stop(0)


def test_reconcile_delivers_the_spool_and_drops_ended_jobs(tmp_path, hooks, dead_address):
    config = hooks(dead_address)
    run_slurm_hook(tmp_path, "slurm-prolog")                                   # job 42 spooled
    run_slurm_hook(tmp_path, "slurm-prolog", env={**SLURM_ENV, "SLURM_JOB_ID": "44"})  # 44 spooled, then ends
    pbs_home = tmp_path / "torque"
    (pbs_home / "mom_priv" / "jobs").mkdir(parents=True)
    (pbs_home / "mom_priv" / "jobs" / "42.JB").write_text("")
    coordinator = serve_admin()
    try:
        coordinator.admin.jobs[("7", "cn1")] = "nobody"           # its epilogue was lost
        hooks(coordinator.address)
        result = subprocess.run([sys.executable, "-m",
                                 "vnode_sync.batch", "--config", config, "reconcile", "--system", "pbs",
                                 "--pbs-home", str(pbs_home)], capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, result.stderr
        assert coordinator.admin.jobs == {("42", "cn1"): "nobody"}
        assert "dropped ended job(s) 7" in result.stderr
        assert EventSpool(str(tmp_path / "spool")).pending() == []
    finally:
        coordinator.server.stop(0)


def test_reconcile_keeps_the_spool_while_the_coordinator_is_down(tmp_path, hooks, dead_address):
    config = hooks(dead_address)
    run_slurm_hook(tmp_path, "slurm-prolog")
    result = subprocess.run([sys.executable, "-m", "vnode_sync.batch", "--config", config, "reconcile"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert "1 event(s) stay spooled" in result.stderr
    assert len(EventSpool(str(tmp_path / "spool")).pending()) == 1


def test_spool_keeps_only_the_latest_event_of_a_job(tmp_path):
    spool = EventSpool(str(tmp_path / "spool"))
    start = JobEvent(JobPhase.START, "5.srv/x", "nobody", 65534, "cn1", requested_priority=3)
    spool.save(start)
    spool.save(JobEvent(JobPhase.END, "5.srv/x", "nobody", 65534, "cn1"))
    (pending,) = spool.pending()
    assert pending.phase is JobPhase.END
    (tmp_path / "spool" / "broken.json").write_text("{")
    assert len(spool.pending()) == 1
    assert json.loads(next((tmp_path / "spool").glob("cn1@*.json")).read_text())["job_id"] == "5.srv/x"


def test_unusable_tls_settings_fail_open_and_spool(tmp_path, hooks):
    hooks("coordinator.example:7070")      # not loopback, no tls: plaintext is refused
    result, _ = run_slurm_hook(tmp_path, "slurm-prolog")
    assert result.returncode == 0
    assert "refusing plaintext to coordinator coordinator.example:7070" in result.stderr
    assert len(EventSpool(str(tmp_path / "spool")).pending()) == 1


def test_reconcile_every_repeats_until_sigterm(tmp_path, hooks, fake_coordinator):
    config = hooks(fake_coordinator.address)
    pbs_home = tmp_path / "torque"
    (pbs_home / "mom_priv" / "jobs").mkdir(parents=True)
    process = subprocess.Popen([sys.executable, "-m", "vnode_sync.batch", "--config", config, "reconcile",
                                "--system", "pbs", "--pbs-home", str(pbs_home), "--every", "0.2"],
                               stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while fake_coordinator.admin.names().count("ReconcileJobs") < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert fake_coordinator.admin.names().count("ReconcileJobs") >= 2
    finally:
        process.terminate()
        assert process.wait(10) == 0


def _bad_config(tmp_path, fake_coordinator) -> str:
    return write_batch_config(tmp_path / "batch.yaml", fake_coordinator.address, tmp_path, timeout_seconds="soon")


BAD_TIMEOUT = "timeout_seconds: got 'soon'; allowed: a number above 0, at most 120 (seconds)"


def test_a_bad_config_makes_reconcile_exit_2_in_one_line_without_calling(tmp_path, fake_coordinator):
    config = _bad_config(tmp_path, fake_coordinator)
    vnode_batch = os.path.join(os.path.dirname(sys.executable), "vnode-batch")
    result = subprocess.run([vnode_batch, "--config", config, "reconcile", "--system", "pbs", "--pbs-home",
                             str(tmp_path)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.endswith(f"config {config}: {BAD_TIMEOUT}") and "Traceback" not in result.stderr
    assert fake_coordinator.admin.calls == []


def test_a_bad_config_makes_a_hook_do_nothing_and_let_the_job_run(tmp_path, fake_coordinator):
    config = _bad_config(tmp_path, fake_coordinator)
    install_hooks(str(tmp_path / "slurm"), SLURM_WRAPPERS, config)
    result, _ = run_slurm_hook(tmp_path, "slurm-prolog")
    assert result.returncode == 0   # a config error never fails a job (the documented failure policy)
    (line,) = result.stderr.strip().splitlines()
    assert f"cannot read settings, doing nothing: config {config}: {BAD_TIMEOUT}" in line
    assert fake_coordinator.admin.calls == [] and not (tmp_path / "spool").exists()
