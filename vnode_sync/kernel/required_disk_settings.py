"""The data disks' settings a site requires of a storage node, read back by its storage agent.

The agents never change a disk's queue or a mount: the storage role sets the queue (disk_queue.py),
the site's fstab the mounts. The agent is told what is required (`required_disk_settings`, the same
KEY=VALUE the role writes) and reads it at every full reconcile; each one missing is one line of the
node's `degraded` list (`vnodectl nodes`), naming the disk, the setting, what it is and what it must be:

    KEY=VALUE            a file of each disk's queue/ directory: scheduler=none, read_ahead_kb=512,
                         max_sectors_kb=256, nr_requests=4, iosched/<tunable>=... (docs/edge.md section 6)
    mount_option=NAME    every file system on each disk (or on a partition of it) is mounted with NAME,
                         e.g. nodelalloc on ext4 (docs/edge.md section 6)
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from vnode_sync.errors import InvalidArgument
from vnode_sync.kernel.disk_queue import QueueSetting, read_setting
from vnode_sync.kernel.types import DeviceNumber

_OPTION = re.compile(r"[a-z0-9_]{1,40}")
WHY = "docs/edge.md section 6"


@dataclass(frozen=True)
class MountOption:
    name: str


RequiredDiskSetting = QueueSetting | MountOption


def parse(text: str) -> RequiredDiskSetting:
    key, sep, value = text.partition("=")
    if key == "mount_option":
        if not _OPTION.fullmatch(value):
            raise InvalidArgument(f"required disk setting {text!r}: expected mount_option=NAME, NAME a mount "
                                  "option such as nodelalloc")
        return MountOption(value)
    return QueueSetting.parse(text)


@dataclass(frozen=True)
class Mount:
    device: DeviceNumber   # what st_dev says: the disk or one of its partitions
    mountpoint: str
    fstype: str
    options: frozenset[str]   # the mount's own and its super block's


def mounts(proc_root: str = "/proc") -> list[Mount]:
    """Every mount of this mount namespace, from mountinfo (proc(5)): the device number is its own field."""
    found = []
    with open(os.path.join(proc_root, "self", "mountinfo")) as f:
        for line in f:
            fields = line.split()
            if "-" not in fields[6:]:
                continue
            dash = fields.index("-", 6)
            major, _, minor = fields[2].partition(":")
            own, (fstype, _source, super_options) = fields[5], fields[dash + 1:dash + 4]
            found.append(Mount(DeviceNumber(int(major), int(minor)), _unescaped(fields[4]), fstype,
                               frozenset(own.split(",")) | frozenset(super_options.split(","))))
    return found


def disk_of(device: DeviceNumber, sys_root: str = "/sys") -> DeviceNumber:
    """The whole disk a partition is on (sysfs: a partition's directory sits in its disk's); itself otherwise."""
    entry = os.path.join(sys_root, "dev", "block", str(device))
    if not os.path.exists(os.path.join(entry, "partition")):
        return device
    try:
        with open(os.path.join(os.path.realpath(entry), "..", "dev")) as f:
            major, _, minor = f.read().strip().partition(":")
        return DeviceNumber(int(major), int(minor))
    except (OSError, ValueError):
        return device


def unmet(devices: dict[str, DeviceNumber], required: list[RequiredDiskSetting], proc_root: str = "/proc",
          sys_root: str = "/sys") -> list[str]:
    """One line per (disk, setting) required and not in force; [] when every one holds."""
    lines: list[str] = []
    queue_settings = [s for s in required if isinstance(s, QueueSetting)]
    options = [s.name for s in required if isinstance(s, MountOption)]
    for path, device in sorted(devices.items()):
        queue = os.path.join(sys_root, "dev", "block", str(device), "queue")
        for setting in queue_settings:
            try:
                actual = read_setting(queue, setting.key)
            except OSError as e:
                lines.append(f"disk queue: {path} queue/{setting.key} cannot be read ({e.strerror}); required "
                             f"{setting.value} ({WHY})")
                continue
            if actual != setting.value:
                lines.append(f"disk queue: {path} queue/{setting.key} is {actual}, required {setting.value} ({WHY})")
    if not options:
        return lines
    try:
        every_mount = mounts(proc_root)
    except OSError as e:
        return lines + [f"mount options: {proc_root}/self/mountinfo cannot be read ({e.strerror}): "
                        f"{', '.join(options)} not checked"]
    for path, device in sorted(devices.items()):
        on_disk = [m for m in every_mount if m.device == device or disk_of(m.device, sys_root) == device]
        if not on_disk:
            lines += [f"mount option: no file system of {path} is mounted here, so {option} cannot be checked "
                      f"({WHY})" for option in options]
        for mount in on_disk:
            lines += [f"mount option: {mount.mountpoint} ({path}, {mount.fstype}) is mounted without {option}, "
                      f"required ({WHY})" for option in options if option not in mount.options]
    return lines


def _unescaped(path: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), path)
