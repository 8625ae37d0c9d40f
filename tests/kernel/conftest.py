"""One cgroup-v2 guest boot per test run (testbed/cgroup_v2_guest.py): every guest script runs in it,
in order, and each test reads its own markers from the output. The spool's power-loss script goes
last: it formats the guest's disk, which the io.max measurement reads raw.

The guest boots in the background as soon as collection shows that a selected test needs it, so
its 2-4 minutes on one emulated CPU overlap the host's own tests instead of adding to the run.
qemu takes the CPU first (testbed/cpu_priority.py): the guest's timed steps (the io.max rate, the
agent's start) see the CPU they saw when the guest ran alone, and the host's tests keep the other core."""

import threading
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from testbed import cgroup_v2_guest, cpu_priority
from testbed.names import unique_name
from tests.conftest import REPO

GUEST_COMMAND = (
    "export PYTHONPATH=. VNODE_SYNC_REAL_CGROUP2=/sys/fs/cgroup VNODE_SYNC_REAL_IO_DEVICE=$GUEST_DISK_DEV\n"
    # Each step's start on the guest's clock, so the log shows which one a slow run spent its time in.
    "step() { echo \"== $1 (at $(cut -d' ' -f1 /proc/uptime) s)\"; }\n"
    "step pytest; .venv/bin/python -m pytest -p no:cacheprovider -q -rs tests/kernel/test_io_v2.py "
    "tests/kernel/test_cpu_v2.py; echo \"PYTEST_RC=$?\"\n"
    "step io.max; .venv/bin/python tests/kernel/guest_io_max.py; echo \"IO_MAX_RC=$?\"\n"
    "step 'cpu weights'; .venv/bin/python tests/kernel/guest_cpu_weights.py; echo \"CPU_V2_RC=$?\"\n"
    "step 'shared process'; .venv/bin/python tests/kernel/guest_shared_process.py\n"
    "step 'agent refusal'; .venv/bin/python tests/kernel/guest_agent_refusal.py\n"
    "step 'spool power loss'; .venv/bin/python tests/kernel/guest_spool_power_loss.py; echo \"POWER_LOSS_RC=$?\"\n"
    "step end\n")


GUEST_TIMEOUT = 600
_cancel_guest = threading.Event()
_guest_boot: Future | None = None


def _run_guest() -> cgroup_v2_guest.GuestResult:
    hierarchy = cpu_priority.CPU_HIERARCHY if cpu_priority.available() else None
    with cpu_priority.cpu_child(hierarchy, unique_name("guest-cpu")) as place:
        return cgroup_v2_guest.run(GUEST_COMMAND, cwd=REPO, timeout=GUEST_TIMEOUT, place=place, cancel=_cancel_guest)


def pytest_collection_finish(session):
    global _guest_boot
    if cgroup_v2_guest.missing() is None and any("guest_run" in item.fixturenames for item in session.items):
        _guest_boot = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cgroup-v2-guest").submit(_run_guest)


def pytest_sessionfinish(session):
    _cancel_guest.set()   # a run stopped early (-x, ^C) does not wait out a guest that nobody reads


@pytest.fixture(scope="session")
def guest_run():
    why = cgroup_v2_guest.missing()
    if why:
        pytest.skip(f"no cgroup-v2 guest here: {why}")
    result = _guest_boot.result() if _guest_boot is not None else _run_guest()
    print(f"guest boot {result.boot_seconds:.1f}s, whole run {result.total_seconds:.1f}s\n{result.output}")
    assert result.returncode == 0, result.console[-3000:]
    return result
