"""Where an interactive user's time goes beside a backlogged one: R and each user's MB/s every 0.1 s.

benchmarks.interactive_shares gives the transfer times; this shows their inside. bob reads one
large file without pause (writes, with --direction write); alice reads (writes) N files of one
size with idle gaps between them; a sampler reads the DataNode's Java agent (STATS) every 0.1 s.
Per policy it prints the trace and, over alice's transfers, what she and bob moved in each
transfer's first 0.2 s and after, so a slow start (her first packets queued in the disk behind
bob's) is told from a wrong steady split. Writes also show the disk's dirty page cache (the
kernel's per-device counters in debugfs, mounted for the run if it is not), which the kernel
paces every writer by alike once it passes the device's limit, and each write's steps as the
NameNode and DataNode logged them (benchmarks.write_timeline: the DataNode's receiving apart from
the close at the NameNode). static is the baseline, run first on the same cluster.

    .venv/bin/python -m benchmarks.interactive_trace --size 4 --transfers 5
    .venv/bin/python -m benchmarks.interactive_trace --readahead 1048576   # dfs.datanode.readahead.bytes
    .venv/bin/python -m benchmarks.interactive_trace --direction write --size 4 --kernel-waits
    .venv/bin/python -m benchmarks.interactive_trace --direction write --size 4 --ext4-options nodelalloc --warm-up
    .venv/bin/python -m benchmarks.interactive_trace --direction write --size 1 --transfers 16 --keep-logs /tmp/logs
    .venv/bin/python -m benchmarks.interactive_trace --size 1 --transfers 16 --block-trace   # her requests on the disk

Needs root (loop devices, FUSE, cgroups) and the Java agent's jar (scripts/setup.d).
"""

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from benchmarks.block_trace import BlockTrace, SectorOwners, TransferSpan, transfer_spans
from benchmarks.dirty_pages import debugfs, dirty_mb
from benchmarks.disk_warm_up import HEADER_NOTE as WARM_UP_NOTE, add_warm_up_option, warm_up_disks
from benchmarks.interactive_shares import (ALICE, BOB, BOB_FILE_MB, MB, MiB, WRITE_SITE, add_client_cpu_option,
                                          add_ext4_options_option, alice_transfer_records, bob_busy, client_placement, governed, key_values)
from benchmarks.kernel_waits import SAMPLE_SECONDS as KERNEL_SAMPLE_SECONDS, KernelWaits
from benchmarks.policy_names import policy_list
from benchmarks.write_timeline import describe, file_writes, log_lines
from testbed.cpu_priority import cpu_priority
from testbed.loopdev import ext4_mount_options, queue_settings
from testbed.hdfs_cluster import HdfsCluster, datanode_throttle_jar
from testbed.names import unique_name
from testbed.processes import exit_once_on_signals
from testbed.share_watch import block_files
from vnode_sync.datanode.channel import ThrottleChannel

POLICIES = ("static", "wc-weights")
SAMPLE_SECONDS = 0.1
START_SAMPLES = 2   # a transfer's first 0.2 s
MOVING_MBPS = 0.5   # alice moved more than this in a sample: it belongs to one of her transfers


@dataclass(frozen=True)
class Sample:
    seconds: float      # since the sampler started
    rate_mbps: float    # the read scheduler's R (0: weights off)
    alice_mbps: float
    bob_mbps: float
    disk_busy: float
    dirty_mb: float | None = None   # the device's dirty and writeback page cache (writes only)
    alice_wait_ms: float = 0.0      # what her packets waited in the DataNode's scheduler in this sample


def sample_until(channel: ThrottleChannel, stop: threading.Event, into: list[Sample], direction: str,
                 device_number: str | None) -> None:
    began, last = time.monotonic(), None
    while not stop.is_set():
        stats, now = channel.stats(), time.monotonic()
        users = stats.users
        moved = (now, *(getattr(users[name], f"{direction}_bytes") if name in users else 0
                        for name in (ALICE.name, BOB.name)),
                 getattr(users[ALICE.name], f"{direction}_wait_ns") if ALICE.name in users else 0)
        if last is not None:
            seconds = moved[0] - last[0]
            into.append(Sample(now - began, stats.node.get(f"{direction}_rate_bps", 0) / MB,
                               (moved[1] - last[1]) / seconds / MB, (moved[2] - last[2]) / seconds / MB,
                               stats.node.get("disk_busy", 0), dirty_mb(device_number) if device_number else None,
                               (moved[3] - last[3]) / 1e6))
        last = moved
        time.sleep(SAMPLE_SECONDS)


def transfers_in(samples: list[Sample]) -> list[list[Sample]]:
    """Runs of samples in which alice moved something: one per transfer."""
    runs, run = [], []
    for sample in samples:
        if sample.alice_mbps > MOVING_MBPS:
            run.append(sample)
        elif run:
            runs.append(run)
            run = []
    return runs + ([run] if run else [])


def mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def run_policy(hdfs: HdfsCluster, name: str, policy: str, files: list[str], args, bob_blocks: set[str],
               placement: dict[str, Callable[[int], None]]) -> None:
    channel = ThrottleChannel(hdfs.throttle_socket(hdfs.datanodes[0]))
    bob_alone: list[float] = []
    samples: list[Sample] = []
    device = str(hdfs.datanodes[0].device_number) if args.direction == "write" else None
    blocks = BlockTrace(unique_name("itrace-blocks"), hdfs.datanodes[0].device_number) if args.block_trace else None
    with governed(hdfs, name, policy, "datanode-throttle", int(args.configured_mbps * MB), {}), \
            bob_busy(hdfs, args.direction, bob_blocks, bob_alone, placement[BOB.name]), \
            blocks or contextlib.nullcontext():
        stop = threading.Event()
        sampler = threading.Thread(target=sample_until, args=(channel, stop, samples, args.direction, device),
                                   daemon=True)
        sampler.start()
        try:
            with KernelWaits(hdfs.datanodes[0].pid) if args.kernel_waits else contextlib.nullcontext() as waits:
                transfers = alice_transfer_records(hdfs, files, args.size, args.gap, args.direction,
                                                   placement[ALICE.name])
        finally:
            stop.set()
            sampler.join()
    runs = transfers_in(samples)
    start = [s for run in runs for s in run[:START_SAMPLES]]
    rest = [s for run in runs for s in run[START_SAMPLES:]]
    print(f"\n{policy}: alice's {args.size} MiB transfers (ms): {' '.join(f'{t.seconds * 1000:.0f}' for t in transfers)}; "
          f"bob alone before them {bob_alone[0] / MB:.1f} MB/s")
    if any(t.phases for t in transfers):
        print("  each write's create / hand-over / close (ms): " + ", ".join(
            "/".join(f"{t.phases[k] * 1000:.0f}" for k in ("create", "write", "close")) for t in transfers if t.phases))
    if args.direction == "write":
        writes = file_writes(log_lines(hdfs.namenode.log), log_lines(hdfs.datanodes[0].log), f"/alice/{policy}-")
        print("  each write in the daemons' logs (ms: allocated -> at the DataNode / receiving / -> closed; "
              "rN: completeFile turned down N times): " + describe(writes))
    if blocks is not None:
        owners = SectorOwners({"alice": sorted(block_files(hdfs) - bob_blocks), "bob": sorted(bob_blocks)})
        print("  " + describe_spans(transfer_spans(blocks.requests(), owners.owner, "alice", other="bob")[1:]))
    if waits is not None:
        print("  the DataNode's transfer threads (DataXceiver) over alice's transfers, bob's writer among them:\n    "
              + waits.summary().replace("\n", "\n    "))
        print("  the ten short-lived threads seen longest (alice's slowest transfers), in samples every "
              f"{KERNEL_SAMPLE_SECONDS * 1000:.0f} ms:\n    " + waits.longest_short_lived(10).replace("\n", "\n    "))
    print(f"  each transfer's first {START_SAMPLES * SAMPLE_SECONDS:.1f} s: alice {mean([s.alice_mbps for s in start]):.1f} "
          f"MB/s, bob {mean([s.bob_mbps for s in start]):.1f}; after: alice {mean([s.alice_mbps for s in rest]):.1f}, "
          f"bob {mean([s.bob_mbps for s in rest]):.1f} ({len(runs)} transfers seen)")
    print("  her packets' waits in the DataNode's scheduler, transfer by transfer as the samples saw them "
          "(ms; the first is her client's cold start): " + " ".join(f"{sum(s.alice_wait_ms for s in run):.0f}"
                                                                    for run in runs))
    print(f"  trace (s, R, alice, bob MB/s, disk busy{', dirty MB' if device else ''}, her scheduler waits), "
          f"alice's transfers and 0.2 s either side:")
    near = {i for i, s in enumerate(samples) if s.alice_mbps > MOVING_MBPS}
    shown = sorted({j for i in near for j in range(i - 2, i + 3) if 0 <= j < len(samples)})
    for i in shown:
        s = samples[i]
        print(f"    {s.seconds:5.1f}  R {s.rate_mbps:5.1f}  alice {s.alice_mbps:5.1f}  bob {s.bob_mbps:5.1f}  "
              f"disk {s.disk_busy:.2f}" + (f"  dirty {s.dirty_mb:5.1f}" if s.dirty_mb is not None else "")
              + f"  alice waited {s.alice_wait_ms:.1f} ms")


def describe_spans(spans: list[TransferSpan]) -> str:
    """alice's transfers as the disk served them (her client's first, its cold start, left out)."""
    if not spans:
        return "on the disk: none of alice's requests seen"
    met = [s for s in spans if s.others_in_flight]
    span_p50, span_max = statistics.median(s.span_ms for s in spans), max(s.span_ms for s in spans)
    return (f"on the disk (block trace, {len(spans)} transfers): span p50 {span_p50:.1f} ms, max {span_max:.1f}; "
            f"her first request's wait p50 {statistics.median(s.waits_ms[0] for s in spans):.1f} ms; bob's "
            f"requests ahead of her first in {len(met)} "
            f"({', '.join(f'{s.others_in_flight // 1024} KiB' for s in met) or '-'}); bob's KiB "
            f"served within her spans: {sum(s.others_during for s in spans) // 1024}\n    spans (ms): "
            + " ".join(f"{s.span_ms:.0f}" for s in spans))


def keep_logs(hdfs: HdfsCluster, directory: str) -> None:
    os.makedirs(directory, exist_ok=True)
    for log in (hdfs.namenode.log, *(dn.log for dn in hdfs.datanodes)):
        shutil.copy(log, os.path.join(directory, f"{os.path.basename(os.path.dirname(log))}-{os.path.basename(log)}"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--direction", choices=("read", "write"), default="read")
    parser.add_argument("--size", type=int, default=16, help="alice's file size, MiB")
    parser.add_argument("--transfers", type=int, default=5)
    parser.add_argument("--gap", type=float, default=1.5, help="alice's idle seconds between transfers")
    parser.add_argument("--disk-mbps", type=float, default=60.0)
    parser.add_argument("--kernel-waits", action="store_true",
                        help="sample where the DataNode's transfer threads sleep in the kernel (costs CPU)")
    parser.add_argument("--configured-mbps", type=float, default=None,
                        help="the bandwidth the coordinator is given for the DataNode (default: --disk-mbps)")
    parser.add_argument("--readahead", type=int, default=None,
                        help="dfs.datanode.readahead.bytes (default: Hadoop's, 4 MiB)")
    parser.add_argument("--keep-logs", metavar="DIR", default=None,
                        help="copy the NameNode's and DataNode's logs here before the cluster is removed")
    parser.add_argument("--block-trace", action="store_true",
                        help="record the data disk's requests (tracefs) and print where alice's met bob's")
    parser.add_argument("--queue", type=key_values, default={},
                        help="the DataNode disk's block queue settings, e.g. read_ahead_kb=512 (put back at the end)")
    parser.add_argument("--policies", type=lambda text: policy_list(text, POLICIES), default=list(POLICIES),
                        help=f"comma-separated, of {', '.join(POLICIES)} (default: both, in that order)")
    add_client_cpu_option(parser)
    add_ext4_options_option(parser)
    add_warm_up_option(parser)
    args = parser.parse_args(argv)
    args.configured_mbps = args.configured_mbps or args.disk_mbps
    if os.geteuid() != 0:
        print("interactive_trace: needs root (loop devices, FUSE, cgroups)", file=sys.stderr)
        return 2
    if args.size < 1 or args.transfers < 1 or args.gap < 0:
        print("interactive_trace: --size and --transfers must be >= 1, --gap >= 0", file=sys.stderr)
        return 2
    exit_once_on_signals()   # a kill or Ctrl-C, even twice, still unwinds every `with` and `finally` below
    name = unique_name("itrace")
    site = {"dfs.block.access.token.enable": "true"}
    if args.readahead is not None:
        site["dfs.datanode.readahead.bytes"] = args.readahead
    if args.direction == "write":   # as interactive_shares': the client's 400 ms first retry is not the edge's
        site.update(WRITE_SITE)
    writes = args.direction == "write"
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}; readahead "
          f"{args.readahead if args.readahead is not None else 'Hadoop default (4 MiB)'}; disk queue "
          f"{', '.join(f'{k}={v}' for k, v in args.queue.items()) or 'as the loop device has it'}; ext4 "
          f"{ext4_mount_options(args.ext4_options)}" + (f"; {WARM_UP_NOTE}" if args.warm_up else ""), flush=True)
    alice_mb = len(args.policies) * (args.transfers + 1) * args.size
    with cpu_priority(unique_name("itrace-cpu")) as cpu_group, \
            client_placement(cpu_group, args.client_cpu) as placement, \
            debugfs() if writes else contextlib.nullcontext(), \
            HdfsCluster(name, datanodes=1, disk_mb=max(4096, 2 * (alice_mb + BOB_FILE_MB)),
                        disk="paced-rw" if writes else "paced", disk_read_mbps=args.disk_mbps, hdfs_site=site,
                        datanode_throttle=datanode_throttle_jar(), ext4_options=args.ext4_options) as hdfs:
        files = {policy: [f"/alice/{policy}-{i}.bin" for i in range(args.transfers + 1)] for policy in args.policies}
        for path in (p for paths in files.values() for p in paths if not writes):
            hdfs.write_file(path, args.size * MiB, as_uid=ALICE.uid, hdfs_user=ALICE.name)
        before = block_files(hdfs)
        hdfs.write_file("/bob/big.bin", BOB_FILE_MB * MiB, as_uid=BOB.uid, hdfs_user=BOB.name)
        bob_blocks = block_files(hdfs) - before
        if args.warm_up:
            print(f"warm-up file written at {warm_up_disks(hdfs, BOB.uid, BOB.name):.1f} MB/s and deleted", flush=True)
        hdfs.evict_page_cache()
        with queue_settings(hdfs.datanodes[0].loop_device, args.queue):
            for policy in args.policies:
                run_policy(hdfs, name, policy, files[policy], args, bob_blocks, placement)
        if args.keep_logs:
            keep_logs(hdfs, args.keep_logs)
    print(f"\nalice (8) beside bob (4) on a {args.disk_mbps:.0f} MB/s paced disk, {args.configured_mbps:.0f} MB/s "
          f"configured; her static share {args.configured_mbps * 8 / 12:.0f} MB/s, her weighted share 2/3 of R")
    return 0


if __name__ == "__main__":
    sys.exit(main())
