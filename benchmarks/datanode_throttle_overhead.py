"""Aggregate HDFS write and read throughput with vnode-sync's DataNode Java agent at limits that
never bind, against DataNodes without it, alternating in the same run (target: within 2 %).

    sudo .venv/bin/python -m benchmarks.datanode_throttle_overhead [--rounds 10] [--file-mb 128]

Two real HDFS clusters are up side by side, the same but for `-javaagent:` on their DataNodes:
"agent" (every transfer goes through a per-user throttler set to --node-gbps, with a UID line
per user so every op is charged) and "none". A trial on one cluster: both users write a file
at once through the native client, then the page cache is dropped and both read it back at
once; the figures are all bytes over the wall time of each phase. The cases take turns at
each position in a round (hdfs_overhead's round order); the figure is the median of the
rounds' agent/none ratios with a bootstrap 95 % confidence interval (hdfs_overhead's).
"""

import argparse
import concurrent.futures
import statistics
import time

from benchmarks.hdfs_overhead import USERS, bootstrap_median_interval, round_order, target_verdict
from testbed.hdfs_cluster import PACED_READ_MBPS, HdfsCluster, Transfer, datanode_throttle_jar
from testbed.names import unique_name
from vnode_sync.datanode.channel import Rates, ThrottleChannel, ThrottleSettings

MiB = 1 << 20
CASES = ("agent", "none")


def write_all(hdfs: HdfsCluster, size: int, round_: int) -> float:
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(len(USERS)) as pool:
        done = list(pool.map(lambda u: hdfs.write_file(f"/{u.name}/r{round_}.bin", size, as_uid=u.uid,
                                                       hdfs_user=u.name), USERS))
    return sum(t.bytes for t in done) / (time.monotonic() - started)


def read_all(hdfs: HdfsCluster, round_: int) -> float:
    hdfs.evict_page_cache()
    started = time.monotonic()
    readers = [hdfs.start_read(f"/{u.name}/r{round_}.bin", as_uid=u.uid, hdfs_user=u.name) for u in USERS]
    total = sum(Transfer.parse(r.communicate()[0]).bytes for r in readers)
    return total / (time.monotonic() - started)


def summary(name: str, ratios: list[float]) -> str:
    low, high = bootstrap_median_interval(ratios)
    median = statistics.median(ratios)
    return (f"{name}: agent/none median {median:.3f}, 95 % CI [{low:.3f}, {high:.3f}] over {len(ratios)} rounds; "
            f"{target_verdict(median, low, len(ratios))}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--file-mb", type=int, default=128, help="MiB each user writes and reads per trial")
    parser.add_argument("--datanodes", type=int, default=1, help="per cluster")
    parser.add_argument("--disk", choices=("paced", "zram", "loop"), default="loop")
    parser.add_argument("--node-gbps", type=float, default=10, help="every user's (non-binding) rate, GB/s")
    args = parser.parse_args()
    size, rate = args.file_mb * MiB, int(args.node_gbps * 1e9)
    clusters = {case: HdfsCluster(unique_name(f"dntover-{case}"), datanodes=args.datanodes, disk=args.disk,
                                  disk_mb=max(1024, 4 * args.file_mb * len(USERS)), disk_read_mbps=PACED_READ_MBPS,
                                  datanode_throttle=datanode_throttle_jar() if case == "agent" else None)
                for case in CASES}
    ratios: dict[str, list[float]] = {"write": [], "read": []}
    try:
        for hdfs in clusters.values():
            hdfs.start()
        for dn in clusters["agent"].datanodes:
            ThrottleChannel(clusters["agent"].throttle_socket(dn)).apply(ThrottleSettings(
                1, Rates(rate, rate), {u.name: Rates(rate, rate) for u in USERS}, {u.uid: u.name for u in USERS}))
        for case in CASES:  # warm-up, unmeasured
            write_all(clusters[case], size, -1)
        for round_ in range(args.rounds):
            got = {}
            for case in round_order(round_, CASES):
                got[case] = (write_all(clusters[case], size, round_), read_all(clusters[case], round_))
                clusters[case].shell("-rm", "-skipTrash", *(f"/{u.name}/r{round_}.bin" for u in USERS))
            for i, direction in enumerate(("write", "read")):
                ratios[direction].append(got["agent"][i] / got["none"][i])
            print(f"round {round_}: write agent {got['agent'][0] / 1e6:.1f} none {got['none'][0] / 1e6:.1f} MB/s, "
                  f"read agent {got['agent'][1] / 1e6:.1f} none {got['none'][1] / 1e6:.1f} MB/s", flush=True)
        if args.rounds:
            for direction, values in ratios.items():
                print(summary(direction, values))
    finally:
        for hdfs in clusters.values():
            hdfs.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
