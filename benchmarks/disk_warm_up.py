"""Warm a fresh testbed cluster's DataNode disks before a benchmark measures on them.

Without it the first pass with a fast bulk writer was slow throughout, whichever policy ran it
(presumably ext4's block groups allocated for the first time; not traced), and a DataNode disk in
service is not freshly made. So: one file over most of every DataNode's free space, written at full
speed with a replica on each, then deleted, and the space waited back before anything is measured.
"""

import argparse
import os
import subprocess
import time

from testbed.hdfs_cluster import HdfsCluster

MB = 1_000_000
MiB = 1 << 20
WARM_UP_FRACTION = 0.8
WARM_UP_PATH = "/warm-up.bin"
HEADER_NOTE = "DataNode disks warmed up (most of their free space written and deleted before the first pass)"


def add_warm_up_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--warm-up", action="store_true",
                        help="before the first pass, write a file over most of every DataNode's free space and "
                             "delete it, so no pass is the first to allocate across the fresh file system")


def free_bytes(mountpoint: str) -> int:
    stat = os.statvfs(mountpoint)
    return stat.f_bavail * stat.f_frsize


def warm_up_disks(hdfs: HdfsCluster, as_uid: int, hdfs_user: str, fraction: float = WARM_UP_FRACTION,
                  timeout: float = 120) -> float:
    """Write one file of FRACTION of the fullest DataNode's free space, one replica on every DataNode,
    flush it to the disks, delete it and wait until every DataNode has its space back; returns the MB/s
    the client wrote it at."""
    if not 0 < fraction < 1:
        raise ValueError(f"fraction={fraction}: allowed between 0 and 1")
    mountpoints = [dn.mountpoint for dn in hdfs.datanodes]
    before = {m: free_bytes(m) for m in mountpoints}
    size = int(min(before.values()) * fraction) // MiB * MiB
    written = hdfs.write_file(WARM_UP_PATH, size, as_uid=as_uid, hdfs_user=hdfs_user,
                              replication=len(mountpoints))
    for mountpoint in mountpoints:   # ext4 allocates delayed blocks at writeback: have it happen before the delete
        subprocess.run(["sync", "--file-system", mountpoint], check=True)
    hdfs.shell("-rm", "-skipTrash", WARM_UP_PATH)   # as the superuser: any writer's file
    deadline = time.monotonic() + timeout
    # The NameNode has each DataNode delete its replica at a heartbeat, so the space comes back late.
    while any(free_bytes(m) < 0.98 * before[m] for m in mountpoints):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the warm-up file's blocks were not deleted within {timeout:.0f} s")
        time.sleep(0.5)
    return written.bytes_per_second / MB
