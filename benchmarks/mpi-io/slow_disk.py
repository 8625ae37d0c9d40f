"""An emulated disk slower than this VM's: a loop device whose backing file is served by a
rate-limited FUSE daemon, so the bottleneck sits *below* the loop device's I/O scheduler.

Why not something simpler (measured on the 6.18 Firecracker kernel, see results/README.md):
null_blk (whose `mbps` would do this in the kernel), device-mapper (dm-delay), nbd and ublk
are not built into this kernel, and a blkio throttle on the benchmark's root cgroup does not
bound its child VNodes, because blk-throttle is hierarchical only on the cgroup v2 (default)
hierarchy and flat on v1 (block/blk-throttle.c, throtl_pd_init): measured, a child VNode read
at 4.3 GB/s under a 20 MiB/s parent cap. A throttle also acts above the scheduler, so BFQ would never see a queue.

The daemon (spindled.c, compiled on first use) models one spindle: requests are served one
after another at `rate_mbps`, plus `seek_ms` whenever a request does not start where the
previous one ended. Bytes are kept in a file on tmpfs, so the modelled rate is the only limit.
"""

import contextlib
import dataclasses
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator

from vnode_sync.kernel import devices
from vnode_sync.kernel.types import DeviceNumber

DISK_FILE = "disk.img"


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


SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spindled.c")
BUILD_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".build")


def spindled_binary() -> str:
    """Compile spindled.c when the binary is missing or older than its source."""
    binary = os.path.join(BUILD_DIR, "spindled")
    if os.path.exists(binary) and os.path.getmtime(binary) >= os.path.getmtime(SOURCE):
        return binary
    os.makedirs(BUILD_DIR, exist_ok=True)
    flags = _run("pkg-config", "--cflags", "--libs", "fuse3").split()
    _run("gcc", "-O2", "-Wall", "-o", binary, SOURCE, *flags, "-lpthread")
    return binary


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

    @property
    def device_number(self) -> DeviceNumber:
        return DeviceNumber(self.major, self.minor)


def set_scheduler(loop_path: str, name: str) -> str:
    """Select the I/O scheduler; returns the one the kernel reports active."""
    dev = devices.device_number(loop_path)
    devices.set_scheduler(dev, name)
    return devices.scheduler(dev)


def _run(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def _unmount(target: str) -> None:
    """Unmount; if something still holds the mount (a stray process), detach it lazily."""
    if subprocess.run(["umount", target], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", target], check=False)


def _wait_for(path: str, seconds: float, daemon: subprocess.Popen) -> None:
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if daemon.poll() is not None:
            raise RuntimeError(f"spindled exited {daemon.returncode} before {path} appeared")
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
        daemon = subprocess.Popen([spindled_binary(), backing, fuse_dir, str(model.rate_mbps), str(model.seek_ms)],
                                  start_new_session=True)  # Ctrl-C must not stop it before the unmount
        _wait_for(os.path.join(fuse_dir, DISK_FILE), 10, daemon)
        loop = _run("losetup", "--find", "--show", os.path.join(fuse_dir, DISK_FILE))
        active = set_scheduler(loop, scheduler)
        _run("mount", "-o", "noatime", loop, fs_dir)
        mounted = True
        st = os.stat(loop)
        yield MountedDisk(loop, os.major(st.st_rdev), os.minor(st.st_rdev), fs_dir, active, model)
    finally:
        if mounted:
            _unmount(fs_dir)
        if loop:
            subprocess.run(["losetup", "-d", loop], check=False)
        if daemon:
            _unmount(fuse_dir)
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


def remove_stale_disks(prefix: str, owner_alive) -> list[str]:
    """Undo what a killed run left: ext4 and FUSE mounts, loop devices, tmpfs images.

    Only names that start with `prefix` and whose owner (`owner_alive(name)`) is gone.
    """
    removed = []

    def stale(path: str) -> bool:
        name = os.path.basename(os.path.dirname(os.path.dirname(path))) if path.startswith("/tmp/") else ""
        return name.startswith(prefix) and not owner_alive(name)

    with open("/proc/self/mounts") as f:
        mounts = [line.split()[1] for line in f]
    for target in (m for m in mounts if m.endswith("/fs") and stale(m + "/x")):
        _unmount(target)
        removed.append(target)
    for line in _run("losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE").splitlines():
        name, _, back = line.strip().partition(" ")
        if stale(back.strip()):
            subprocess.run(["losetup", "-d", name], check=False)
            removed.append(name)
    for target in (m for m in mounts if m.endswith("/fuse") and stale(m + "/x")):
        _unmount(target)
        removed.append(target)
    for entry in os.listdir("/dev/shm"):
        if entry.startswith(prefix) and not owner_alive(entry):
            os.unlink(os.path.join("/dev/shm", entry))
            removed.append(entry)
    return removed
