"""What every experiment command shares: its options, the emulated disk, VNodes, cleanup.

Ctrl-C and SIGTERM unwind through the context managers, so the mount, loop device, FUSE
daemon, tmpfs image and bench cgroups are removed however a run ends.
"""

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

from benchmarks.mpiio.bench_vnodes import BENCH_PREFIX, BenchVNodes, bench_vnodes
from benchmarks.mpiio import report
from benchmarks.mpiio.machine import TestbedRecord, record
from benchmarks.mpiio.slow_disk import MountedDisk, SpindleSettings, emulated_disk
from testbed.leftovers import remove_crashed
from testbed.loopdev import queue_settings
from testbed.processes import exit_once_on_signals
from vnode_sync.errors import InvalidArgument
from vnode_sync.kernel import disk_queue

MB = 1_000_000


@dataclass
class Testbed:
    disk: MountedDisk
    vnodes: BenchVNodes
    record: TestbedRecord
    started: float

    def elapsed(self) -> float:
        return time.monotonic() - self.started


def common_options(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--rate-mbps", type=float, default=SpindleSettings.rate_mbps,
                   help="emulated disk streaming rate, MB/s (default %(default)s)")
    p.add_argument("--seek-ms", type=float, default=SpindleSettings.seek_ms,
                   help="emulated cost of a non-sequential request (default %(default)s)")
    p.add_argument("--scheduler", default="bfq", choices=("bfq", "mq-deadline", "kyber", "none"))
    p.add_argument("--queue", action="append", default=[], type=queue_setting, metavar="KEY=VALUE",
                   help="a setting of the emulated disk's queue, set after the scheduler, e.g. "
                        "iosched/timeout_sync=20 (repeat for more; docs/fair-shares.md)")
    p.add_argument("--out", default=report.RESULTS_DIR, help="results directory (default benchmarks/results)")
    return p


def queue_setting(text: str) -> disk_queue.QueueSetting:
    try:
        return disk_queue.QueueSetting.parse(text)
    except InvalidArgument as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def command_line() -> str:
    module = "benchmarks.mpiio." + os.path.splitext(os.path.basename(sys.argv[0]))[0]
    return " ".join(["sudo .venv/bin/python -m", module, *sys.argv[1:]])


def prepare_run(why_root: str) -> float:
    """Root check, signals that unwind once, earlier runs' VNodes removed; returns the start time."""
    if os.geteuid() != 0:
        raise SystemExit(why_root)
    exit_once_on_signals()   # SIGTERM or Ctrl-C unwinds once: every context manager's cleanup runs
    for leftover in remove_crashed(BENCH_PREFIX):
        print(f"removed leftover {leftover}", file=sys.stderr)
    return time.monotonic()


@contextlib.contextmanager
def testbed(args: argparse.Namespace, name: str) -> Iterator[Testbed]:
    started = prepare_run("experiments need root: cgroups, loop devices, mounts, drop_caches")
    model = SpindleSettings(args.rate_mbps, args.seek_ms)
    with emulated_disk(f"{BENCH_PREFIX}.{os.getpid()}.{name}", model, args.scheduler) as disk, bench_vnodes() as vnodes:
        with queue_settings(disk.loop_path, {s.key: s.value for s in args.queue}):
            yield Testbed(disk, vnodes, record(disk, args.queue), started)


def clear_files(directory: str) -> None:
    """Each run writes fresh files; the previous run's would only fill the disk."""
    for entry in os.listdir(directory):
        if entry.startswith("mpiio."):
            os.unlink(os.path.join(directory, entry))


def log(message: str) -> None:
    print(time.strftime("%H:%M:%S"), message, file=sys.stderr, flush=True)
