"""Raw loop devices over sparse files named with a unique prefix; always detached on exit."""

import contextlib
import os
import subprocess
import tempfile

from vnode_sync.kernel.devices import device_number, set_scheduler


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
    dev = device_number(path)
    try:
        set_scheduler(dev, "none")
        yield path, dev
    finally:
        with contextlib.suppress(OSError):
            set_scheduler(dev, "none")
        subprocess.run(["losetup", "-d", path], check=False)
        os.unlink(backing)
        os.rmdir(directory)
