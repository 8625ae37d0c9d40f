"""The README's main job: a real local vnode-sync cluster enforcing two users' priorities.

    python -m testbed.demo [--storage hdfs|loop] [--seconds 8]

`hdfs` (the default): a real HDFS (NameNode + 2 DataNodes, each on its own loop disk),
the coordinator and one storage agent per DataNode capturing DataXceiver threads; two
Unix users, made by the demo and removed after, read large files from both DataNodes
through the native client at priorities 8 and 4 on a configured node bandwidth of
60 MB/s. `loop`: the same without HDFS, O_DIRECT readers on raw loop devices.
Either way it prints the live per-user, per-node MB/s against the targets, flips the
priorities while the readers run, and prints the achieved split. `hdfs` then runs a write
phase: both users `hdfs dfs -put` at once to DataNodes that load vnode-sync's Java agent
(backend datanode-throttle, no cgroup), and prints the write split the same way.
Everything it makes is named vnode-sync-demo.* (users vndemo-*) and removed on exit.
"""

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from testbed.hdfs_cluster import HdfsCluster
from testbed.unix_users import unix_users
from testbed.hdfs_cluster.runtime import installed_java
from testbed.hdfs_vnode_cluster import hdfs_vnode_cluster
from testbed.local_cluster import LocalCluster, LocalNode, LocalUser
from testbed.loopdev import loop_device

MB = 1_000_000
NODE_BW = 60 * MB
USERS = (LocalUser("alice", 64_301, 4), LocalUser("bob", 64_302, 8))


def live_table(status: dict, direction: str = "read") -> str:
    width = max([4] + [len(u["name"]) for u in status["users"]])
    lines = [f"  {'user':<{width}} {'prio':>4} {'node':<6} {direction + ' target MB/s':>17} {'measured MB/s':>13}"]
    for user in status["users"]:
        for node in user["nodes"]:
            lines.append(f"  {user['name']:<{width}} {user['priority']:>4} {node['node_id']:<6} "
                         f"{node[f'target_{direction}_bps'] / MB:>17.1f} "
                         f"{node[f'measured_{direction}_bps'] / MB:>13.1f}")
    return "\n".join(lines)


def watch(cluster: LocalCluster, seconds: float, title: str, direction: str = "read") -> None:
    """Print the live table every 2 s, then each user's mean aggregate MB/s after the first sample."""
    print(f"\n== {title}")
    deadline = time.monotonic() + seconds
    samples: dict[str, list[float]] = {}
    first = True
    while time.monotonic() < deadline:
        time.sleep(2)
        status = cluster.status()
        print(time.strftime("%H:%M:%S"))
        print(live_table(status, direction), flush=True)
        if not first:
            for user in status["users"]:
                samples.setdefault(user["name"], []).append(sum(n[f"measured_{direction}_bps"] for n in user["nodes"]))
        first = False
    means = {u: sum(v) / len(v) for u, v in samples.items() if v}
    total = sum(means.values()) or 1.0
    print("  split: " + ", ".join(f"{u} {m / MB:.1f} MB/s ({100 * m / total:.0f}%)" for u, m in means.items()))


def start_readers(cluster: LocalCluster, seconds: float) -> dict:
    return {(u.name, n.node_id): subprocess.Popen(
        [sys.executable, "-m", "testbed.direct_reader", n.devices[0], "--uid", str(u.uid),
         "--name", f"vsread-{n.node_id}", "--seconds", str(seconds), "--warmup", "1"],
        stdout=subprocess.PIPE, text=True) for u in USERS for n in cluster.nodes}


def run_loop_demo(seconds: float) -> int:
    name = f"vnode-sync-demo.{os.getpid()}"
    with contextlib.ExitStack() as stack:
        devices = [stack.enter_context(loop_device(f"{name}.disk{i}")) for i in (1, 2)]
        nodes = [LocalNode(f"node{i}", (devices[i - 1][0],), NODE_BW, NODE_BW,
                           {"kind": "generic", "comm_pattern": f"vsread-node{i}"}) for i in (1, 2)]
        print(f"starting coordinator and 2 storage agents ({name}); node BW {NODE_BW / MB:.0f} MB/s")
        cluster = stack.enter_context(LocalCluster(name, list(USERS), nodes))
        print(cluster.vnodectl("status").stdout)
        readers = start_readers(cluster, 2 * seconds + 3)
        watch(cluster, seconds, "alice priority 4, bob priority 8 (Algorithm 1: 20 and 40 MB/s per node)")
        cluster.vnodectl("set-priority", "alice", "8")
        cluster.vnodectl("set-priority", "bob", "4")
        watch(cluster, seconds, "flipped: alice priority 8, bob priority 4 (40 and 20 MB/s per node)")
        print("\n== achieved over the whole run (both phases), per reader")
        for (user, node_id), reader in readers.items():
            out, _ = reader.communicate(timeout=60)
            print(f"  {user:<6} {node_id}: {json.loads(out)['bytes_per_second'] / MB:.1f} MB/s")
    print("\ncleaned up: agents removed their VNodes, loop devices detached")
    return 0


DEMO_USER_PREFIX = "vndemo-"
MiB = 1 << 20


def run_hdfs_demo(seconds: float) -> int:
    name = f"vnode-sync-demo.{os.getpid()}"
    names = (f"{DEMO_USER_PREFIX}alice", f"{DEMO_USER_PREFIX}bob")
    # Each user reads at 40 MB/s in one phase and 20 in the other, after readers start: room for a
    # slow start on a loaded machine, so no reader runs dry before the flipped phase ends.
    file_size = int(seconds * 2 * 60 * MB) // MiB * MiB
    with unix_users(list(names)) as accounts:
        users = [LocalUser(accounts[0].pw_name, accounts[0].pw_uid, 8),
                 LocalUser(accounts[1].pw_name, accounts[1].pw_uid, 4)]
        print(f"made Unix users {names[0]} (uid {users[0].uid}) and {names[1]} (uid {users[1].uid})")

        def write_files(hdfs: HdfsCluster) -> None:
            print(f"HDFS up in {hdfs.startup_seconds:.1f} s; writing one {file_size // MiB} MiB file per "
                  f"user on each DataNode")
            for user in users:
                for dn in hdfs.datanodes:
                    hdfs.write_file(f"/{user.name}/on-{dn.id}.bin", file_size, as_uid=user.uid,
                                    hdfs_user=user.name, on_datanode=dn)
            hdfs.evict_page_cache()

        print(f"starting HDFS (NameNode + 2 DataNodes on loop disks) and vnode-sync ({name})")
        with hdfs_vnode_cluster(name, users, NODE_BW, disk_mb=3072,
                                before_agents=write_files) as (hdfs, cluster):
            print(cluster.vnodectl("nodes").stdout)
            readers = {(u.name, dn.id): hdfs.start_read(f"/{u.name}/on-{dn.id}.bin", as_uid=u.uid,
                                                        hdfs_user=u.name)
                       for u in users for dn in hdfs.datanodes}
            try:
                print("waiting until every user's reader is served by both DataNodes (reader JVMs start slowly)")
                cluster.wait_for(lambda: all(n["measured_read_bps"] > 0 for u in cluster.status()["users"]
                                             for n in u["nodes"]), timeout=120, what="readers on every DataNode")
                watch(cluster, seconds, f"{users[0].name} priority 8, {users[1].name} priority 4 "
                                        f"(Algorithm 1 on {NODE_BW / MB:.0f} MB/s: 40 and 20 MB/s per DataNode)")
                cluster.vnodectl("set-priority", users[0].name, "4")
                cluster.vnodectl("set-priority", users[1].name, "8")
                watch(cluster, seconds, "flipped while reading: priorities 4 and 8 (20 and 40 MB/s per DataNode)")
            finally:
                for reader in readers.values():
                    reader.kill()
                    reader.wait()
        run_write_phase(f"{name}.writes", users, seconds)
    print("\ncleaned up: VNodes removed, HDFS stopped, loop disks detached, demo users removed")
    return 0


def run_write_phase(name: str, users: list[LocalUser], seconds: float) -> None:
    """Both users `hdfs dfs -put` at once, on DataNodes that run vnode-sync's Java agent: buffered
    writes, which no cgroup v1 throttle charges, split by priority where the DataNode receives them."""
    sources = tempfile.mkdtemp(prefix=name + ".")
    os.chmod(sources, 0o755)
    try:
        for user in users:
            rate = 40 * MB if user.priority == 8 else 20 * MB
            path = os.path.join(sources, user.name)
            with open(path, "wb") as f:
                for _ in range(int(rate * (seconds + 8)) // MiB):
                    f.write(os.urandom(MiB))
            os.chmod(path, 0o644)
        print(f"\nstarting HDFS whose DataNodes load vnode-sync's Java agent (backend datanode-throttle: "
              f"no cgroup, block access tokens on, replication 2) ({name})")
        # Hadoop 3.3 and 3.4 support Java 8 and 11 at runtime: the DataNodes run on 11 (scripts/setup.d/java11.sh)
        # where it is installed, as a site's would; on the JDK of the build otherwise (reported degraded).
        java11 = installed_java(11)
        with hdfs_vnode_cluster(name, users, NODE_BW, backend="datanode-throttle", replication=2,
                                datanode_java_home=java11.home if java11 else None) as (hdfs, cluster):
            writers = [hdfs.start_shell("-put", os.path.join(sources, u.name), f"/{u.name}.bin", as_uid=u.uid,
                                        hdfs_user=u.name) for u in users]
            try:
                print("waiting until both users' `hdfs dfs -put` write to both DataNodes")
                cluster.wait_for(lambda: all(n["measured_write_bps"] > 0 for u in cluster.status()["users"]
                                             for n in u["nodes"]), timeout=120, what="writers on every DataNode")
                watch(cluster, seconds, f"writes (hdfs dfs -put, buffered): {users[0].name} priority "
                                        f"{users[0].priority}, {users[1].name} priority {users[1].priority}",
                      "write")
            finally:
                for writer in writers:
                    writer.kill()
                    writer.wait()
    finally:
        shutil.rmtree(sources, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--storage", choices=["hdfs", "loop"], default="hdfs")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each phase")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("demo: error: must run as root (it makes cgroups and loop devices)", file=sys.stderr)
        return 2
    return run_hdfs_demo(args.seconds) if args.storage == "hdfs" else run_loop_demo(args.seconds)


if __name__ == "__main__":
    sys.exit(main())
