"""The PBS/TORQUE scripts run exactly as pbs_mom runs them (TORQUE src/resmom/prolog.c, run_pelog()):
the file in mom_priv by its fixed name, root-owned, not writable by group or others; an
empty environment (TORQUE adds at most PBS_RESOURCE_NODES); argv as listed in
vnode_sync.batch.jobs; cwd mom_priv; stdin not a terminal; SIGKILLed after pe_alarm_time
($prologalarm, 300 s by default). Their stdout/stderr may be the job's own output files.
"""

import os
import stat
import subprocess
import time

import pytest

from tests.batch.conftest import write_batch_config
from vnode_sync.batch.cli import PBS_WRAPPERS, install_hooks

PROLOG_ALARM_SECONDS = 300
JOB = "1234.pbs-server.example"
PROLOGUE_ARGV = [JOB, "nobody", "nogroup", "sim-run", "neednodes=2,nodes=2,walltime=01:00:00,vnode_priority=30",
                 "batch", "physics"]
EPILOGUE_ARGV = [JOB, "nobody", "nogroup", "sim-run", "31337", "neednodes=2,nodes=2,walltime=01:00:00",
                 "cput=00:00:05,mem=2048kb,vmem=4096kb,walltime=00:00:09", "batch", "physics", "0"]


@pytest.fixture
def mom_priv(tmp_path):
    directory = tmp_path / "torque" / "mom_priv"
    install_hooks(str(directory), PBS_WRAPPERS, str(tmp_path / "batch.yaml"), mode=0o500)
    return directory


def run_as_pbs_mom(mom_priv, script: str, argv: list[str]) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    result = subprocess.run([str(mom_priv / script), *argv], env={}, cwd=str(mom_priv), stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=PROLOG_ALARM_SECONDS)
    return result, time.monotonic() - started


def test_scripts_have_the_names_and_modes_pbs_mom_accepts(mom_priv):
    for name in ("prologue", "epilogue", "prologue.parallel", "epilogue.parallel"):
        mode = os.stat(mom_priv / name).st_mode
        assert stat.S_IMODE(mode) == 0o500, name   # pbs_mom refuses scripts writable by group or others
        assert os.stat(mom_priv / name).st_uid == os.geteuid()


def test_prologue_and_epilogue_on_mother_superior_and_sister(tmp_path, mom_priv, fake_coordinator):
    write_batch_config(tmp_path / "batch.yaml", fake_coordinator.address, tmp_path, node="")
    for script, argv in (("prologue", PROLOGUE_ARGV), ("prologue.parallel", PROLOGUE_ARGV)):
        result, _ = run_as_pbs_mom(mom_priv, script, argv)
        assert result.returncode == 0, result.stderr
    starts = [r for name, r in fake_coordinator.admin.calls if name == "StartJob"]
    assert [(r.job_id, r.user, r.uid, r.queue, r.account, r.requested_priority) for r in starts] == \
        [(JOB, "nobody", 65534, "batch", "physics", 30)] * 2
    assert "(sister) started: user active" in result.stderr

    for script in ("epilogue.parallel", "epilogue"):
        result, _ = run_as_pbs_mom(mom_priv, script, EPILOGUE_ARGV)
        assert result.returncode == 0, result.stderr
    assert fake_coordinator.admin.names() == ["StartJob", "StartJob", "EndJob", "EndJob"]
    assert "ended: user inactive, 0 job(s) left" in result.stderr


def test_prologue_with_the_coordinator_down_returns_0_within_its_bound(tmp_path, mom_priv, dead_address):
    write_batch_config(tmp_path / "batch.yaml", dead_address, tmp_path, timeout_seconds=2)
    result, took = run_as_pbs_mom(mom_priv, "prologue", PROLOGUE_ARGV)
    assert result.returncode == 0
    assert took < 2 + 1.0
    assert f"coordinator at {dead_address} unreachable for start of job {JOB}" in result.stderr
    assert "spooled to" in result.stderr


def test_pbs_pro_three_argument_prologue(tmp_path, mom_priv, fake_coordinator):
    write_batch_config(tmp_path / "batch.yaml", fake_coordinator.address, tmp_path)
    result, _ = run_as_pbs_mom(mom_priv, "prologue", ["77.pbspro", "nobody", "nogroup"])
    assert result.returncode == 0, result.stderr
    assert fake_coordinator.admin.calls[0][1].job_id == "77.pbspro"


def test_garbage_arguments_never_fail_the_job(tmp_path, mom_priv, fake_coordinator):
    write_batch_config(tmp_path / "batch.yaml", fake_coordinator.address, tmp_path, fail_closed=True)
    result, _ = run_as_pbs_mom(mom_priv, "prologue", [])
    assert result.returncode == 0
    assert "nothing to do for this job: expected at least job id and user" in result.stderr
    assert fake_coordinator.admin.calls == []
