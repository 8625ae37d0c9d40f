"""Two backlogged readers by BFQ weight on blkio-v1: what each moves under BFQ's defaults and under
the data-disk settings recommended for interactive users (docs/edge.md), in one run.

    sudo .venv/bin/python -m benchmarks.bfq_split [--sets 'timeout_sync=10,...;...'] [--rounds 3]
        [--seconds 12] [--disk-mbps 60]

The emulated spindle disk (benchmarks/mpiio/slow_disk.py, --disk-mbps) with BFQ; two VNodes with BFQ
weights 800 and 400; in each a `dd` reads its own 1.2 GB file with buffered 1 MiB reads (read-ahead
as a DataNode's), from a cold page cache. Each set of tunables (BFQ's `iosched/` files, and
`max_sectors_kb`) is applied to a freshly selected BFQ before each round; BFQ's defaults are always
the first set, the baseline. Prints each round's MB/s and the split (target 2.0, within 10 %), and
each set's total against the defaults'.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

from benchmarks.mpiio.bench_vnodes import BENCH_PREFIX, BenchVNodes, VNodeSpec, bench_vnodes
from benchmarks.mpiio.slow_disk import MountedDisk, SpindleSettings, emulated_disk
from testbed.loopdev import select_fresh_scheduler
from testbed.share_watch import ClientBytes
from vnode_sync.kernel import disk_queue
from vnode_sync.kernel.disk_queue import QueueSetting

MB = 1_000_000
WEIGHTS = {"vnode.heavy": 800, "vnode.light": 400}
FILE_MIB = 1200
INTERACTIVE_SETS = ("timeout_sync=10,strict_guarantees=1,max_sectors_kb=512;"
                    "timeout_sync=20,max_budget=65536,strict_guarantees=1,max_sectors_kb=512")


def tunables(text: str) -> list[QueueSetting]:
    """'timeout_sync=20,max_sectors_kb=512': BFQ's own names, or the queue's max_sectors_kb."""
    return [QueueSetting.parse(item if item.startswith("max_sectors_kb") else f"iosched/{item}")
            for item in text.split(",") if item]


def one_round(disk: MountedDisk, vnodes: BenchVNodes, files: dict[str, str], settings: list[QueueSetting],
              seconds: float) -> dict[str, float]:
    """MB/s each VNode's reader moved over `seconds`, after 2 s to get going."""
    select_fresh_scheduler(disk.device_number, "bfq")   # also the kernel's request size: no set's is left
    disk_queue.apply(disk.loop_path, settings)
    vnodes.configure(disk.device_number, [VNodeSpec(name, weight=weight) for name, weight in WEIGHTS.items()])
    subprocess.run(["sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches"], check=True)
    readers = {}
    try:
        for name, path in files.items():
            # Held at `read` until placed, so its first byte is read in its VNode.
            readers[name] = subprocess.Popen(["sh", "-c", f'read go; exec dd if="{path}" of=/dev/null bs=1M'],
                                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                             stderr=subprocess.DEVNULL)
            vnodes.place_process(name, readers[name].pid)
        for reader in readers.values():
            reader.stdin.write(b"go\n")
            reader.stdin.flush()
        disk_bytes = {name: ClientBytes(reader.pid, "read_bytes") for name, reader in readers.items()}
        time.sleep(2)
        before = {name: count() for name, count in disk_bytes.items()}
        time.sleep(seconds)
        return {name: (count() - before[name]) / seconds / MB for name, count in disk_bytes.items()}
    finally:
        for reader in readers.values():
            reader.kill()
            reader.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default=INTERACTIVE_SETS,
                        help="';'-separated sets of 'tunable=value,...' to compare with BFQ's defaults")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--disk-mbps", type=float, default=60.0)
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("bfq_split: error: needs root (cgroups, loop devices, mounts, drop_caches)", file=sys.stderr)
        return 1
    sets = {"defaults": [], **{text: tunables(text) for text in args.sets.split(";") if text}}
    started = time.monotonic()
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    results: dict[str, list[dict[str, float]]] = {label: [] for label in sets}
    with emulated_disk(f"{BENCH_PREFIX}.{os.getpid()}.bfq-split", SpindleSettings(rate_mbps=args.disk_mbps)) as disk, \
            bench_vnodes() as vnodes:
        files: dict[str, str] = {}
        for name in WEIGHTS:
            files[name] = os.path.join(disk.mountpoint, name)
            subprocess.run(["dd", "if=/dev/zero", f"of={files[name]}", "bs=4M", f"count={FILE_MIB // 4}",
                            "oflag=direct"], check=True, capture_output=True)
        try:
            for round_no in range(args.rounds):
                for label, settings in sets.items():
                    rates = one_round(disk, vnodes, files, settings, args.seconds)
                    results[label].append(rates)
                    heavy, light = rates["vnode.heavy"], rates["vnode.light"]
                    print(f"  round {round_no} {label}: heavy (800) {heavy:.1f} MB/s, light (400) {light:.1f}, "
                          f"split {heavy / max(light, 0.01):.2f}, total {heavy + light:.1f}", flush=True)
        finally:
            select_fresh_scheduler(disk.device_number, "none")   # the loop device keeps what it had
    base_total = statistics.median(sum(r.values()) for r in results["defaults"])
    print(f"\ntwo backlogged buffered readers, BFQ weights 800 : 400, on a {args.disk_mbps:g} MB/s emulated spindle; "
          f"{args.rounds} rounds of {args.seconds:g} s; target split 2.0 within 10 %\n")
    print(f"{'BFQ tunables':72} | split (median, range)   | total MB/s, x defaults")
    for label, rounds in results.items():
        splits = [r["vnode.heavy"] / max(r["vnode.light"], 0.01) for r in rounds]
        total = statistics.median(sum(r.values()) for r in rounds)
        print(f"{label:72} | {statistics.median(splits):.2f} ({min(splits):.2f}-{max(splits):.2f})        | "
              f"{total:.1f}, {total / base_total:.2f}x")
    print(f"\nran {time.monotonic() - started:.0f} s; load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
