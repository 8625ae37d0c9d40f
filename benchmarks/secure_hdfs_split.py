"""Priority split on a secure HDFS (Kerberos, SASL privacy, block tokens), from the clients' side and
from the DataNode throttlers' counters, and how fast a priority flip is followed.

    sudo .venv/bin/python -m benchmarks.secure_hdfs_split [--node-mbps 12] [--seconds 8] [--hadoop-version 3.3.6]
        [--allocation work-conserving]

The testbed's secure HDFS (testbed/hdfs_cluster/kerberos.py: a KDC of the run's own, MIT Kerberos
from Debian; `dfs.data.transfer.protection=privacy` with AES/CTR; SPNEGO), 2 DataNodes with the
DataNode-side throttler, replication 2; vnode-sync with `backend: datanode-throttle`, --node-mbps per
DataNode, static caps (or --allocation work-conserving: the DataNodes share by per-packet weights, so
a --node-mbps above what encryption lets a node move still splits by priority). Two principals,
alice@REALM (priority 4) and bob@REALM (8), each a Unix user with a ticket cache of its own.

0. Each user's `hdfs dfs -put -` alone, over --seconds: its client's own pace.
1. Both `hdfs dfs -put -` at once (fed by this process, which counts what each client took): each
   user's rate per DataNode from the throttlers' counters and from the client, over --seconds.
   Then alice is flipped to 8.
2. Both `hdfs dfs -cat` on every DataNode at once (files of one replica on each DataNode, so each
   cat reads from one known DataNode; its output is counted here), alice at 8, then flipped to 4.

A flip's figures: when every DataNode's throttler had the new rates (its generation moved), and when
the clients' split (a sliding 1-s window of their byte counts, sampled every 100 ms) first came
within 10 % of the new one. The split is printed as each user's part of the DataNode's total against
its priority's part (the ratio measured/target is the figure; 1.00 is exact).
"""

import argparse
import contextlib
import pwd
import sys
import time
import uuid

from benchmarks.agent_trace import tracing
from benchmarks.interactive_shares import CONTROL_SECONDS, REPORT_SECONDS
from testbed.hdfs_cluster.metered import MeteredCat, MeteredPut, window
from testbed.hdfs_vnode_cluster import hdfs_vnode_cluster
from testbed.local_cluster import LocalUser
from testbed.names import unique_name
from testbed.unix_users import unix_users
from vnode_sync.datanode.channel import ThrottleChannel

MB = 1_000_000
MiB = 1 << 20
READ_FILE = 32 * MiB
SAMPLE = 0.1
SLIDE = 1.0


def free_uid(start: int) -> int:
    uid = start
    while True:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
        uid += 1


def parts(rates: dict[str, float]) -> dict[str, float]:
    total = sum(rates.values())
    return {u: (r / total if total else 0.0) for u, r in rates.items()}


def table(title: str, clients: dict, nodes: dict, priorities: dict[str, int], datanodes: list[str],
          client_key) -> None:
    print(f"\n{title}")
    print(f"  {'DataNode':8} {'user':12} {'prio':>4} {'client MB/s':>11} {'throttler MB/s':>14} "
          f"{'part (client)':>13} {'part (throttler)':>16} {'target':>6} {'meas/target':>11}")
    target = {u: p / sum(priorities.values()) for u, p in priorities.items()}
    for dn in datanodes:
        on_client = {u: clients[client_key(u, dn)] for u in priorities}
        on_node = {u: nodes.get((dn, u), 0.0) for u in priorities}
        part_client, part_node = parts(on_client), parts(on_node)
        for u in priorities:
            print(f"  {dn:8} {u:12} {priorities[u]:>4} {on_client[u] / MB:>11.1f} {on_node[u] / MB:>14.1f} "
                  f"{part_client[u]:>13.3f} {part_node[u]:>16.3f} {target[u]:>6.3f} "
                  f"{part_node[u] / target[u]:>6.2f}/{part_client[u] / target[u]:.2f}")


def flip_follow(cluster, hdfs, user: str, priority: int, meters: dict, priorities: dict[str, int],
                group, timeout: float = 8.0) -> tuple[float, float | None]:
    """Set the priority; (seconds until every DataNode's throttler had it, seconds until the clients'
    sliding 1-s split first came within 10 % of the new one, or None)."""
    channels = [ThrottleChannel(hdfs.throttle_socket(dn)) for dn in hdfs.datanodes]
    generations = [c.stats().generation for c in channels]
    history = []
    t0 = time.monotonic()
    cluster.vnodectl("set-priority", user, str(priority))
    applied = followed = None
    target = {u: p / sum(priorities.values()) for u, p in priorities.items()}
    while time.monotonic() - t0 < timeout and (applied is None or followed is None):
        now = time.monotonic() - t0
        history.append((now, {k: m.bytes for k, m in meters.items()}))
        if applied is None and all(c.stats().generation > g for c, g in zip(channels, generations)):
            applied = now
        old = [h for h in history if h[0] <= now - SLIDE]
        if followed is None and old:  # a window wholly after the flip
            then = old[-1][1]
            rates = group({k: history[-1][1][k] - then[k] for k in meters})
            if all(abs(part - target[u]) <= 0.10 * target[u] for rs in rates for u, part in parts(rs).items()):
                followed = now
        time.sleep(SAMPLE)
    return applied if applied is not None else float("nan"), followed


def print_weights_held(cluster, direction: str) -> None:
    """Each user's part of the weights each DataNode holds (`vnodectl status`), where the center sent
    any: whether a split off its target is the center's or the edge's."""
    parts_held, status = {}, cluster.status()
    for user in status["users"]:
        for node in user["nodes"]:
            share = node.get(f"weight_{direction}_share")
            if share:
                parts_held.setdefault(node["node_id"], []).append(f"{user['name']} {100 * share:.1f} %")
    print(f"  {direction} weights the DataNodes hold: "
          + ("; ".join(f"{dn}: {', '.join(held)}" for dn, held in sorted(parts_held.items())) or "none sent")
          + "; sent so far: " + ", ".join(f"{n['node_id']} {n.get('allocation_updates', 0)}" for n in status["nodes"]))


def pace_alone(hdfs, cluster, user: LocalUser, seconds: float) -> float:
    """One user's `hdfs dfs -put` alone on the cluster: its client's rate over `seconds` (bytes/s)."""
    put = MeteredPut(hdfs, f"/{user.name}/alone.bin", as_uid=user.uid, hdfs_user=user.name)
    try:
        cluster.wait_for(lambda: put.bytes > 8 * MiB, timeout=60, what=f"{user.name}'s put")
        time.sleep(2)
        clients, _ = window(hdfs, {user.name: put}, "write", seconds)
    finally:
        put.finish()
    return clients[user.name]


def policy_settings(allocation: str) -> dict:
    """hdfs_vnode_cluster's arguments for the allocation: work-conserving ticks and reports as the edge
    benchmarks run them (benchmarks.interactive_shares)."""
    if allocation == "static":
        return {}
    return {"policy": {"sharing": allocation, "control_seconds": CONTROL_SECONDS},
            "agent_settings": {"report_seconds": REPORT_SECONDS}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--node-mbps", type=float, default=12, help="node bandwidth per DataNode, MB/s")
    parser.add_argument("--seconds", type=float, default=8, help="each measured window")
    parser.add_argument("--allocation", choices=("static", "work-conserving"), default="static",
                        help="the coordinator's allocation (work-conserving: per-packet weights in the DataNodes)")
    parser.add_argument("--hadoop-version", help="a line of deploy/hadoop/lines.txt (default the testbed's)")
    parser.add_argument("--trace", type=argparse.FileType("w"),
                        help="write each DataNode's view every 0.1 s of the both-at-once writes (2 s before the window, then the window)")
    args = parser.parse_args(argv)
    tag = uuid.uuid4().hex[:4]
    names = [f"alice_{tag}", f"bob_{tag}"]
    uids = [free_uid(64_590), None]
    uids[1] = free_uid(uids[0] + 1)
    alice, bob = LocalUser(names[0], uids[0], 4), LocalUser(names[1], uids[1], 8)
    users = [alice, bob]

    def write_read_files(hdfs) -> None:
        for u in users:
            for dn in hdfs.datanodes:
                hdfs.write_file(f"/{u.name}/on-{dn.id}.bin", READ_FILE, as_uid=u.uid, hdfs_user=u.name,
                                replication=1, on_datanode=dn)

    with contextlib.ExitStack() as stack:
        stack.enter_context(unix_users(names, uids))
        hdfs, cluster = stack.enter_context(hdfs_vnode_cluster(
            unique_name("krbsplit"), users, int(args.node_mbps * MB), backend="datanode-throttle", replication=2,
            kerberos=True, disk_mb=3072, before_agents=write_read_files, hadoop_version=args.hadoop_version,
            **policy_settings(args.allocation)))
        datanodes = [dn.id for dn in hdfs.datanodes]
        print(f"secure HDFS {hdfs.runtime.version}: realm {hdfs.kerberos.realm}, data transfer protection "
              f"{hdfs.kerberos.protection} ({hdfs.kerberos.cipher_suites}), block tokens, SPNEGO; "
              f"{len(datanodes)} DataNodes, replication 2, node bandwidth {args.node_mbps:g} MB/s, allocation "
              f"{args.allocation}; "
              f"started in {hdfs.startup_seconds} s")
        cluster.wait_for(lambda: all(set(ThrottleChannel(hdfs.throttle_socket(dn)).stats().users) >= set(names)
                                     for dn in hdfs.datanodes), timeout=30, what="the agents' rates")

        alone = {u.name: pace_alone(hdfs, cluster, u, args.seconds) for u in users}
        print(f"\nhdfs dfs -put, each alone, {args.seconds:g} s: "
              + ", ".join(f"{name} {rate / MB:.1f} MB/s" for name, rate in alone.items())
              + " (the client's own pace: a user slower than its share beside the other is not held by the DataNodes)")
        puts = {u.name: MeteredPut(hdfs, f"/{u.name}/put.bin", as_uid=u.uid, hdfs_user=u.name) for u in users}
        try:
            cluster.wait_for(lambda: all(m.bytes > 8 * MiB for m in puts.values()), timeout=60, what="both puts")
            with contextlib.ExitStack() as traced:
                roles = {"alice": alice.name, "bob": bob.name}
                for dn in hdfs.datanodes:
                    traced.enter_context(tracing(ThrottleChannel(hdfs.throttle_socket(dn)), roles, "write",
                                                 args.trace, dn.id))
                time.sleep(2)
                clients, nodes = window(hdfs, puts, "write", args.seconds)
            table(f"hdfs dfs -put, both at once, {args.seconds:g} s (replication 2: every DataNode gets every byte)",
                  clients, nodes, {alice.name: 4, bob.name: 8}, datanodes, lambda u, dn: u)
            print(f"  bob beside alice: {clients[bob.name] / MB:.1f} MB/s, {clients[bob.name] / alone[bob.name]:.2f} "
                  f"of his pace alone")
            print_weights_held(cluster, "write")
            applied, followed = flip_follow(cluster, hdfs, alice.name, 8, puts, {alice.name: 8, bob.name: 8},
                                            lambda rates: [rates])
            print(f"  flip alice 4 -> 8: every DataNode's throttler had it after {applied:.2f} s; the clients' "
                  f"1-s split within 10 % of 1:1 after {followed if followed is None else round(followed, 2)} s")
            clients, nodes = window(hdfs, puts, "write", args.seconds)
            table("hdfs dfs -put after the flip", clients, nodes, {alice.name: 8, bob.name: 8}, datanodes,
                  lambda u, dn: u)
        finally:
            for put in puts.values():
                put.finish()

        hdfs.evict_page_cache()
        cats = {(u.name, dn.id): MeteredCat(hdfs, [f"/{u.name}/on-{dn.id}.bin"] * 40, as_uid=u.uid,
                                            hdfs_user=u.name) for u in users for dn in hdfs.datanodes}
        try:
            cluster.wait_for(lambda: all(m.bytes > 4 * MiB for m in cats.values()), timeout=60, what="every cat")
            time.sleep(2)
            clients, nodes = window(hdfs, cats, "read", args.seconds)
            table(f"hdfs dfs -cat, one per user per DataNode, {args.seconds:g} s", clients, nodes,
                  {alice.name: 8, bob.name: 8}, datanodes, lambda u, dn: (u, dn))

            def per_datanode(rates: dict) -> list[dict]:
                return [{u: rates[(u, dn)] for u in names} for dn in datanodes]
            applied, followed = flip_follow(cluster, hdfs, alice.name, 4, cats, {alice.name: 4, bob.name: 8},
                                            per_datanode)
            print(f"  flip alice 8 -> 4: every DataNode's throttler had it after {applied:.2f} s; the clients' "
                  f"1-s split within 10 % of 1:2 on every DataNode after "
                  f"{followed if followed is None else round(followed, 2)} s")
            clients, nodes = window(hdfs, cats, "read", args.seconds)
            table("hdfs dfs -cat after the flip", clients, nodes, {alice.name: 4, bob.name: 8}, datanodes,
                  lambda u, dn: (u, dn))
            print_weights_held(cluster, "read")
            running = all(c.running for c in cats.values())
        finally:
            for cat in cats.values():
                cat.stop()
        if not running:
            print("warning: a cat finished inside a window; its figures are low", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
