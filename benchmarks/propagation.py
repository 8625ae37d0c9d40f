"""How long from `set-priority` until every storage agent reports the new generation applied.

    sudo .venv/bin/python -m benchmarks.propagation [--rounds 30]

Runs a real coordinator process and, for 2 and 10 nodes, real vnode-agent processes
(blkio-v1 VNodes on one shared loop device, each agent in its own subtree); for 100
nodes, simulated agents (benchmarks.simulated_agents, in one asyncio client process) that hold
the same gRPC stream and report the applied generation as soon as it arrives, doing no cgroup work. Time is measured from sending
the SetPriority RPC to the coordinator listing every node at the new generation
(polled every 2 ms). The baseline, measured in the same run, is one ListNodes round trip.
"""

import argparse
import statistics
import subprocess
import sys
import time

import grpc

from testbed.loopdev import loop_device  # noqa: E402
from benchmarks.percentile import percentile  # noqa: E402
from benchmarks.simulated_agents import node_id  # noqa: E402
from testbed.local_cluster import LocalCluster, LocalNode, LocalUser  # noqa: E402
from vnode_sync.wire import vnode_pb2 as pb  # noqa: E402
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc  # noqa: E402

MB = 1_000_000
POLL_SECONDS = 0.002


def start_simulated_agents(address: str, device: str, nodes: list[str]) -> subprocess.Popen:
    """Simulated agents n00000... in one client process; close its stdin to stop them."""
    return subprocess.Popen([sys.executable, "-m", "benchmarks.simulated_agents", address, device, "0",
                             str(len(nodes))], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)


def measure(cluster: LocalCluster, rounds: int) -> tuple[list[float], list[float]]:
    with grpc.insecure_channel(cluster.address) as channel:
        admin = pb_grpc.AdminStub(channel)
        baseline, latencies = [], []
        for i in range(rounds):
            t0 = time.perf_counter()
            admin.ListNodes(pb.ListNodesRequest(), timeout=10)
            baseline.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            generation = admin.SetPriority(pb.SetPriorityRequest(user="alice", priority=1 + i % 99), timeout=10)
            generation = admin.ListUsers(pb.ListUsersRequest(), timeout=10).generation
            while True:
                nodes = admin.ListNodes(pb.ListNodesRequest(), timeout=10).nodes
                if all(n.applied_generation >= generation for n in nodes):
                    break
                time.sleep(POLL_SECONDS)
            latencies.append(time.perf_counter() - t0)
        return latencies, baseline


def run(n_nodes: int, real: bool, device: str, rounds: int) -> dict:
    name = f"vnode-sync-bench.prop.{n_nodes}.{int(time.time())}"
    nodes = [LocalNode(node_id(i), (device,), 60 * MB, 60 * MB) for i in range(n_nodes)]
    cluster = LocalCluster(name, [LocalUser("alice", 64_201, 4), LocalUser("bob", 64_202, 8)], nodes)
    simulated = None
    try:
        cluster.start_coordinator()
        if real:
            for node in nodes:
                cluster.start_agent(node)
        else:
            simulated = start_simulated_agents(cluster.address, device, [n.node_id for n in nodes])
        cluster.wait_for(lambda: sum(n["connected"] for n in cluster.status()["nodes"]) == n_nodes,
                         timeout=60, what=f"{n_nodes} agents connected")
        latencies, baseline = measure(cluster, rounds)
    finally:
        if simulated:
            simulated.stdin.close()
            simulated.wait(30)
        cluster.stop()
    return {"nodes": n_nodes, "agents": "processes" if real else "simulated",
            "p50_ms": 1000 * statistics.median(latencies), "p99_ms": 1000 * percentile(latencies, 99),
            "baseline_ms": 1000 * statistics.median(baseline)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    results = []
    with loop_device(f"vnode-sync-bench.prop.{int(time.time())}") as (device, _):
        for n, real in ((2, True), (10, True), (100, False)):
            results.append(run(n, real, device, args.rounds))
    print(f"{'agents':>7} {'kind':>10} {'p50 ms':>8} {'p99 ms':>8} {'RPC RTT ms':>10} {'p50/RTT':>8}")
    for r in results:
        print(f"{r['nodes']:>7} {r['agents']:>10} {r['p50_ms']:>8.1f} {r['p99_ms']:>8.1f} "
              f"{r['baseline_ms']:>10.2f} {r['p50_ms'] / r['baseline_ms']:>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
