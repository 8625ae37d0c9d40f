"""How much the kernel paces one steady writer on the write benchmarks' disk, by its rate, with
and without early background writeback.

The HDFS write benchmarks' DataNodes write to a paced disk that may hold at most DIRTY_MB of the page
cache dirty (DiskModel.streaming: a strict per-device limit). Near that limit the kernel's
balance_dirty_pages pauses every task that dirties pages for the device, at one rate for all of
them: a DataNode's transfer threads are then paced by the kernel, not by its scheduler's weights.
Under the strict limit alone the device's background writeback starts only there, so even a slow
writer is paused; the testbed starts it early (testbed/early_writeback.py), as a real disk's
starts far below its pacing point. This writes one file at each of several steady rates (one
thread, 1 MiB write() calls, sleeping to its pace) on the disk both ways, one after the other,
and prints the share of samples (every 2 ms) its thread slept in balance_dirty_pages, the rate it
kept, and the device's dirty and writeback page cache at its peak (debugfs, mounted for the run if
it is not).

    sudo .venv/bin/python -m benchmarks.dirty_pacing [--disk-mbps 60] [--rates 20,30,40,50,58,80]
"""

import argparse
import dataclasses
import os
import shutil
import sys
import tempfile
import threading
import time

from benchmarks.dirty_pages import debugfs, dirty_mb
from testbed.names import unique_name
from testbed.paced_disk import DiskModel, PacedDisk
from testbed.processes import exit_once_on_signals

MB = 1_000_000
SAMPLE_SECONDS = 0.002
SECONDS = 8.0


def paced_writer(path: str, rate_bps: float, stop: threading.Event, out: dict) -> None:
    out["tid"] = threading.get_native_id()
    chunk = os.urandom(1 << 20)
    with open(path, "wb") as f:
        began, written = time.monotonic(), 0
        while not stop.is_set():
            f.write(chunk)
            written += len(chunk)
            out["written"] = written
            ahead = began + written / rate_bps - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)


@dataclasses.dataclass(frozen=True)
class Pacing:
    rate_mbps: float     # asked
    kept_mbps: float
    paused: float        # share of samples the writer was in balance_dirty_pages
    peak_dirty_mb: float

    def row(self) -> str:
        return f"{self.rate_mbps:6.0f} | {self.kept_mbps:6.1f} | {100 * self.paused:21.0f} % | {self.peak_dirty_mb:8.1f}"


def one_rate(mountpoint: str, device_number: str, rate_mbps: float, seconds: float = SECONDS) -> Pacing:
    """One writer at RATE_MBPS for SECONDS: how often the kernel paused it."""
    path = os.path.join(mountpoint, f"rate-{rate_mbps:g}")
    stop, out = threading.Event(), {}
    writer = threading.Thread(target=paced_writer, args=(path, rate_mbps * MB, stop, out), daemon=True)
    writer.start()
    try:
        while "tid" not in out:
            time.sleep(0.01)
        paused = samples = 0
        peak = 0.0
        began = time.monotonic()
        written_before = out.get("written", 0)
        while time.monotonic() - began < seconds:
            with open(f"/proc/self/task/{out['tid']}/wchan") as f:
                paused += f.read().strip() == "balance_dirty_pages"
            samples += 1
            peak = max(peak, dirty_mb(device_number) or 0.0)
            time.sleep(SAMPLE_SECONDS)
        kept = (out.get("written", 0) - written_before) / (time.monotonic() - began) / MB
    finally:
        stop.set()
        writer.join()
        os.remove(path)
        os.sync()
    return Pacing(rate_mbps, kept, paused / max(samples, 1), peak)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--disk-mbps", type=float, default=60.0)
    parser.add_argument("--rates", default="20,30,40,50,58,80", help="MB/s, comma-separated")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("dirty_pacing: needs root (loop devices, FUSE, debugfs)", file=sys.stderr)
        return 2
    rates = [float(r) for r in args.rates.split(",")]
    if any(r <= 0 for r in rates):
        print("dirty_pacing: --rates must be above 0", file=sys.stderr)
        return 2
    exit_once_on_signals()
    workdir = tempfile.mkdtemp(prefix=unique_name("dirty") + ".")
    mountpoint = os.path.join(workdir, "mnt")
    os.makedirs(mountpoint)
    try:
        with debugfs():
            for model in (DiskModel.streaming(args.disk_mbps),
                          dataclasses.replace(DiskModel.streaming(args.disk_mbps), early_writeback=False)):
                disk = PacedDisk.create(workdir, mountpoint, 4096, model)
                try:
                    print(f"one writer, 1 MiB writes at a steady rate, on a {disk.model.describe()}; {SECONDS:.0f} s each")
                    print(f"{'MB/s':>6} | {'kept':>6} | {'in balance_dirty_pages':>23} | {'dirty MB':>8}")
                    for rate in rates:
                        print(one_rate(mountpoint, str(disk.device_number), rate).row(), flush=True)
                finally:
                    disk.remove()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
