"""An ext4 disk that serves I/O no faster than a real disk would, on a VM that has none.

On these VMs every block device (zram, the VM's own disk through the host's cache) serves
reads faster than two CPUs can push them through HDFS, so a read benchmark there measures
CPU time per byte. A DataNode on real disks is the other way round: the disk is the
bottleneck and CPU is spare. This emulates that with nothing the kernel lacks here (no
null_blk, device-mapper, nbd or ublk; a v1 blkio throttle on a parent does not bound its
children and acts above the scheduler, so it cannot stand in):

    image file  <-  FUSE server (paced_fuse.py, a process of its own)  <-  loop device  <-  ext4

I/O that reaches the loop device becomes FUSE requests on one file, `disk.img`, served from
the image no faster than the DiskModel says, one queue for the whole disk, whoever submitted
them. Two models:
- `DiskModel(read_mbps)`: the HDFS benchmarks' disk. Reads paced, writes free (setting up is
  not what is measured); the loop device uses direct I/O and queues reads at once, as HDFS's
  readers do at a disk.
- `DiskModel.streaming(rate_mbps)`: the HDFS write benchmarks' disk. Reads and writes paced,
  queued as above, and at most DIRTY_MB of the page cache dirty for it (a strict per-device
  limit): a writer runs at the disk's pace, as one does on a real DataNode once a sustained
  write outgrows its page cache (24 GiB of RAM here would hide the disk for gigabytes). While
  one exists, background writeback starts early (testbed/early_writeback.py): under the strict
  limit alone the kernel paces every writer, even one at a third of the disk's speed.
- `DiskModel.hdd(rate_mbps, seek_ms)`: the streaming disk plus a constant seek cost for every request
  that does not continue the previous one (not growing with the distance), queued as above.
- `DiskModel.spindle(rate_mbps, seek_ms)`: the paper figures' disk. Reads and writes paced,
  a seek cost for every request that does not continue the previous one, no idle credit; the
  loop device without direct I/O serves one request at a time, so the I/O scheduler above it
  (BFQ) holds the queue and its weights decide the order.

    disk = PacedDisk.create("/tmp/vnode-sync-x/dn0", "/tmp/vnode-sync-x/dn0/disk", size_mb=1024,
                            model=DiskModel(read_mbps=100))
    disk.device, disk.device_number   # "/dev/loop3", DeviceNumber(7, 3)
    disk.remove()                     # unmount ext4, detach the loop, unmount FUSE (the server exits), delete

The FUSE mount, the loop's backing file and the image all live under the caller's
(prefixed) directory, so loopdev.stale_mounts/stale_loops find a crashed run's; the server
exits by itself once its mount is gone. Needs root and /dev/fuse.
"""

import argparse
import contextlib
import os
import subprocess
import sys
import time
from dataclasses import dataclass

from vnode_sync.errors import InvalidArgument, KernelError
from vnode_sync.kernel.devices import device_number
from vnode_sync.kernel.types import DeviceNumber
from testbed import early_writeback
from testbed.leftovers import holder_is_live, run_of
from testbed.loopdev import (attach, cap_dirty_pages, detach, format_ext4, mount_ext4, select_fresh_scheduler, stale_loops,
                             stale_mounts, unmount)
from testbed.names import unique_name
from testbed.paced_fuse import FILE_NAME, PacedFileServer, Pacer

IMAGE_NAME = "disk.raw"
FUSE_DIR = "paced"
MB = 1_000_000
READY_SECONDS = 10
# A streaming disk's dirty page cache: a few hundred ms of its writes, like a DataNode's disk under
# a sustained write (the kernel's default, 20 % of RAM, lets 24 GiB hide the disk for gigabytes).
DIRTY_MB = 64
# A 7200 rpm disk's average seek plus half a turn: ~8.5 + 4.2 ms; 8 keeps a sequential stream near its rate.
HDD_SEEK_MS = 8.0


@dataclass(frozen=True)
class DiskModel:
    """How the emulated disk serves I/O (see the module's docstring for the two models)."""

    read_mbps: float = 100.0      # MB/s (10^6 bytes); a 7200 rpm SATA disk streams 100-150
    seek_ms: float = 0.0          # added when a request does not continue the previous one
    pace_writes: bool = False
    queued: bool = True           # loop device with direct I/O: requests reach the disk at once
    burst_ms: float = 5.0         # idle time credited, so a lone reader's gaps cost no bandwidth
    dirty_mb: float = 0.0         # page cache this disk may hold dirty; 0: only the kernel's global limits
    early_writeback: bool = True  # with dirty_mb: background writeback starts early (module docstring)

    @classmethod
    def streaming(cls, rate_mbps: float) -> "DiskModel":
        return cls(rate_mbps, pace_writes=True, dirty_mb=DIRTY_MB)

    @classmethod
    def hdd(cls, rate_mbps: float, seek_ms: float = HDD_SEEK_MS) -> "DiskModel":
        """The streaming disk with a seek on each request that does not continue the last one."""
        return cls(rate_mbps, seek_ms, pace_writes=True, dirty_mb=DIRTY_MB)

    @classmethod
    def spindle(cls, rate_mbps: float, seek_ms: float = 0.0) -> "DiskModel":
        return cls(rate_mbps, seek_ms, pace_writes=True, queued=False, burst_ms=0.0)

    def validate(self) -> None:
        if self.read_mbps <= 0:
            raise InvalidArgument(f"read_mbps={self.read_mbps}: must be above 0")
        if self.seek_ms < 0 or self.burst_ms < 0 or self.dirty_mb < 0:
            raise InvalidArgument(f"seek_ms={self.seek_ms}, burst_ms={self.burst_ms}, dirty_mb={self.dirty_mb}: "
                                  "must not be negative")

    def describe(self) -> str:
        seek = f", {self.seek_ms:g} ms per non-sequential request" if self.seek_ms else ""
        what = "reads and writes" if self.pace_writes else "reads"
        queue = "queued at once (direct I/O)" if self.queued else "one request at a time"
        dirty = ""
        if self.dirty_mb:
            writeback = "early background writeback" if self.early_writeback else "the kernel's background writeback"
            dirty = f", at most {self.dirty_mb:g} MB dirty, {writeback}"
        return f"loop device over a FUSE-served file: {what} at {self.read_mbps:g} MB/s{seek}, {queue}{dirty}"

    def arguments(self) -> list[str]:
        return ["--read-mbps", str(self.read_mbps), "--seek-ms", str(self.seek_ms), "--burst-ms", str(self.burst_ms),
                *(["--pace-writes"] if self.pace_writes else [])]


def serve(image: str, mountpoint: str, model: DiskModel) -> None:
    """Mount the paced file system at `mountpoint` and serve it until it is unmounted."""
    pacer = Pacer(model.read_mbps * MB, burst_seconds=model.burst_ms / 1000, seek_seconds=model.seek_ms / 1000)
    PacedFileServer.mount(image, mountpoint, pacer, model.pace_writes).serve()


@dataclass(frozen=True)
class PacedDisk:
    backing_file: str   # what the loop device reads: the FUSE server's disk.img
    device: str
    device_number: DeviceNumber
    mountpoint: str
    model: DiskModel
    writeback_holder: str = ""   # a streaming disk's hold on early background writeback

    @classmethod
    def create(cls, directory: str, mountpoint: str, size_mb: int, model: DiskModel,
               scheduler: str = "none", ext4_options: tuple[str, ...] = ()) -> "PacedDisk":
        """Image, FUSE server and loop device under `directory`; ext4 mounted at `mountpoint` (with
        `ext4_options` besides noatime)."""
        model.validate()
        if not os.path.exists("/dev/fuse"):
            raise KernelError("/dev/fuse", "no FUSE on this kernel")
        image, fuse_dir = os.path.join(directory, IMAGE_NAME), os.path.join(directory, FUSE_DIR)
        with open(image, "wb") as f:
            os.posix_fallocate(f.fileno(), 0, size_mb << 20)
        format_ext4(image)  # before pacing starts: formatting is not what any model measures
        os.makedirs(fuse_dir, exist_ok=True)
        with open(os.path.join(directory, "paced.log"), "w") as log:
            server = subprocess.Popen([sys.executable, "-m", __name__, "serve", image, fuse_dir, *model.arguments()],
                                      stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
        backing = os.path.join(fuse_dir, FILE_NAME)
        holder = ""
        try:
            _wait_mounted(fuse_dir, server)
            device = attach(backing, direct_io=model.queued)
            number = device_number(device)
            select_fresh_scheduler(number, scheduler)
            if model.dirty_mb:
                cap_dirty_pages(device, int(model.dirty_mb * MB))
            if model.dirty_mb and model.early_writeback:
                holder = early_writeback.hold(run_of(directory) or unique_name("paced-disk"))
            mount_ext4(device, mountpoint, ext4_options)
        except BaseException:
            _take_down(mountpoint, fuse_dir)
            if holder:
                early_writeback.release(holder, holder_is_live)
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.wait(5)
            raise
        return cls(backing, device, number, mountpoint, model, holder)

    def remove(self) -> None:
        """Unmount, detach, unmount FUSE (its server then exits), delete the image; each step skipped if done."""
        fuse_dir = os.path.dirname(self.backing_file)
        _take_down(self.mountpoint, fuse_dir)
        image = os.path.join(os.path.dirname(fuse_dir), IMAGE_NAME)
        if os.path.exists(image):
            os.unlink(image)
        if self.writeback_holder:
            early_writeback.release(self.writeback_holder, holder_is_live)


def _wait_mounted(fuse_dir: str, server: subprocess.Popen) -> None:
    deadline = time.monotonic() + READY_SECONDS
    while fuse_dir not in stale_mounts(fuse_dir):
        if server.poll() is not None:
            raise KernelError(fuse_dir, f"paced-disk server exited ({server.returncode}) before mounting; "
                                        f"see {os.path.join(os.path.dirname(fuse_dir), 'paced.log')}")
        if time.monotonic() > deadline:
            server.kill()
            raise KernelError(fuse_dir, f"paced-disk server did not mount within {READY_SECONDS} s")
        time.sleep(0.05)


def _take_down(mountpoint: str, fuse_dir: str) -> None:
    # ext4 first, then the loop that reads the FUSE file, then FUSE: in the other order
    # ext4 would lose its disk while mounted.
    unmount(mountpoint)
    for device in stale_loops(os.path.join(fuse_dir, FILE_NAME)):
        detach(device)
    unmount(fuse_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {__name__}", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("serve", help="serve IMAGE as MOUNTPOINT/disk.img until unmounted")
    run.add_argument("image")
    run.add_argument("mountpoint")
    run.add_argument("--read-mbps", type=float, required=True, help="bandwidth, MB/s (10^6 bytes)")
    run.add_argument("--seek-ms", type=float, default=0.0, help="cost of a non-sequential request")
    run.add_argument("--burst-ms", type=float, default=DiskModel.burst_ms, help="idle time credited")
    run.add_argument("--pace-writes", action="store_true", help="pace writes too")
    args = parser.parse_args(argv)
    serve(args.image, args.mountpoint, DiskModel(args.read_mbps, args.seek_ms, args.pace_writes, burst_ms=args.burst_ms))
    return 0


if __name__ == "__main__":
    sys.exit(main())
