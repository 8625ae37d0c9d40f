"""An ext4 disk whose reads are paced to a fixed bandwidth, like a real disk's, on a VM that has none.

On these VMs every block device (zram, the VM's own disk through the host's cache) serves
reads faster than two CPUs can push them through HDFS, so a read benchmark there measures
CPU time per byte. A DataNode on real disks is the other way round: the disk is the
bottleneck and CPU is spare. This emulates that with nothing the kernel lacks here:

    image file  <-  FUSE server (paced_fuse.py, a process of its own; reads paced)  <-  loop device  <-  ext4

Reads that reach the loop device become FUSE reads of one file, `disk.img`; the server
serves them from the image file no faster than `read_mbps`, one queue for the whole disk,
whoever submitted them. Writes are not paced (setting the disk up is not what is measured).
The file is opened direct_io, so no page cache sits between the loop device and the pacing.

    disk = PacedDisk.create("/tmp/vnode-sync-x/dn0", "/tmp/vnode-sync-x/dn0/disk", size_mb=1024, read_mbps=100)
    disk.device, disk.device_number   # "/dev/loop3", DeviceNumber(7, 3)
    disk.remove()                     # unmount ext4, detach the loop, unmount FUSE (the server exits), delete

The FUSE mount, the loop's backing file and the image all live under the caller's
(prefixed) directory, so loopdev.stale_mounts/stale_loops find a crashed run's; the server
exits by itself once its mount is gone. Needs root and /dev/fuse.

benchmarks/mpi-io/slow_disk.py is the same idea, older, for the paper's figures: a C
daemon (spindled.c, libfuse3, compiled on first use) serving one request at a time with a
seek cost, under a loop device without direct I/O so BFQ sees the queue. This one needs no
compiler or libfuse and lets the loop device queue reads at once (async direct I/O), as
HDFS's readers do at a disk. The two should become one server with both models.
"""

import argparse
import contextlib
import os
import subprocess
import sys
import time
from dataclasses import dataclass

from vnode_sync.errors import InvalidArgument, KernelError
from vnode_sync.kernel.devices import device_number, set_scheduler
from vnode_sync.kernel.types import DeviceNumber
from testbed.paced_fuse import FILE_NAME, PacedFileServer
from testbed.loopdev import attach, detach, make_ext4, stale_loops, stale_mounts, unmount

IMAGE_NAME = "disk.raw"
FUSE_DIR = "paced"
MB = 1_000_000
READY_SECONDS = 10


def serve(image: str, mountpoint: str, read_mbps: float) -> None:
    """Mount the paced file system at `mountpoint` and serve it until it is unmounted."""
    PacedFileServer.mount(image, mountpoint, read_mbps * MB).serve()


@dataclass(frozen=True)
class PacedDisk:
    backing_file: str   # what the loop device reads: the FUSE server's disk.img
    device: str
    device_number: DeviceNumber
    mountpoint: str

    @classmethod
    def create(cls, directory: str, mountpoint: str, size_mb: int, read_mbps: float) -> "PacedDisk":
        """Image, FUSE server and loop device under `directory`; ext4 mounted at `mountpoint`."""
        if read_mbps <= 0:
            raise InvalidArgument(f"read_mbps={read_mbps}: must be above 0")
        if not os.path.exists("/dev/fuse"):
            raise KernelError("/dev/fuse", "no FUSE on this kernel")
        image, fuse_dir = os.path.join(directory, IMAGE_NAME), os.path.join(directory, FUSE_DIR)
        with open(image, "wb") as f:
            os.posix_fallocate(f.fileno(), 0, size_mb << 20)
        os.makedirs(fuse_dir, exist_ok=True)
        with open(os.path.join(directory, "paced.log"), "w") as log:
            server = subprocess.Popen([sys.executable, "-m", __name__, "serve", image, fuse_dir,
                                       "--read-mbps", str(read_mbps)], stdout=subprocess.DEVNULL, stderr=log)
        backing = os.path.join(fuse_dir, FILE_NAME)
        try:
            _wait_mounted(fuse_dir, server)
            device = attach(backing, direct_io=True)
            number = device_number(device)
            set_scheduler(number, "none")
            make_ext4(device, mountpoint)
        except BaseException:
            _take_down(mountpoint, fuse_dir)
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.wait(5)
            raise
        return cls(backing, device, number, mountpoint)

    def remove(self) -> None:
        """Unmount, detach, unmount FUSE (its server then exits), delete the image; each step skipped if done."""
        fuse_dir = os.path.dirname(self.backing_file)
        _take_down(self.mountpoint, fuse_dir)
        image = os.path.join(os.path.dirname(fuse_dir), IMAGE_NAME)
        if os.path.exists(image):
            os.unlink(image)


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
    run.add_argument("--read-mbps", type=float, required=True, help="read bandwidth, MB/s (10^6 bytes)")
    args = parser.parse_args(argv)
    serve(args.image, args.mountpoint, args.read_mbps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
