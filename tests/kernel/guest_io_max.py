"""Run inside the cgroup-v2 guest: an io.max read cap set through the io-v2 backend, measured with dd."""

import os
import subprocess
import sys
import time

from vnode_sync.kernel.io_v2 import IoV2Backend
from vnode_sync.kernel.types import DeviceLimits, DeviceNumber

CAP = 5_000_000
SIZE_MB = 20

dev = DeviceNumber(*map(int, os.environ["GUEST_DISK_DEV"].split(":")))
backend = IoV2Backend("/sys/fs/cgroup", f"vnode-sync.measure-{os.getpid()}")
backend.setup()
backend.ensure_vnode("vnode.alice")
backend.apply_limits("vnode.alice", [DeviceLimits(dev, read_bps=CAP)])
dd = subprocess.Popen(["/bin/sh", "-c", f"read x; exec dd if=/dev/vda of=/dev/null bs=1M count={SIZE_MB} iflag=direct"],
                      stdin=subprocess.PIPE, stderr=subprocess.DEVNULL)
backend.place("vnode.alice", dd.pid)
start = time.monotonic()
dd.communicate(b"go\n")
seconds = time.monotonic() - start
rate = SIZE_MB * 2**20 / seconds
read = backend.usage()["vnode.alice"].devices[dev].read_bytes
print(f"IO_MAX cap={CAP} measured={rate:.0f} ratio={rate / CAP:.3f} seconds={seconds:.2f} io.stat rbytes={read}")
backend.teardown()
sys.exit(0 if abs(rate / CAP - 1) <= 0.10 else 1)
