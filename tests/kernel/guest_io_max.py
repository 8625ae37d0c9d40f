"""Run inside the cgroup-v2 guest: an io.max read cap set through the io-v2 backend, measured with dd.

The rate is dd's own count over dd's own clock, which starts once its files are open: timing from
outside would also count the exec of sh and dd, which takes a large share of the 4 s read on a
slow emulated CPU (on CI the rate so measured fell outside the cap ±10%)."""

import os
import re
import subprocess
import sys

from vnode_sync.kernel.io_v2 import IoV2Backend
from vnode_sync.kernel.types import DeviceLimits, DeviceNumber

CAP = 5_000_000
SIZE_MB = 20
# GNU dd's summary line (LC_ALL=C): "20971520 bytes (21 MB, 20 MiB) copied, 4.19 s, 5.0 MB/s"
DD_SUMMARY = re.compile(r"^(\d+) bytes .* copied, ([0-9.]+) s,", re.M)


def dd_rate(stderr: str) -> tuple[int, float]:
    """(bytes, seconds) from dd's summary; exits if it printed none (dd failed)."""
    summary = DD_SUMMARY.search(stderr)
    if summary is None:
        sys.exit(f"IO_MAX dd printed no summary: {stderr.strip()}")
    return int(summary.group(1)), float(summary.group(2))


dev = DeviceNumber(*map(int, os.environ["GUEST_DISK_DEV"].split(":")))
backend = IoV2Backend("/sys/fs/cgroup", f"vnode-sync.measure-{os.getpid()}")
backend.setup()
backend.ensure_vnode("vnode.alice")
backend.apply_limits("vnode.alice", [DeviceLimits(dev, read_bps=CAP)])
# sh waits on stdin until it is in the VNode, then becomes dd (which stays there).
dd = subprocess.Popen(["/bin/sh", "-c", f"read x; exec dd if=/dev/vda of=/dev/null bs=1M count={SIZE_MB} iflag=direct"],
                      stdin=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ, LC_ALL="C"))
backend.place("vnode.alice", dd.pid)
_, stderr = dd.communicate(b"go\n")
copied, seconds = dd_rate(stderr.decode(errors="replace"))
rate = copied / seconds
read = backend.usage()["vnode.alice"].devices[dev].read_bytes
print(f"IO_MAX cap={CAP} measured={rate:.0f} ratio={rate / CAP:.3f} seconds={seconds:.2f} bytes={copied} "
      f"io.stat rbytes={read}")
backend.teardown()
sys.exit(0 if copied == SIZE_MB * 2**20 and abs(rate / CAP - 1) <= 0.10 else 1)
