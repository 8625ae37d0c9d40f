"""Small ext4 disks on zram devices: block devices in RAM, for measurements that need a steady disk.

A loop device hands each blkio cgroup's bios to a worker of its own, so spreading
threads over VNodes changes how a loop disk performs, and the VM's disk drifts from
minute to minute. zram has neither: a bio is served in the submitter's context at
memory speed, through the same block layer, blk-throttle and blkio counters.

    disk = ZramDisk.create("/tmp/vnode-sync-x/dn0/disk.zram", "/tmp/vnode-sync-x/dn0/disk", size_mb=1024)
    disk.device, disk.device_number   # "/dev/zram1", DeviceNumber(252, 1)
    disk.remove()                     # unmount, reset and remove the device, delete the marker

A zram device has no name to carry a prefix, so the device is written to a marker file
under the caller's (prefixed) directory; `remove_marked(path)` undoes a crashed run's.
"""

import contextlib
import os
from dataclasses import dataclass

from vnode_sync.errors import KernelError
from vnode_sync.kernel.devices import device_number
from vnode_sync.kernel.types import DeviceNumber
from testbed.loopdev import make_ext4, unmount

ZRAM_MARKER = "disk.zram"  # a file naming the zram device of a disk; remove_marked() undoes it

CONTROL = "/sys/class/zram-control"


def _sys(device: str, name: str) -> str:
    return f"/sys/block/{os.path.basename(device)}/{name}"


@dataclass(frozen=True)
class ZramDisk:
    backing_file: str   # the marker file naming the device
    device: str
    device_number: DeviceNumber
    mountpoint: str

    @classmethod
    def create(cls, marker: str, mountpoint: str, size_mb: int, ext4_options: tuple[str, ...] = ()) -> "ZramDisk":
        if not os.path.isdir(CONTROL):
            raise KernelError(CONTROL, "no zram (modprobe zram)")
        with open(os.path.join(CONTROL, "hot_add")) as f:
            device = f"/dev/zram{int(f.read())}"
        with open(marker, "w") as f:
            f.write(device)
        try:
            with open(_sys(device, "disksize"), "w") as f:
                f.write(f"{size_mb}M")
            make_ext4(device, mountpoint, ext4_options)
        except BaseException:
            remove_marked(marker)
            raise
        return cls(marker, device, device_number(device), mountpoint)

    def remove(self) -> None:
        unmount(self.mountpoint)
        remove_marked(self.backing_file)


def remove_marked(marker: str) -> None:
    """Reset and remove the zram device a marker file names (unmounted first), then the marker."""
    try:
        with open(marker) as f:
            device = f.read().strip()
    except FileNotFoundError:
        return
    if device.startswith("/dev/zram") and os.path.exists(_sys(device, "reset")):
        with contextlib.suppress(OSError):
            with open(_sys(device, "reset"), "w") as f:
                f.write("1")
        with contextlib.suppress(OSError):
            with open(os.path.join(CONTROL, "hot_remove"), "w") as f:
                f.write(device.removeprefix("/dev/zram"))
    os.unlink(marker)
