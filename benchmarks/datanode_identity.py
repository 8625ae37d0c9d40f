"""Bytes a DataNode serves before it knows the connection's user, with vnode-sync's Java agent.

    sudo .venv/bin/python -m benchmarks.datanode_identity [--reads 200] [--size-kib 256]

A real 1-DataNode HDFS whose DataNode loads the Java agent, block access tokens on; users
alice and bob have ceilings, the default VNode a low one. Each read is a new WebHDFS request
(the `hdfs` package's client, alternating alice and bob), so the DataNode starts a new read op
per request. The Java agent decides the op's user at its start, from the block token, before
the first byte: the bytes charged to the default VNode or to the other user are 0 by
construction, and this counts them from the agent's own counters. The cgroup capture path's
figure for the same question (bytes read before a new handler thread is placed) is printed
by benchmarks.capture_latency ("unattributed", "escaped", "in default").
"""

import argparse
import os
import time

from hdfs import InsecureClient

from testbed.hdfs_cluster import HdfsCluster, datanode_throttle_jar
from testbed.names import unique_name
from vnode_sync.datanode.channel import Shares, ThrottleChannel, ThrottleSettings

MB = 1_000_000
USERS = ("alice", "bob")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=200, help="short reads, each a new WebHDFS request")
    parser.add_argument("--size-kib", type=int, default=256, help="bytes per read, KiB")
    args = parser.parse_args()
    size = args.size_kib * 1024
    with HdfsCluster(unique_name("dnident"), datanodes=1, disk_mb=256,
                     hdfs_site={"dfs.block.access.token.enable": "true"},
                     datanode_throttle=datanode_throttle_jar()) as hdfs:
        channel = ThrottleChannel(hdfs.throttle_socket(hdfs.datanodes[0]))
        channel.apply(ThrottleSettings(1, Shares.ceilings(1 * MB, 1 * MB),
                                       {u: Shares.ceilings(200 * MB, 200 * MB) for u in USERS}))
        url = f"http://{hdfs.namenode.http_address}"
        clients = {u: InsecureClient(url, user=u) for u in USERS}
        for u in USERS:
            clients[u].write(f"/{u}.bin", data=os.urandom(size), overwrite=True)
        before, t0 = channel.stats(), time.monotonic()
        for i in range(args.reads):
            user = USERS[i % 2]
            with clients[user].read(f"/{user}.bin") as reader:
                assert len(reader.read()) == size
        after, elapsed = channel.stats(), time.monotonic() - t0
    served = {u: after.users[u].read_bytes - before.users[u].read_bytes for u in USERS}
    ops = {u: after.users[u].read_ops - before.users[u].read_ops for u in USERS}
    in_default = after.default.read_bytes - before.default.read_bytes
    print(f"{args.reads} WebHDFS reads of {args.size_kib} KiB in {elapsed:.1f} s, block tokens on")
    for u in USERS:
        print(f"  {u}: {ops[u]} read ops, {served[u]} bytes charged (asked {args.reads // 2 * size})")
    print(f"  bytes served before the user was known (charged to the default VNode): {in_default}")
    return 0 if in_default == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
