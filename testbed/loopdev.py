"""Loop devices for tests: raw ones over sparse files (`loop_device`), and small ext4 disks, so a
test's file I/O is block I/O on a device of its own.

    with loop_device(unique_name("disk")) as (path, dev): ...   # detached on exit
    disk = LoopDisk.create("/tmp/vnode-sync-x/dn0.img", "/tmp/vnode-sync-x/dn0", size_mb=1024)
    disk.device, disk.device_number   # "/dev/loop3", DeviceNumber(7, 3): what blkio files name
    disk.remove()                     # unmount, detach, delete the backing file

Leftovers of a crashed run are found by a prefix of their paths: `stale_loops(prefix)`
(backing file path) and `stale_mounts(prefix)` (mount point path). Needs root.
"""

import contextlib
import glob
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass

from vnode_sync.errors import InvalidArgument, KernelError
from vnode_sync.kernel import disk_queue
from vnode_sync.kernel.devices import device_number, set_scheduler
from vnode_sync.kernel.disk_queue import QueueSetting
from vnode_sync.kernel.types import DeviceNumber


def _run(*argv: str) -> str:
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        raise KernelError(argv[-1], f"{' '.join(argv)} failed: {result.stderr.strip()}")
    return result.stdout.strip()


def why_no_bfq(sys_root: str = "/sys") -> str | None:
    """None if this kernel offers BFQ (listed by a device, loaded, or a module it can load), else why not."""
    for path in glob.glob(os.path.join(sys_root, "block", "*", "queue", "scheduler")):
        with open(path) as f:
            if "bfq" in f.read().replace("[", " ").replace("]", " ").split():
                return None
    release = os.uname().release
    if os.path.isdir(os.path.join(sys_root, "module", "bfq")) or glob.glob(f"/lib/modules/{release}/kernel/block/bfq*"):
        return None
    return f"this kernel ({release}) offers no BFQ for loop devices: no device lists it and it has no bfq module"


def select_fresh_scheduler(dev: DeviceNumber, name: str, sys_root: str = "/sys") -> None:
    """`name`, with its tunables at their defaults, and the kernel's request size. A loop device
    keeps its scheduler, the scheduler its tunables (BFQ's timeout_sync, max_budget, ...) and the
    queue an earlier run's max_sectors_kb after it is detached, and selecting the scheduler in force
    again changes nothing: "none" first makes the kernel start `name` afresh."""
    set_scheduler(dev, "none", sys_root)
    if name != "none":
        set_scheduler(dev, name, sys_root)
    with contextlib.suppress(OSError):   # 0 = the kernel's own limit (6.x); older kernels refuse it
        with open(os.path.join(sys_root, "dev", "block", str(dev), "queue", "max_sectors_kb"), "w") as f:
            f.write("0")


@contextlib.contextmanager
def queue_settings(device: str, settings: dict[str, str]) -> Iterator[None]:
    """The device's block queue files set for a run, and put back as they were after (a loop device
    keeps them for whoever attaches it next)."""
    before = disk_queue.read_settings(device, list(settings))
    disk_queue.apply(device, [QueueSetting(k, v) for k, v in settings.items()])
    try:
        yield
    finally:
        disk_queue.apply(device, before)


@dataclass(frozen=True)
class LoopDisk:
    backing_file: str
    device: str
    device_number: DeviceNumber
    mountpoint: str

    @classmethod
    def create(cls, backing_file: str, mountpoint: str, size_mb: int, scheduler: str = "none",
               ext4_options: tuple[str, ...] = ()) -> "LoopDisk":
        """A fresh ext4 file system of `size_mb` on a new loop device, mounted at `mountpoint` (with
        `ext4_options` besides noatime).

        The I/O scheduler is set, not inherited: a loop device keeps the one an earlier user
        chose (BFQ from a weight test idles between cgroups and would skew measurements).
        """
        with open(backing_file, "wb") as f:
            # Allocated up front so HDFS writes do not also pay for extent allocation in the host fs.
            os.posix_fallocate(f.fileno(), 0, size_mb << 20)
        # direct-io: the loop device reads the backing file with O_DIRECT, so pages are not cached
        # twice and a read that misses ext4's page cache really reaches the host disk.
        device = attach(backing_file, direct_io=True)
        try:
            number = device_number(device)
            select_fresh_scheduler(number, scheduler)
            make_ext4(device, mountpoint, ext4_options)
        except BaseException:
            detach(device)
            raise
        return cls(backing_file, device, number, mountpoint)

    def remove(self) -> None:
        """Unmount, detach and delete; each step is skipped if already done."""
        unmount(self.mountpoint)
        if self.device in stale_loops(self.backing_file):
            detach(self.device)
        if os.path.exists(self.backing_file):
            os.unlink(self.backing_file)


def make_ext4(device: str, mountpoint: str, options: tuple[str, ...] = ()) -> None:
    """A fresh ext4 on `device`, mounted at `mountpoint` (made if missing)."""
    format_ext4(device)
    mount_ext4(device, mountpoint, options)


def format_ext4(target: str) -> None:
    """A fresh ext4 on a device or an image file."""
    # Inode tables and journal written now, not by ext4lazyinit during a measurement.
    _run("mkfs.ext4", "-q", "-F", "-m", "0", "-E", "lazy_itable_init=0,lazy_journal_init=0", target)


EXT4_OPTION = re.compile(r"[a-z_]+(=[a-z0-9_]+)?")


def check_ext4_options(options: tuple[str, ...]) -> None:
    """Each a plain ext4 option ("nodelalloc", "commit=30"): nothing mount would read as two."""
    for option in options:
        if not EXT4_OPTION.fullmatch(option):
            raise InvalidArgument(f"ext4 mount option {option!r}: expected name or name=value "
                                  "(lower-case letters, digits, '_')")


def ext4_mount_options(options: tuple[str, ...] = ()) -> str:
    """What the testbed's ext4 is mounted with: noatime, then OPTIONS (check_ext4_options)."""
    check_ext4_options(options)
    return ",".join(("noatime", *options))


def mount_ext4(device: str, mountpoint: str, options: tuple[str, ...] = ()) -> None:
    option_text = ext4_mount_options(options)
    os.makedirs(mountpoint, exist_ok=True)
    _run("mount", "-t", "ext4", "-o", option_text, device, mountpoint)


def unmount(mountpoint: str) -> None:
    if mountpoint in stale_mounts(mountpoint):
        # Lazy as a fallback: a process that is still dying may hold a file open for a moment.
        if (subprocess.run(["umount", mountpoint], capture_output=True).returncode != 0
                and mountpoint in stale_mounts(mountpoint)):  # not if someone else unmounted it meanwhile
            _run("umount", "--lazy", mountpoint)


def attach(backing_file: str, direct_io: bool) -> str:
    """A new loop device over `backing_file`; returns its path ("/dev/loopN")."""
    return _run("losetup", "--find", "--show", f"--direct-io={'on' if direct_io else 'off'}", backing_file)


# The kernel detaches a loop device that is still open (udev's probe of a new device, say) only at its
# last close: a `down` once found /dev/loop0 still attached right after it returned.
DETACH_WAIT_SECONDS = 5.0


def detach(device: str) -> None:
    subprocess.run(["losetup", "--detach", device], capture_output=True)
    backing = f"/sys/block/{os.path.basename(device)}/loop/backing_file"
    deadline = time.monotonic() + DETACH_WAIT_SECONDS
    while os.path.exists(backing) and time.monotonic() < deadline:
        time.sleep(0.05)
    uncap_dirty_pages(device)   # the loop device outlives its attachment, and so would a cap


def cap_dirty_pages(device: str, max_bytes: int) -> None:
    """At most `max_bytes` of the page cache dirty for `device`, enforced whatever the global
    dirty limits (the bdi's strict_limit): its writers then run at the pace of its writeback."""
    bdi = _bdi_of(device)
    _write(os.path.join(bdi, "max_bytes"), str(max_bytes))
    _write(os.path.join(bdi, "strict_limit"), "1")


def uncap_dirty_pages(device: str) -> None:
    bdi = _bdi_of(device)
    if os.path.isdir(bdi):
        _write(os.path.join(bdi, "strict_limit"), "0")
        _write(os.path.join(bdi, "max_ratio"), "100")


def _bdi_of(device: str) -> str:
    return f"/sys/class/bdi/{device_number(device)}"


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def loops() -> list[tuple[str, str]]:
    """(device, backing file path) of every attached loop device."""
    found = []
    for name in sorted(os.listdir("/sys/block")):
        try:
            with open(f"/sys/block/{name}/loop/backing_file") as f:
                found.append((f"/dev/{name}", f.read().strip()))
        except OSError:
            continue
    return found


def mounts() -> list[str]:
    """Every mount point, latest mount first: the order to unmount them in, a mount before the one
    it was mounted inside or onto a file of (ext4 on a loop over FUSE)."""
    with open("/proc/self/mountinfo") as f:  # in the order the mounts were made
        return [line.split()[4].replace("\\040", " ") for line in f][::-1]


def stale_loops(prefix: str) -> list[str]:
    """Loop devices whose backing file path contains `prefix`."""
    return [device for device, backing in loops() if prefix in backing]


def stale_mounts(prefix: str) -> list[str]:
    """Mount points whose path contains `prefix`, latest mount first (see mounts())."""
    return [mountpoint for mountpoint in mounts() if prefix in mountpoint]


@contextlib.contextmanager
def loop_device(name: str, size_mb: int = 256) -> Iterator[tuple[str, DeviceNumber]]:
    """(path, DeviceNumber) of a fresh raw loop device over a sparse file under /tmp/`name`.*,
    scheduler "none", reading the file with O_DIRECT; detached and deleted on exit.

    Direct I/O because a buffered loop device fills the page cache with the file's holes as it
    reads them, at the cost of the pages' first touch: measured here, one reader of a new device
    got 91-866 MB/s buffered against 7,900 direct, so on a fresh host the device's own worker,
    not the VNode's cap, set the rate a test asserted.

    A loop device keeps the scheduler a test chose after it is detached, so it is set here
    and put back on the way out."""
    directory = tempfile.mkdtemp(prefix=name + ".")
    backing = os.path.join(directory, "disk.img")
    with open(backing, "wb") as f:
        f.truncate(size_mb << 20)
    path = attach(backing, direct_io=True)
    dev = device_number(path)
    try:
        select_fresh_scheduler(dev, "none")
        yield path, dev
    finally:
        with contextlib.suppress(KernelError, OSError):
            set_scheduler(dev, "none")
        detach(path)
        shutil.rmtree(directory, ignore_errors=True)
