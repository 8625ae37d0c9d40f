"""Short-circuit local reads under vnode-sync: a reader alone keeps short-circuit speed (printed beside
its speed with short-circuit reads off), two at once are held to their shares through the DataNode.

    sudo .venv/bin/python -m benchmarks.short_circuit_reads [--rounds 3] [--node-mbps 40] [--seconds 8]

The testbed's HDFS with short-circuit reads on (a domain socket, libhadoop.so; 1 DataNode), the
DataNode-side throttler, work-conserving shares (weights, no ceilings), two local users at priorities
4 and 8, each with a 64 MiB file. `hdfs dfs -cat` reads, timed from the client's first byte to its last
(JVM start excluded):
1. bob alone, his file 4 times: with short-circuit reads on (the Java agent grants the descriptors) and
   with them off (`-Ddfs.client.read.shortcircuit=false`, every byte through the DataNode), alternating
   for --rounds rounds in an order that moves with the round (scenario_runner); the medians and their
   ratio, how many bytes the DataNode's throttler saw, and the machine's steal over those reads.
2. alice and bob at once with short-circuit on, --seconds: each one's rate from the client and from the
   throttler, against its share of their total (1/3, 2/3).
"""

import argparse
import contextlib
import statistics
import sys
import uuid

from testbed.hdfs_cluster.metered import MeteredCat, counted, window
from testbed.hdfs_vnode_cluster import hdfs_vnode_cluster
from testbed.local_cluster import LocalUser
from testbed.names import unique_name
from testbed.unix_users import unix_users
from benchmarks.scenario_runner import run_cells, steal_line
from benchmarks.secure_hdfs_split import free_uid
from vnode_sync.datanode.channel import ThrottleChannel

MB = 1_000_000
MiB = 1 << 20
FILE = 64 * MiB
SCR_OFF = ("-Ddfs.client.read.shortcircuit=false",)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--node-mbps", type=float, default=40, help="the DataNode's configured capacity, MB/s")
    parser.add_argument("--seconds", type=float, default=8)
    args = parser.parse_args(argv)
    tag = uuid.uuid4().hex[:4]
    uids = [free_uid(64_660)]
    uids.append(free_uid(uids[0] + 1))
    alice, bob = LocalUser(f"alice_{tag}", uids[0], 4), LocalUser(f"bob_{tag}", uids[1], 8)

    def write(hdfs) -> None:
        for user in (alice, bob):
            hdfs.write_file(f"/{user.name}/f.bin", FILE, as_uid=user.uid, hdfs_user=user.name)

    with contextlib.ExitStack() as stack:
        stack.enter_context(unix_users([alice.name, bob.name], uids))
        hdfs, cluster = stack.enter_context(hdfs_vnode_cluster(
            unique_name("scrbench"), [alice, bob], int(args.node_mbps * MB), datanodes=1,
            backend="datanode-throttle", short_circuit=True, before_agents=write,
            policy={"sharing": "work-conserving"}))
        channel = ThrottleChannel(hdfs.throttle_socket(hdfs.datanodes[0]))
        cluster.wait_for(lambda: {alice.name, bob.name} <= set(channel.stats().users), timeout=30,
                         what="the agent's shares")
        print(f"HDFS {hdfs.runtime.version}, 1 DataNode, short-circuit reads on, work-conserving, "
              f"{args.node_mbps:g} MB/s configured")

        def bob_alone(options: tuple[str, ...]):
            def read(_round: int) -> tuple[float, int]:
                """bob's client rate and the bytes the throttler saw of them."""
                before = counted(hdfs, "read").get(("dn0", bob.name), 0)
                rate = MeteredCat(hdfs, [f"/{bob.name}/f.bin"] * 4, as_uid=bob.uid, hdfs_user=bob.name,
                                  options=options).finish()
                return rate, counted(hdfs, "read").get(("dn0", bob.name), 0) - before
            return read

        cases = {"short-circuit": bob_alone(()), "through the DataNode": bob_alone(SCR_OFF)}
        rounds = [cells for _, _, cells in run_cells(((r, r) for r in range(args.rounds)), cases)]
        rates = {case: [cells[case].outcome[0] for cells in rounds] for case in cases}
        seen = {case: [cells[case].outcome[1] for cells in rounds] for case in cases}
        print(f"\nbob alone, 4 x 64 MiB, {args.rounds} rounds (median client MB/s; bytes the throttler saw):")
        for case, values in rates.items():
            print(f"  {case:22} {statistics.median(values) / MB:8.0f} MB/s   "
                  f"{statistics.median(seen[case]) / MiB:6.0f} MiB of {4 * FILE // MiB}")
        print(f"  short-circuit / through the DataNode: "
              f"{statistics.median(rates['short-circuit']) / statistics.median(rates['through the DataNode']):.2f}")
        print(f"  {steal_line(cell for cells in rounds for cell in cells.values())}")

        cats = {u.name: MeteredCat(hdfs, [f"/{u.name}/f.bin"] * 400, as_uid=u.uid, hdfs_user=u.name)
                for u in (alice, bob)}
        try:
            cluster.wait_for(lambda: all(c.bytes > 2 * FILE for c in cats.values()), timeout=60,
                             what="both readers past their first blocks")
            clients, nodes = window(hdfs, cats, "read", args.seconds)
        finally:
            for cat in cats.values():
                cat.stop()
        total = sum(clients.values())
        print(f"\nalice (4) and bob (8) at once, short-circuit on, {args.seconds:g} s:")
        for user, share in ((alice, 1 / 3), (bob, 2 / 3)):
            print(f"  {user.name:12} client {clients[user.name] / MB:6.1f} MB/s, throttler "
                  f"{nodes.get(('dn0', user.name), 0) / MB:6.1f} MB/s, part {clients[user.name] / total:.3f} "
                  f"(share {share:.3f}, measured/share {clients[user.name] / total / share:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
