"""Raw loop devices over sparse files named with a unique prefix; always detached on exit."""

import contextlib
import os
import subprocess
import tempfile

from vnode_sync.kernel.devices import device_number
from vnode_sync.kernel.types import DeviceNumber


@contextlib.contextmanager
def loop_device(name: str, size_mb: int = 256):
    """Yield (path, DeviceNumber) of a fresh loop device over a sparse file, scheduler "none".

    A loop device keeps the scheduler a test chose after it is detached, so it is set
    here and put back on the way out."""
    directory = tempfile.mkdtemp(prefix=name + ".")
    backing = os.path.join(directory, "disk.img")
    with open(backing, "wb") as f:
        f.truncate(size_mb << 20)
    path = subprocess.run(["losetup", "--find", "--show", backing], check=True, capture_output=True,
                          text=True).stdout.strip()
    try:
        set_scheduler(device_number(path), "none")
        yield path, device_number(path)
    finally:
        with contextlib.suppress(OSError):
            set_scheduler(device_number(path), "none")
        subprocess.run(["losetup", "-d", path], check=False)
        os.unlink(backing)
        os.rmdir(directory)


def set_scheduler(dev: DeviceNumber, scheduler: str) -> None:
    with open(f"/sys/dev/block/{dev}/queue/scheduler", "w") as f:
        f.write(scheduler)
