"""`python -m vnode_sync.datanode.readiness`, what the deploy role waits on after a DataNode restart: ready only
when the agent answers the handshake with every required hook woven; a missing hook is a refusal, not a retry."""

import subprocess
import sys
import time

import pytest

from tests.conftest import REPO
from vnode_sync.datanode.readiness import NO_ANSWER, NOT_ENFORCING, READY, readiness


@pytest.fixture
def stand_in(tmp_path):
    started = []

    def start(*skipped: str) -> str:
        path = str(tmp_path / f"dn{len(started)}.sock")
        process = subprocess.Popen([sys.executable, "-m", "tests.datanode.stand_in_agent", path,
                                    *[a for hook in skipped for a in ("--skip", hook)]], cwd=REPO)
        started.append(process)
        deadline = time.monotonic() + 10
        while readiness(path, 1.0)[0] == NO_ANSWER and time.monotonic() < deadline:
            time.sleep(0.05)
        return path
    yield start
    for process in started:
        process.kill()
        process.wait()


def test_an_agent_with_every_required_hook_woven_is_ready(stand_in):
    code, line = readiness(stand_in(), 2.0)
    assert code == READY and "ready, 5 required hooks woven" in line and "Hadoop 3.4.2" in line


def test_an_agent_missing_a_required_hook_is_not_ready_and_the_line_names_the_hook(stand_in):
    code, line = readiness(stand_in("BlockSender.sendBlock"), 2.0)
    assert code == NOT_ENFORCING
    assert "hook BlockSender.sendBlock not_found: reads are not scheduled" in line


def test_an_optional_hook_missing_does_not_hold_the_node_back(stand_in):
    assert readiness(stand_in("DataNode.requestShortCircuitFdsForRead"), 2.0)[0] == READY


def test_nothing_on_the_socket_yet_exits_4_in_one_line(tmp_path):
    run = subprocess.run([sys.executable, "-m", "vnode_sync.datanode.readiness", str(tmp_path / "none.sock")],
                         capture_output=True, text=True, cwd=REPO, timeout=30)
    assert run.returncode == NO_ANSWER and run.stdout == ""
    assert len(run.stderr.strip().splitlines()) == 1 and "none.sock" in run.stderr
