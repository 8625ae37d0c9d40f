"""How long from `set-priority` until every storage agent reports the new generation applied.

    sudo .venv/bin/python -m benchmarks.propagation [--rounds 30]

Runs a real coordinator process and, for 2 and 10 nodes, real vnode-agent processes
(blkio-v1 VNodes on one shared loop device, each agent in its own subtree); for 100
nodes, simulated agents: threads that hold the same gRPC stream and report the applied
generation as soon as it arrives, doing no cgroup work. Time is measured from sending
the SetPriority RPC to the coordinator listing every node at the new generation
(polled every 2 ms). The baseline, measured in the same run, is one ListNodes round trip.
"""

import argparse
import statistics
import sys
import threading
import time

import grpc

from testbed.loopdev import loop_device  # noqa: E402
from testbed.local_cluster import LocalCluster, LocalNode, LocalUser  # noqa: E402
from vnode_sync.wire import vnode_pb2 as pb  # noqa: E402
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc  # noqa: E402

MB = 1_000_000
POLL_SECONDS = 0.002


def simulated_agent(address: str, node_id: str, device: str, stop: threading.Event) -> None:
    with grpc.insecure_channel(address) as channel:
        link = pb_grpc.AgentLinkStub(channel)
        link.Register(pb.RegisterRequest(node_id=node_id, backend="simulated",
                                         devices=[pb.Device(name=device)]), timeout=10)
        stream = link.WatchDesiredState(pb.WatchRequest(node_id=node_id))
        stop_watch = threading.Thread(target=lambda: (stop.wait(), stream.cancel()), daemon=True)
        stop_watch.start()
        try:
            for state in stream:
                link.ReportUsage(pb.UsageReport(node_id=node_id, applied_generation=state.generation,
                                                sampled_at_unix=time.time()), timeout=10)
        except grpc.RpcError:
            pass


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


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
    nodes = [LocalNode(f"n{i:03d}", (device,), 60 * MB, 60 * MB) for i in range(n_nodes)]
    cluster = LocalCluster(name, [LocalUser("alice", 64_201, 4), LocalUser("bob", 64_202, 8)], nodes)
    stop = threading.Event()
    threads = []
    try:
        cluster.start_coordinator()
        if real:
            for node in nodes:
                cluster.start_agent(node)
        else:
            threads = [threading.Thread(target=simulated_agent, args=(cluster.address, n.node_id, device, stop),
                                        daemon=True) for n in nodes]
            for t in threads:
                t.start()
        cluster.wait_for(lambda: sum(n["connected"] for n in cluster.status()["nodes"]) == n_nodes,
                         timeout=60, what=f"{n_nodes} agents connected")
        latencies, baseline = measure(cluster, rounds)
    finally:
        stop.set()
        for t in threads:
            t.join(5)
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
