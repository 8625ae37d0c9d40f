"""A device's dirty page cache as the kernel counts it (debugfs' per-bdi stats), for benchmarks to print."""

import contextlib
import os
import subprocess
from collections.abc import Iterator

MB = 1_000_000
DEBUGFS = "/sys/kernel/debug"


@contextlib.contextmanager
def debugfs() -> Iterator[None]:
    """debugfs mounted for the block of the `with`, unmounted after if it was not mounted before."""
    mounted = os.path.isdir(os.path.join(DEBUGFS, "bdi"))
    if not mounted:
        subprocess.run(["mount", "-t", "debugfs", "debugfs", DEBUGFS], check=True)
    try:
        yield
    finally:
        if not mounted:
            subprocess.run(["umount", DEBUGFS], check=False)


def dirty_mb(device_number: str) -> float | None:
    """The device's dirty plus writeback page cache (MB), from the kernel's per-bdi stats."""
    try:
        with open(os.path.join(DEBUGFS, "bdi", device_number, "stats")) as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
    except OSError:
        return None
    kb = sum(int(fields[k].split()[0]) for k in ("BdiReclaimable", "BdiWriteback") if k in fields)
    return kb * 1024 / MB
