"""Block devices by path: existence and MAJ:MIN, read from the device node itself."""

import os
import stat

from vnode_sync.errors import NotFound
from vnode_sync.kernel.types import DeviceNumber


def device_number(path: str) -> DeviceNumber:
    """MAJ:MIN of the block device at `path`; NotFound if there is none."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise NotFound(f"device {path!r} does not exist: {e.strerror}") from e
    if not stat.S_ISBLK(st.st_mode):
        raise NotFound(f"device {path!r} is not a block device")
    return DeviceNumber(os.major(st.st_rdev), os.minor(st.st_rdev))


def scheduler(dev: DeviceNumber, sys_root: str = "/sys") -> str | None:
    """The active I/O scheduler of a whole-disk device ("bfq", "mq-deadline", "none")."""
    path = os.path.join(sys_root, "dev", "block", str(dev), "queue", "scheduler")
    try:
        with open(path) as f:
            return chosen_scheduler(f.read())
    except OSError:
        return None


def chosen_scheduler(text: str) -> str | None:
    """The one in force, from a queue/scheduler file: "mq-deadline [bfq] none" -> "bfq"."""
    return next((word.strip("[]") for word in text.split() if word.startswith("[")), None)


def set_scheduler(dev: DeviceNumber, name: str, sys_root: str = "/sys") -> None:
    """Select the I/O scheduler of a whole-disk device (it stays with the device until changed)."""
    with open(os.path.join(sys_root, "dev", "block", str(dev), "queue", "scheduler"), "w") as f:
        f.write(name)
