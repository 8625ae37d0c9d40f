"""Aggregate HDFS read bandwidth with vnode-sync managing VNodes at generous limits, against
no vnode-sync at all, alternating in the same run (target: within 3%).

    sudo .venv/bin/python benchmarks/hdfs_overhead.py [--rounds 6] [--file-mb 512]

A real HDFS (2 DataNodes on loop disks) holds one file per user per DataNode. Each trial
drops the DataNodes' page cache and reads all of them at once through the native client,
two users, four readers. "managed": coordinator + one storage agent per DataNode, every
DataXceiver captured into its user's VNode, limits of 10 GB/s that never bind.
"none": no vnode-sync process running and no VNodes. The figure is all bytes read over
the wall time from starting the readers to the last one finishing (reader JVM start
included, the same in both cases); rounds alternate which case goes first; the ratio is
of the medians, managed/none.
"""

import argparse
import statistics
import sys
import time

from vnode_sync.testbed.hdfs_cluster import HdfsCluster, Transfer
from vnode_sync.testbed.local_cluster import LocalCluster, LocalNode, LocalUser

GENEROUS_BPS = 10_000_000_000
MiB = 1 << 20
USERS = (LocalUser("bench-a", 64_601, 4), LocalUser("bench-b", 64_602, 8))


def read_all(hdfs: HdfsCluster) -> float:
    hdfs.evict_page_cache()
    started = time.monotonic()
    readers = [hdfs.start_read(f"/{u.name}/on-{dn.id}.bin", as_uid=u.uid, hdfs_user=u.name)
               for u in USERS for dn in hdfs.datanodes]
    total = sum(Transfer.parse(r.communicate()[0]).bytes for r in readers)
    return total / (time.monotonic() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--file-mb", type=int, default=512)
    args = parser.parse_args()
    name = f"vnode-sync-bench.overhead.{int(time.time())}"
    results: dict[str, list[float]] = {"none": [], "managed": []}
    with HdfsCluster(name, datanodes=2, disk_mb=2 * args.file_mb + 512) as hdfs:
        for user in USERS:
            for dn in hdfs.datanodes:
                hdfs.write_file(f"/{user.name}/on-{dn.id}.bin", args.file_mb * MiB, as_uid=user.uid,
                                hdfs_user=user.name, on_datanode=dn)
        nodes = [LocalNode(dn.id, (dn.loop_device,), GENEROUS_BPS, GENEROUS_BPS, {"kind": "hdfs", "pid": dn.pid})
                 for dn in hdfs.datanodes]
        for round_ in range(args.rounds):
            for case in (("none", "managed") if round_ % 2 == 0 else ("managed", "none")):
                if case == "none":
                    results["none"].append(read_all(hdfs))
                else:
                    with LocalCluster(f"{name}.{round_}", list(USERS), nodes):
                        results["managed"].append(read_all(hdfs))
            print(f"round {round_ + 1}: none {results['none'][-1] / 1e6:.1f} MB/s, "
                  f"managed {results['managed'][-1] / 1e6:.1f} MB/s", flush=True)
    none, managed = statistics.median(results["none"]), statistics.median(results["managed"])
    print(f"\naggregate HDFS read (all bytes / wall time), median of {args.rounds} "
          f"(4 readers, 2 DataNodes, {args.file_mb} MiB files):")
    print(f"  no vnode-sync        {none / 1e6:8.1f} MB/s")
    print(f"  managed, generous    {managed / 1e6:8.1f} MB/s")
    print(f"  ratio managed/none   {managed / none:8.3f}   (overhead {100 * (1 - managed / none):+.1f}%, target within 3%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
