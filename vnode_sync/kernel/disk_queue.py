"""A data disk's block-queue settings (its I/O scheduler, the scheduler's tunables, request sizes),
set together or not at all.

The agents never change a disk's queue: it is the site's. The storage role applies these where the
site asks (docs/edge.md):

    python -m vnode_sync.kernel.disk_queue --device /dev/sdb --device /dev/sdc scheduler=bfq \\
        iosched/timeout_sync=20 iosched/max_budget=65536 iosched/strict_guarantees=1 max_sectors_kb=512

Settings are written in the order given (a scheduler's tunables exist only once it is selected). If
the kernel refuses one, those already written, on every disk, are put back, and the error names the
one refused.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import re
import sys
from dataclasses import dataclass

from vnode_sync.errors import InvalidArgument, KernelError, NotFound, VNodeSyncError
from vnode_sync.kernel.devices import chosen_scheduler, device_number

# Files of /sys/dev/block/MAJ:MIN/queue/ that may be set: nothing outside the queue directory.
_KEY = re.compile(r"scheduler|max_sectors_kb|read_ahead_kb|nr_requests|iosched/[a-z_]{1,40}")
_VALUE = re.compile(r"[a-z0-9_-]{1,32}")
# Device paths also go into a udev rule (the storage role's): nothing that could end a quoted field.
_DEVICE = re.compile(r"/dev/[A-Za-z0-9._+:/-]{1,200}")


@dataclass(frozen=True)
class QueueSetting:
    key: str     # a path under the device's queue/ directory, e.g. "iosched/timeout_sync"
    value: str

    @classmethod
    def parse(cls, text: str) -> "QueueSetting":
        key, sep, value = text.partition("=")
        if not sep or not _KEY.fullmatch(key) or not _VALUE.fullmatch(value):
            raise InvalidArgument(f"queue setting {text!r}: expected KEY=VALUE with KEY one of scheduler, "
                                  "max_sectors_kb, read_ahead_kb, nr_requests, iosched/<tunable>, and VALUE "
                                  "a number or a name")
        return cls(key, value)


def queue_dir(device: str, sys_root: str = "/sys") -> str:
    """The queue/ directory of the whole disk at `device`; NotFound for a partition or no device."""
    if not _DEVICE.fullmatch(device) or "/../" in device + "/":
        raise InvalidArgument(f"device {device!r}: expected a path under /dev of letters, digits and ._+:/-")
    path = os.path.join(sys_root, "dev", "block", str(device_number(device)), "queue")
    if not os.path.isdir(path):
        raise NotFound(f"device {device!r} has no block queue of its own (a partition?): give the whole disk")
    return path


def read_setting(queue: str, key: str) -> str:
    """The value in force: for the scheduler, the bracketed one of the list the kernel prints."""
    with open(os.path.join(queue, key)) as f:
        text = f.read().strip()
    return (chosen_scheduler(text) or text) if key == "scheduler" else text


def read_settings(device: str, keys: list[str], sys_root: str = "/sys") -> list[QueueSetting]:
    queue = queue_dir(device, sys_root)
    try:
        return [QueueSetting(key, read_setting(queue, key)) for key in keys]
    except OSError as e:
        raise KernelError(queue, f"cannot read: {e.strerror}", code=e.errno) from e


def apply(device: str, settings: list[QueueSetting], sys_root: str = "/sys") -> list[str]:
    """Write `settings` in order; returns the keys whose value changed. All or nothing."""
    return apply_all([device], settings, sys_root)[device]


def apply_all(devices: list[str], settings: list[QueueSetting], sys_root: str = "/sys") -> dict[str, list[str]]:
    """`apply` to every disk, all or nothing across them: a refusal on one puts back the others too."""
    queues = {device: queue_dir(device, sys_root) for device in devices}   # every disk checked first
    written: list[tuple[str, QueueSetting]] = []   # (queue, what each changed key held before)
    changed: dict[str, list[str]] = {device: [] for device in devices}
    for device, queue in queues.items():
        for setting in settings:
            path = os.path.join(queue, setting.key)
            try:
                before = read_setting(queue, setting.key)
                if before == setting.value:
                    continue
                with open(path, "w") as f:
                    f.write(setting.value)
                if read_setting(queue, setting.key) == before:
                    continue   # the kernel rounds some (BFQ's times to jiffies): what it held already
            except OSError as e:
                _put_back(written)
                what = "no such setting (for this scheduler?)" if e.errno == errno.ENOENT else e.strerror
                raise KernelError(path, f"{what}; nothing was changed", setting.value, e.errno) from e
            written.append((queue, QueueSetting(setting.key, before)))
            changed[device].append(setting.key)
    return changed


def _put_back(written: list[tuple[str, QueueSetting]]) -> None:
    for queue, setting in reversed(written):
        with contextlib.suppress(OSError), open(os.path.join(queue, setting.key), "w") as f:
            f.write(setting.value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vnode_sync.kernel.disk_queue", description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", action="append", required=True, help="a whole disk, e.g. /dev/sdb; repeat for more")
    parser.add_argument("settings", nargs="+", metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    try:
        changed = apply_all(args.device, [QueueSetting.parse(s) for s in args.settings])
    except VNodeSyncError as e:
        print(f"disk_queue: error: {e}", file=sys.stderr)
        return 1
    for device, keys in changed.items():
        print(f"{device}: {'changed ' + ' '.join(keys) if keys else 'unchanged'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
