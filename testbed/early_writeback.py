"""Background writeback that starts early, as it does for a real DataNode's disks, while a run's
streaming disk exists (testbed/paced_disk.py).

A streaming disk holds at most 64 MB dirty (a strict per-device limit, so 24 GiB of RAM cannot hide
it). Under a strict limit the kernel starts the device's background writeback only once its dirty
pages pass the free-run point (balance_dirty_pages), so every writer is paced there, at one rate
per thread, even at a third of the disk's speed (measured: 15 % of the time in balance_dirty_pages
at 20 MB/s on a 60 MB/s disk). A real disk's writeback starts at the global background threshold,
far below its pacing point, and writers slower than the disk are never paced. A low global
`vm.dirty_background_bytes` gives the emulated disk the same (0 % paced up to 58 MB/s), so the
write benchmarks measure the product's scheduler and not an artefact of the emulation.

The setting is global, so runs share it: each holds it through a holder file named by its run in
HOLDERS_DIR; the first saves the old values, the last restores them. A crashed run's holder is
released by `testbed.leftovers --remove`.

    holder = hold("vnode-sync-test.hdfs.4711.9f3c2a1b")
    ...
    release(holder, testbed.leftovers.holder_is_live)   # restores the old values if no live run holds them
"""

import contextlib
import fcntl
import json
import os
import uuid
from collections.abc import Callable, Iterator

from vnode_sync.durable import write_atomically

HOLDERS_DIR = "/run/vnode-sync-early-writeback"
SAVED = ".saved.json"
LOCK = ".lock"
VM = "/proc/sys/vm"
EARLY_BACKGROUND_BYTES = 16_000_000
# The kernel keeps one of the pair set: writing one zeroes the other.
SETTINGS = ("dirty_background_ratio", "dirty_background_bytes")


def hold(run: str, holders_dir: str | None = None, vm: str | None = None) -> str:
    """Background writeback from EARLY_BACKGROUND_BYTES for as long as RUN holds it; returns the holder."""
    holders_dir = holders_dir or HOLDERS_DIR
    vm = vm or VM
    with _locked(holders_dir):
        if not os.path.exists(os.path.join(holders_dir, SAVED)):   # else a crashed holder saved them
            write_atomically(os.path.join(holders_dir, SAVED), json.dumps({s: _read(vm, s) for s in SETTINGS}).encode())
        holder = os.path.join(holders_dir, f"{run}.{uuid.uuid4().hex[:8]}")
        write_atomically(holder, b"")
        _set(vm, "dirty_background_bytes", EARLY_BACKGROUND_BYTES)
        return holder


def release(holder: str, is_live: Callable[[str], bool], holders_dir: str | None = None, vm: str | None = None) -> None:
    """HOLDER lets go; if no live run holds the setting any more, the saved values come back."""
    holders_dir = holders_dir or HOLDERS_DIR
    vm = vm or VM
    with _locked(holders_dir):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(holder)
        if any(is_live(name) for name in holders(holders_dir)):
            return
        saved_path = os.path.join(holders_dir, SAVED)
        try:
            with open(saved_path) as f:
                saved = json.load(f)
        except FileNotFoundError:
            return
        for setting in SETTINGS:
            if saved[setting]:   # the one that was set; writing it zeroes the other
                _set(vm, setting, saved[setting])
        os.unlink(saved_path)


def release_run(run: str, is_live: Callable[[str], bool], holders_dir: str | None = None) -> list[str]:
    """Every hold of RUN lets go (a cluster taken down from its workdir); returns the holders."""
    holders_dir = holders_dir or HOLDERS_DIR
    mine = [os.path.join(holders_dir, h) for h in holders(holders_dir) if h.startswith(run + ".")]
    for holder in mine:
        release(holder, is_live, holders_dir)
    return mine


def holders(holders_dir: str | None = None) -> list[str]:
    """The holder files' names (each begins with its run's name)."""
    holders_dir = holders_dir or HOLDERS_DIR
    if not os.path.isdir(holders_dir):
        return []
    return sorted(n for n in os.listdir(holders_dir) if not n.startswith("."))   # not the lock, nor a partial write


@contextlib.contextmanager
def _locked(holders_dir: str) -> Iterator[None]:
    os.makedirs(holders_dir, mode=0o755, exist_ok=True)
    with open(os.path.join(holders_dir, LOCK), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _read(vm: str, setting: str) -> int:
    with open(os.path.join(vm, setting)) as f:
        return int(f.read())


def _set(vm: str, setting: str, value: int) -> None:
    with open(os.path.join(vm, setting), "w") as f:
        f.write(str(value))
