"""The README's main job: a real local vnode-sync cluster enforcing two users' priorities.

    python -m vnode_sync.testbed.demo [--storage loop] [--seconds 8]

`loop`: a coordinator and two storage agents (node1, node2) over gRPC, one loop device
per node, one O_DIRECT reader per user per node, priorities 4 and 8 on a configured
node bandwidth of 60 MB/s. It prints the live per-user, per-node MB/s against the
targets, flips the priorities while the readers run, and prints the achieved split.
Everything it makes is named vnode-sync-demo.* and removed on exit.
"""

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time

from vnode_sync.testbed.local_cluster import LocalCluster, LocalNode, LocalUser
from vnode_sync.testbed.raw_loop import loop_device

MB = 1_000_000
NODE_BW = 60 * MB
USERS = (LocalUser("alice", 64_301, 4), LocalUser("bob", 64_302, 8))


def live_table(cluster: LocalCluster) -> str:
    status = cluster.status()
    lines = [f"  {'user':<6} {'prio':>4} {'node':<6} {'target MB/s':>11} {'measured MB/s':>13}"]
    for user in status["users"]:
        for node in user["nodes"]:
            lines.append(f"  {user['name']:<6} {user['priority']:>4} {node['node_id']:<6} "
                         f"{node['target_read_bps'] / MB:>11.1f} {node['measured_read_bps'] / MB:>13.1f}")
    return "\n".join(lines)


def watch(cluster: LocalCluster, seconds: float, title: str) -> None:
    print(f"\n== {title}")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(2)
        print(time.strftime("%H:%M:%S"))
        print(live_table(cluster), flush=True)


def start_readers(cluster: LocalCluster, seconds: float) -> dict:
    return {(u.name, n.node_id): subprocess.Popen(
        [sys.executable, "-m", "vnode_sync.testbed.direct_reader", n.devices[0], "--uid", str(u.uid),
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--storage", choices=["loop"], default="loop")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each phase")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("demo: error: must run as root (it makes cgroups and loop devices)", file=sys.stderr)
        return 2
    return run_loop_demo(args.seconds)


if __name__ == "__main__":
    sys.exit(main())
