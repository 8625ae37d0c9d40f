"""CPU priority for a benchmark on a shared host: the calling process (and every process it starts
afterwards: HDFS daemons, clients, FUSE servers) in a cgroup v1 `cpu` group of its own with the
largest `cpu.shares`, so other work on the machine takes CPU only when the benchmark leaves some.
Both sides of a comparison run inside it, so it favours neither; it narrows the noise.

    with cpu_priority(unique_name("bench-cpu")) as where:   # None: no cpu hierarchy here
        ...

`cpu_child` puts one of those processes in a group of its own inside it, ahead of the others or
behind them (benchmarks.interactive_shares --client-cpu).

The group is named by the run (testbed.names), so `python -m testbed.leftovers` finds a crashed
run's.
"""

import contextlib
import errno
import logging
import os
import time
from collections.abc import Callable, Iterator

log = logging.getLogger(__name__)

CPU_HIERARCHY = "/sys/fs/cgroup/cpu"
MAX_SHARES = 262_144  # the kernel's MAX_SHARES (1 << 18); a nice-0 task or autogroup weighs 1024
MIN_SHARES = 2        # the kernel's MIN_SHARES
# A DataNode JVM's threads may take this long to exit after the cluster is stopped on a loaded VM
# (5 s was too short once, after a 42-minute benchmark); the group cannot be removed before.
EMPTY_PATIENCE_SECONDS = 30.0


def stay(pid: int) -> None:
    """A `place` that leaves the process in the group it started in."""


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def available(hierarchy: str = CPU_HIERARCHY) -> bool:
    return os.path.isfile(os.path.join(hierarchy, "cpu.shares")) and os.geteuid() == 0


@contextlib.contextmanager
def cpu_priority(name: str, hierarchy: str = CPU_HIERARCHY) -> Iterator[str | None]:
    if not available(hierarchy):
        log.warning("no cgroup v1 cpu hierarchy at %s (or not root): running without CPU priority", hierarchy)
        yield None
        return
    group = os.path.join(hierarchy, name)
    os.mkdir(group)
    try:
        _write(os.path.join(group, "cpu.shares"), str(MAX_SHARES))
        _write(os.path.join(group, "cgroup.procs"), str(os.getpid()))
        yield group
    finally:
        _empty_and_remove(group, into=hierarchy)


@contextlib.contextmanager
def cpu_child(parent: str | None, name: str, shares: int = MAX_SHARES) -> Iterator[Callable[[int], None]]:
    """A group NAME inside PARENT (a cpu_priority group) with SHARES; yields `place(pid)`, which moves
    a running process, all its threads, into it. Under PARENT each thread at nice 0 weighs 1024: a
    group with MAX_SHARES runs ahead of them, one with MIN_SHARES on what they leave. Its processes go
    back to PARENT at the end. PARENT None (no cpu hierarchy): `place` does nothing."""
    if parent is None:
        yield stay
        return
    group = os.path.join(parent, name)
    os.mkdir(group)
    try:
        _write(os.path.join(group, "cpu.shares"), str(shares))
        yield lambda pid: _write(os.path.join(group, "cgroup.procs"), str(pid))
    finally:
        _empty_and_remove(group, into=parent)


def _empty_and_remove(group: str, into: str, patience: float = EMPTY_PATIENCE_SECONDS) -> None:
    # A thread started or still exiting as we move them keeps the group busy (EBUSY): try again.
    deadline = time.monotonic() + patience
    while True:
        with open(os.path.join(group, "tasks")) as f:
            tids = f.read().split()
        for tid in tids:  # ours and anything still running that we started
            with contextlib.suppress(OSError):
                _write(os.path.join(into, "tasks"), tid)
        try:
            os.rmdir(group)
            return
        except OSError as e:
            if e.errno != errno.EBUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.1)
