"""One cgroup-v2 guest boot per test run (testbed/cgroup_v2_guest.py): every guest script runs in it,
in order, and each test reads its own markers from the output. The spool's power-loss script goes
last: it formats the guest's disk, which the io.max measurement reads raw."""

import os

import pytest

from testbed import cgroup_v2_guest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GUEST_COMMAND = (
    "export PYTHONPATH=. VNODE_SYNC_REAL_CGROUP2=/sys/fs/cgroup VNODE_SYNC_REAL_IO_DEVICE=$GUEST_DISK_DEV\n"
    # Each step's start on the guest's clock, so the log shows which one a slow run spent its time in.
    "step() { echo \"== $1 (at $(cut -d' ' -f1 /proc/uptime) s)\"; }\n"
    "step pytest; .venv/bin/python -m pytest -p no:cacheprovider -q -rs tests/kernel/test_io_v2.py; echo \"PYTEST_RC=$?\"\n"
    "step io.max; .venv/bin/python tests/kernel/guest_io_max.py; echo \"IO_MAX_RC=$?\"\n"
    "step 'shared process'; .venv/bin/python tests/kernel/guest_shared_process.py\n"
    "step 'agent refusal'; .venv/bin/python tests/kernel/guest_agent_refusal.py\n"
    "step 'spool power loss'; .venv/bin/python tests/kernel/guest_spool_power_loss.py; echo \"POWER_LOSS_RC=$?\"\n"
    "step end\n")


@pytest.fixture(scope="session")
def guest_run():
    why = cgroup_v2_guest.missing()
    if why:
        pytest.skip(f"no cgroup-v2 guest here: {why}")
    result = cgroup_v2_guest.run(GUEST_COMMAND, cwd=REPO, timeout=600)
    print(f"guest boot {result.boot_seconds:.1f}s, whole run {result.total_seconds:.1f}s\n{result.output}")
    assert result.returncode == 0, result.console[-3000:]
    return result
