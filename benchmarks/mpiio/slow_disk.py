"""The paper figures' emulated disk: testbed.paced_disk's spindle model (one request at a time,
reads and writes at `rate_mbps`, `seek_ms` for a request that does not continue the previous
one, the loop device without direct I/O so BFQ above it holds the queue).

Why an emulated disk at all (measured on the 6.18 Firecracker kernel, see results/README.md):
null_blk (whose `mbps` would do this in the kernel), device-mapper (dm-delay), nbd and ublk
are not built into this kernel, and a blkio throttle on the benchmark's root cgroup does not
bound its child VNodes, because blk-throttle is hierarchical only on the cgroup v2 (default)
hierarchy and flat on v1 (block/blk-throttle.c, throtl_pd_init): measured, a child VNode read
at 4.3 GB/s under a 20 MiB/s parent cap. A throttle also acts above the scheduler, so BFQ would
never see a queue.
"""

import contextlib
import dataclasses
import os
import shutil
import tempfile
from collections.abc import Iterator

from testbed.paced_disk import DiskModel, PacedDisk
from vnode_sync.kernel import devices
from vnode_sync.kernel.types import DeviceNumber


@dataclasses.dataclass(frozen=True)
class SpindleSettings:
    """What the figures vary: the disk's streaming rate and its cost of a non-sequential request."""

    rate_mbps: float = 100.0     # MB/s (10^6 bytes); a 7200 rpm SATA disk streams 100-150
    seek_ms: float = 0.0
    size_mib: int = 3072

    def model(self) -> DiskModel:
        return DiskModel.spindle(self.rate_mbps, self.seek_ms)

    def describe(self) -> str:
        return self.model().describe()


@dataclasses.dataclass(frozen=True)
class MountedDisk:
    """The emulated disk as the benchmark sees it."""

    loop_path: str                # /dev/loopN
    major: int
    minor: int
    mountpoint: str               # ext4 on the loop device
    scheduler: str
    model: SpindleSettings

    @property
    def device(self) -> str:
        return f"{self.major}:{self.minor}"

    @property
    def device_number(self) -> DeviceNumber:
        return DeviceNumber(self.major, self.minor)


@contextlib.contextmanager
def emulated_disk(name: str, settings: SpindleSettings, scheduler: str = "bfq") -> Iterator[MountedDisk]:
    """FUSE server, loop device, scheduler, ext4 and its mount under /tmp/<name>.*; all undone on exit."""
    workdir = tempfile.mkdtemp(prefix=name + ".", dir="/tmp")
    try:
        disk = PacedDisk.create(workdir, os.path.join(workdir, "fs"), settings.size_mib, settings.model(), scheduler)
        try:
            dev = disk.device_number
            yield MountedDisk(disk.device, dev.major, dev.minor, disk.mountpoint, devices.scheduler(dev), settings)
        finally:
            disk.remove()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
