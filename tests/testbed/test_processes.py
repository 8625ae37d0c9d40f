"""testbed.processes.exit_once_on_signals: a benchmark stopped by a signal cleans up whole, even when a
second signal comes during its clean-up (pkill and `timeout` both sending one, Ctrl-C pressed twice)."""

import signal
import subprocess
import sys

import pytest

from tests.conftest import REPO

# What a benchmark does: take the signals, make something, and remove it in a `finally` that takes a while.
BENCHMARK = """
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)   # as in a terminal, even if pytest runs in the background
from testbed.processes import exit_once_on_signals
exit_once_on_signals()
os.mkdir(sys.argv[1])
try:
    print("running", flush=True)
    time.sleep(60)
finally:
    print("cleaning up", flush=True)
    time.sleep(1)   # the second signal comes here
    os.rmdir(sys.argv[1])
"""


@pytest.mark.parametrize("sig, status", [(signal.SIGTERM, (143,)), (signal.SIGINT, (-signal.SIGINT, 130))],
                         ids=["SIGTERM", "SIGINT"])
def test_a_second_signal_during_the_clean_up_does_not_cut_it_short(tmp_path, sig, status):
    made = tmp_path / "work"
    run = subprocess.Popen([sys.executable, "-c", BENCHMARK, str(made)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert run.stdout.readline() == "running\n"
        run.send_signal(sig)
        assert run.stdout.readline() == "cleaning up\n"
        run.send_signal(signal.SIGTERM)
        run.send_signal(signal.SIGINT)
        assert run.wait(15) in status
    finally:
        run.kill()
        run.wait()
    assert not made.exists()
