"""VNodes for benchmark runs: blkio v1 cgroups under a root named with the bench prefix.

Every run gets its own root (`vnode-sync-bench.mpiio.<pid>`), so a crashed run's leftovers
are found by prefix and removed by testbed.leftovers before the next run; roots of runs
still alive are left alone.
"""

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

from vnode_sync.errors import KernelError, ThreadGone
from vnode_sync.kernel.blkio_v1 import BlkioV1Backend
from vnode_sync.kernel.types import DeviceLimits, DeviceNumber

BENCH_PREFIX = "vnode-sync-bench.mpiio"
HIERARCHY = "/sys/fs/cgroup/blkio"


@dataclass(frozen=True)
class VNodeSpec:
    """What one benchmark VNode gets on the emulated disk; 0 means no limit / default weight."""

    name: str
    read_bps: int = 0
    write_bps: int = 0
    weight: int = 0
    device: DeviceNumber | None = None   # None: the device passed to configure()


class BenchVNodes:
    def __init__(self, backend: BlkioV1Backend, root_name: str):
        self.backend = backend
        self.root_name = root_name

    def configure(self, device: DeviceNumber | None, specs: list[VNodeSpec]) -> list[str]:
        """Make exactly these VNodes with these limits; returns their names in order."""
        wanted = {s.name for s in specs}
        for stale in set(self.backend.vnodes()) - wanted:
            self.backend.remove_vnode(stale)
        for spec in specs:
            self.backend.ensure_vnode(spec.name)
            self.backend.apply_limits(spec.name, [DeviceLimits(spec.device or device, read_bps=spec.read_bps,
                                                               write_bps=spec.write_bps,
                                                               weight=spec.weight)])
        return [s.name for s in specs]

    def place_process(self, vnode: str, pid: int) -> int:
        """Move every thread of `pid`; threads it starts later inherit the cgroup (v1).
        Returns how many moved; threads that exit meanwhile are skipped."""
        moved = 0
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                self.backend.place(vnode, int(tid))
                moved += 1
            except ThreadGone:
                continue
        return moved


@contextlib.contextmanager
def bench_vnodes(hierarchy: str = HIERARCHY) -> Iterator[BenchVNodes]:
    root_name = f"{BENCH_PREFIX}.{os.getpid()}"
    backend = BlkioV1Backend(mount=hierarchy, root_name=root_name)
    backend.setup()
    try:
        yield BenchVNodes(backend, root_name)
    finally:
        teardown_patiently(backend)


def teardown_patiently(backend: BlkioV1Backend, seconds: float = 10.0) -> None:
    """Ranks stopped by a signal may still be exiting, and rmdir says EBUSY until they have."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            backend.teardown()
            return
        except KernelError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
