"""Weights under a bottleneck: two backlogged users at priorities 4 and 8 on a DataNode that delivers
less than its configured bandwidth, under static caps, the rate re-setting loop and per-packet
weights, in one run.

    sudo .venv/bin/python -m benchmarks.bottleneck_shares [--disk zram|paced] [--configured-mbps 1000]
        [--direction read|write] [--seconds 20] [--policies static,wc-rates,wc-weights] [--trace FILE]

One DataNode with the Java agent, configured with --configured-mbps, more than it can do:
- zram: a disk in RAM, so the DataNode's CPU (checksums, copies; clients on the same 2 cores) is
  what holds it, as encryption does under Kerberos privacy;
- paced: a disk that serves --disk-mbps (60 MB/s), below the configured bandwidth.
alice (8) and bob (4) each read (re-read; a paced disk's blocks kept out of the page cache) without
pause through Hadoop's client library (--direction write is refused: no writer here lasts the run;
benchmarks.secure_hdfs_split --allocation work-conserving measures writes under a CPU bottleneck).
After 8 s to settle, the split over --seconds from the Java agent's counters and the clients'
own (/proc/PID/io rchar); target: 1:2 within 10 %. The Java agent's R and the CPU and disk busy
fractions it saw are printed beside. --trace writes, every 0.1 s of each policy's run, R, both users'
MB/s, the time their threads waited and how much of it was past the packets' due times (seconds per
second), the CPU, the share of packets held for their weight, the flows' skew and the rule that set
R (the agent's STATS).
"""

import argparse
import os
import statistics
import sys
import time
from typing import TextIO

from benchmarks.agent_trace import tracing
from benchmarks.bulk_shares import Run, governed
from benchmarks.policy_names import policy_list
from testbed.cpu_priority import cpu_priority
from testbed.hdfs_cluster import HdfsCluster, datanode_throttle_jar
from testbed.names import unique_name
from testbed.processes import exit_once_on_signals
from testbed.share_watch import CacheDropper, ClientBytes, block_files
from testbed.unix_users import local_users

MB = 1_000_000
MiB = 1 << 20
POLICIES = ("static", "wc-rates", "wc-weights")


def measure(run: Run, seconds: float, trace: TextIO | None = None, policy: str = "") -> dict:
    """Per-second samples of both users' rates (agent and client side) and the agent's NODE line."""
    users = {role: user.name for role, user in run.users.items()}
    with tracing(next(iter(run.channels.values())), users, run.direction, trace, policy):
        return _measure(run, seconds)


def _measure(run: Run, seconds: float) -> dict:
    for role in ("alice", "bob"):
        if run.direction == "read":
            run.start(role)   # the reader's socket reads are its rchar
            continue
        user = run.users[role]
        client = run.hdfs.start_interactive([f"/{user.name}/w{i}.bin" for i in range(1000)], 0, as_uid=user.uid,
                                            hdfs_user=user.name, write_bytes=256 * MiB)
        run.clients[role], run.client_bytes[role] = client, ClientBytes(client.pid, "wchar")   # its socket writes
    run.wait_moving(["alice", "bob"])
    time.sleep(8)
    samples = []
    before, clients_before, t0 = run.counted(), {r: c() for r, c in run.client_bytes.items()}, time.monotonic()
    for _ in range(int(seconds)):
        time.sleep(1)
        now, clients_now, t1 = run.counted(), {r: c() for r, c in run.client_bytes.items()}, time.monotonic()
        node = next(iter(run.channels.values())).stats().node
        agent = {r: sum(now[k] - before[k] for k in now if k[1] == r) / (t1 - t0) for r in ("alice", "bob")}
        client = {r: (clients_now[r] - clients_before[r]) / (t1 - t0) for r in ("alice", "bob")}
        samples.append((agent, client, node))
        before, clients_before, t0 = now, clients_now, t1
    for role in list(run.clients):
        run.stop(role)
    return {"samples": samples}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--disk", choices=("zram", "paced"), default="zram")
    parser.add_argument("--disk-mbps", type=float, default=60.0, help="the paced disk's speed")
    parser.add_argument("--configured-mbps", type=float, default=1000.0)
    parser.add_argument("--direction", choices=("read", "write"), default="read")
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--file-mb", type=int, default=1024)
    parser.add_argument("--policies", type=lambda text: policy_list(text, POLICIES), default=list(POLICIES),
                        help=f"comma-separated, of {', '.join(POLICIES)}")
    parser.add_argument("--trace", type=argparse.FileType("w"), help="write the 0.1 s trace here")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("bottleneck_shares: needs root", file=sys.stderr)
        return 2
    if args.direction == "write":
        # Run starts FsShell -put of a local source per user, which this benchmark never made; and on
        # zram one put of --file-mb ends within a second or two. Writes under a CPU bottleneck are
        # measured by benchmarks.secure_hdfs_split --allocation work-conserving (Kerberos privacy).
        print("bottleneck_shares: --direction write is not measured here yet (no writer that lasts the run); "
              "use benchmarks.secure_hdfs_split --allocation work-conserving", file=sys.stderr)
        return 2
    exit_once_on_signals()   # a kill or Ctrl-C still removes the cpu cgroup, HDFS and the coordinator's work dirs
    started = time.monotonic()
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    bw = int(args.configured_mbps * MB)
    results = {}
    disk = args.disk if args.direction == "read" or args.disk == "zram" else "paced-rw"
    with local_users("vsn", (8, 4), first_uid=64_771) as (alice, bob), cpu_priority(unique_name("neck-cpu")), \
            HdfsCluster(unique_name("neck"), datanodes=1, disk_mb=max(4096, 3 * args.file_mb), disk=disk,
                        disk_read_mbps=args.disk_mbps,
                        hdfs_site={"dfs.block.access.token.enable": "true"},
                        datanode_throttle=datanode_throttle_jar()) as hdfs:
        users = {"alice": alice, "bob": bob}
        if args.direction == "read":
            for user in users.values():
                hdfs.write_file(f"/{user.name}/bulk.bin", args.file_mb * MiB, as_uid=user.uid, hdfs_user=user.name)
        # A paced disk's reads are kept its own (out of the page cache); zram is memory either way.
        dropped = block_files(hdfs) if args.direction == "read" and args.disk == "paced" else set()
        for policy in args.policies:
            with governed(hdfs, unique_name("neckc"), list(users.values()), policy, bw), CacheDropper(dropped):
                run = Run(hdfs, users, args.direction, bw, {})
                try:
                    results[policy] = measure(run, args.seconds, args.trace, policy)
                finally:
                    for role in list(run.clients):
                        run.stop(role)
            print(f"[{time.monotonic() - started:.0f} s] {policy} done", flush=True)
    where = f"{args.disk_mbps:.0f} MB/s paced disk" if args.disk == "paced" else "zram (CPU-bound)"
    print(f"\n{args.direction}s, one DataNode on {where}, configured {args.configured_mbps:.0f} MB/s; alice 8, bob 4, "
          f"both never pause; {args.seconds} s after 8 s to settle; target alice/bob = 2 within 10 %")
    print(f"{'policy':<11} | {'alice MB/s':>10} | {'bob MB/s':>8} | {'ratio (agent)':>13} | {'ratio (clients)':>15} | "
          f"{'ratio p10-p90 per s':>19} | {'R MB/s':>7} | {'cpu':>4} | {'disk':>4}")
    for policy, r in results.items():
        samples = r["samples"]
        a = statistics.mean(s[0]["alice"] for s in samples)
        b = statistics.mean(s[0]["bob"] for s in samples)
        ca = statistics.mean(s[1]["alice"] for s in samples)
        cb = statistics.mean(s[1]["bob"] for s in samples)
        per_second = sorted(s[0]["alice"] / s[0]["bob"] for s in samples if s[0]["bob"] > 0)
        spread = f"{per_second[len(per_second) // 10]:.2f}-{per_second[(9 * len(per_second)) // 10]:.2f}"
        rate = statistics.mean(s[2].get(f"{args.direction}_rate_bps", 0) for s in samples) / MB
        cpu = statistics.mean(s[2].get("cpu_busy", 0) for s in samples)
        busy = statistics.mean(s[2].get("disk_busy", 0) for s in samples)
        print(f"{policy:<11} | {a / MB:>10.1f} | {b / MB:>8.1f} | {a / b:>13.2f} | {ca / cb:>15.2f} | {spread:>19} | "
              f"{rate:>7.1f} | {cpu:>4.2f} | {busy:>4.2f}")
    print(f"\nran {time.monotonic() - started:.0f} s; load average at end: "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
