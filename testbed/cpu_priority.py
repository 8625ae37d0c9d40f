"""CPU priority for a benchmark on a shared host: the calling process (and every process it starts
afterwards: HDFS daemons, clients, FUSE servers) in a cgroup v1 `cpu` group of its own with the
largest `cpu.shares`, so other work on the machine takes CPU only when the benchmark leaves some.
Both sides of a comparison run inside it, so it favours neither; it narrows the noise.

    with cpu_priority(unique_name("bench-cpu")) as where:   # None: no cpu hierarchy here
        ...

The group is named by the run (testbed.names), so `python -m testbed.leftovers` finds a crashed
run's.
"""

import contextlib
import errno
import logging
import os
import time
from collections.abc import Iterator

log = logging.getLogger(__name__)

CPU_HIERARCHY = "/sys/fs/cgroup/cpu"
MAX_SHARES = 262_144  # the kernel's MAX_SHARES (1 << 18); a nice-0 task or autogroup weighs 1024


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


@contextlib.contextmanager
def cpu_priority(name: str, hierarchy: str = CPU_HIERARCHY) -> Iterator[str | None]:
    if not os.path.isfile(os.path.join(hierarchy, "cpu.shares")) or os.geteuid() != 0:
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
        # A thread started or still exiting as we move them keeps the group busy (EBUSY): try again.
        for attempt in range(50):
            with open(os.path.join(group, "tasks")) as f:
                tids = f.read().split()
            for tid in tids:  # ours and anything still running that we started
                with contextlib.suppress(OSError):
                    _write(os.path.join(hierarchy, "tasks"), tid)
            try:
                os.rmdir(group)
                break
            except OSError as e:
                if e.errno != errno.EBUSY or attempt == 49:
                    raise
                time.sleep(0.1)
