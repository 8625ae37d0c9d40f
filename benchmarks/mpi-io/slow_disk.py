"""An emulated disk slower than this VM's: a loop device whose backing file is served by a
rate-limited FUSE daemon, so the bottleneck sits *below* the loop device's I/O scheduler.

Why not something simpler (measured on the 6.18 Firecracker kernel, see results/README.md):
null_blk (whose `mbps` would do this in the kernel), device-mapper (dm-delay), nbd and ublk
are not built into this kernel, and a blkio throttle on the benchmark's root cgroup does not
bound its child VNodes, because cgroup v1 blk-throttle is flat ("if not on the default
hierarchy, the tree is flattened", block/blk-throttle.c): a child VNode read at 4.3 GB/s under
a 20 MiB/s parent cap. A throttle also acts above the scheduler, so BFQ would never see a queue.

The daemon models one spindle: requests are served one after another at `rate_bps`, plus
`seek_seconds` whenever a request does not start where the previous one ended. Bytes are kept
in a file on tmpfs, so the modelled rate is the only limit.

    python slow_disk.py serve --backing /dev/shm/x.img --mount DIR --rate-mbps 100 --seek-ms 0
"""

import argparse
import contextlib
import dataclasses
import errno
import os
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator

DISK_FILE = "disk.img"
MB = 1_000_000


@dataclasses.dataclass(frozen=True)
class DiskModel:
    """What the emulated disk is: its streaming rate and its cost of a non-sequential request."""

    rate_mbps: float = 100.0     # MB/s (10^6 bytes); a 7200 rpm SATA disk streams 100-150
    seek_ms: float = 0.0         # added when a request does not continue the previous one
    size_mib: int = 3072         # tmpfs bytes used only as they are written

    def describe(self) -> str:
        seek = f", {self.seek_ms:g} ms per non-sequential request" if self.seek_ms else ""
        return (f"loop device over a FUSE-served file limited to {self.rate_mbps:g} MB/s{seek} "
                f"(one request at a time, bytes on tmpfs)")


class Spindle:
    """Serialises requests: each waits its turn and then holds the disk for its service time."""

    def __init__(self, model: DiskModel):
        self.model = model
        self._lock = threading.Lock()
        self._busy_until = 0.0
        self._head = -1

    def serve(self, offset: int, length: int) -> None:
        service = length / (self.model.rate_mbps * MB)
        with self._lock:
            if offset != self._head:
                service += self.model.seek_ms / 1000
            self._head = offset + length
            start = max(time.monotonic(), self._busy_until)
            self._busy_until = start + service
            done_at = self._busy_until
        delay = done_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def serve(backing: str, mountpoint: str, model: DiskModel) -> None:
    """Run the FUSE daemon in the foreground until the mount is removed."""
    import fuse  # fusepy, installed by scripts/setup.d/mpi.sh

    spindle = Spindle(model)
    fd = os.open(backing, os.O_RDWR)
    size = os.fstat(fd).st_size
    path = "/" + DISK_FILE

    class OneFileDisk(fuse.Operations):
        def getattr(self, p, fh=None):
            now = time.time()
            if p == "/":
                return {"st_mode": stat.S_IFDIR | 0o755, "st_nlink": 2,
                        "st_atime": now, "st_mtime": now, "st_ctime": now}
            if p == path:
                return {"st_mode": stat.S_IFREG | 0o600, "st_nlink": 1, "st_size": size,
                        "st_atime": now, "st_mtime": now, "st_ctime": now}
            raise fuse.FuseOSError(errno.ENOENT)

        def readdir(self, p, fh):
            return [".", "..", DISK_FILE]

        def open(self, p, flags):
            if p != path:
                raise fuse.FuseOSError(errno.ENOENT)
            return 0

        def read(self, p, length, offset, fh):
            spindle.serve(offset, length)
            return os.pread(fd, length, offset)

        def write(self, p, buf, offset, fh):
            spindle.serve(offset, len(buf))
            return os.pwrite(fd, buf, offset)

        def truncate(self, p, length, fh=None):
            if length != size:
                raise fuse.FuseOSError(errno.EPERM)

        def flush(self, p, fh):
            return 0

        def fsync(self, p, datasync, fh):
            return 0

    # direct_io: no page cache for the backing file, so every loop request reaches the spindle.
    fuse.FUSE(OneFileDisk(), mountpoint, foreground=True, nothreads=False, direct_io=True,
              max_read=1 << 20, max_write=1 << 20, big_writes=True)


@dataclasses.dataclass(frozen=True)
class MountedDisk:
    """The emulated disk as the benchmark sees it."""

    loop_path: str                # /dev/loopN
    major: int
    minor: int
    mountpoint: str               # ext4 on the loop device
    scheduler: str
    model: DiskModel

    @property
    def device(self) -> str:
        return f"{self.major}:{self.minor}"


def set_scheduler(loop_path: str, scheduler: str) -> str:
    """Select the I/O scheduler; returns the one the kernel reports active."""
    queue = f"/sys/block/{os.path.basename(loop_path)}/queue/scheduler"
    with open(queue, "w") as f:
        f.write(scheduler)
    with open(queue) as f:
        active = next(w for w in f.read().split() if w.startswith("["))
    return active.strip("[]")


def _run(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def _wait_for(path: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {seconds} s (FUSE daemon failed?)")
        time.sleep(0.05)


@contextlib.contextmanager
def emulated_disk(name: str, model: DiskModel, scheduler: str = "bfq") -> Iterator[MountedDisk]:
    """FUSE daemon, loop device, scheduler, ext4 and its mount; all undone on exit or error."""
    workdir = tempfile.mkdtemp(prefix=name + ".", dir="/tmp")
    backing = tempfile.mktemp(prefix=name + ".", suffix=".img", dir="/dev/shm")
    fuse_dir = os.path.join(workdir, "fuse")
    fs_dir = os.path.join(workdir, "fs")
    os.mkdir(fuse_dir)
    os.mkdir(fs_dir)
    daemon = loop = None
    mounted = False
    try:
        with open(backing, "wb") as f:
            f.truncate(model.size_mib << 20)
        # Formatting the plain file first keeps mkfs off the slow path; no lazy init, so ext4
        # does no background zeroing during a measurement.
        _run("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", backing)
        daemon = subprocess.Popen([sys.executable, os.path.abspath(__file__), "serve", "--backing", backing,
                                   "--mount", fuse_dir, "--rate-mbps", str(model.rate_mbps),
                                   "--seek-ms", str(model.seek_ms)])
        _wait_for(os.path.join(fuse_dir, DISK_FILE), 10)
        loop = _run("losetup", "--find", "--show", os.path.join(fuse_dir, DISK_FILE))
        active = set_scheduler(loop, scheduler)
        _run("mount", "-o", "noatime", loop, fs_dir)
        mounted = True
        st = os.stat(loop)
        yield MountedDisk(loop, os.major(st.st_rdev), os.minor(st.st_rdev), fs_dir, active, model)
    finally:
        if mounted:
            subprocess.run(["umount", fs_dir], check=False)
        if loop:
            subprocess.run(["losetup", "-d", loop], check=False)
        if daemon:
            subprocess.run(["umount", fuse_dir], check=False, capture_output=True)
            try:
                daemon.wait(10)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        with contextlib.suppress(OSError):
            os.unlink(backing)
        for d in (fs_dir, fuse_dir, workdir):
            with contextlib.suppress(OSError):
                os.rmdir(d)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run the rate-limited FUSE daemon in the foreground")
    s.add_argument("--backing", required=True)
    s.add_argument("--mount", required=True)
    s.add_argument("--rate-mbps", type=float, default=DiskModel.rate_mbps)
    s.add_argument("--seek-ms", type=float, default=DiskModel.seek_ms)
    args = parser.parse_args()
    serve(args.backing, args.mount, DiskModel(args.rate_mbps, args.seek_ms))


if __name__ == "__main__":
    main()
