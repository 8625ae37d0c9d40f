"""End to end: a real Prometheus (Debian's package) scrapes the coordinator, two storage agents and a
compute agent of a real local cluster (real blkio VNodes on loop devices, O_DIRECT readers as two
users), and what it stores matches the kernel's own counters; `vnodectl top` names the capped user first.

alice reads as fast as her share lets her (20 MB/s per node: priority 2 of 6 on 60 MB/s; two readers
per node, so her throttle queue is never empty even on a busy host), bob reads at 10 MB/s of his 40:
only alice is held at her limit.
"""

import contextlib
import json
import os
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO, needs_kernel, unique_name
from testbed.local_cluster import LocalCluster, LocalNode, LocalUser
from testbed.loopdev import loop_device
from testbed.ports import free_port
from testbed.prometheus_server import WHY_NO_PROMETHEUS, PrometheusServer
from vnode_sync.kernel.backend import HostCgroups, vnode_name
from vnode_sync.kernel.types import parse_io_service_bytes

pytestmark = [needs_kernel, pytest.mark.slow,
              pytest.mark.skipif(WHY_NO_PROMETHEUS is not None, reason=WHY_NO_PROMETHEUS or "")]

MB = 1_000_000
ALICE, BOB = LocalUser("alice", 64_161, 2), LocalUser("bob", 64_162, 4)
BOB_PACE = 10 * MB
# Seconds of steady reading compared (12 scrapes, 24 agent reports). The agents' counters move in
# report steps (0.5 s) and Prometheus's samples lag up to a scrape (1 s): a rate over the window is
# off by at most 0.5 s of 11 (4.5 %, against the 10 % asserted), and held seconds read at its two
# ends by at most 1.5 s of 12 (12.5 %, against the 20 % allowed). 20 s took 8 s more for no test.
WINDOW = 12.0
RULES = os.path.join(REPO, "deploy", "prometheus", "vnode-sync-alerts.yml")   # recording rules the dashboard reads


@pytest.fixture(scope="module")
def observed():
    name = unique_name("metrics")
    with contextlib.ExitStack() as stack:
        devices = [stack.enter_context(loop_device(f"{name}.disk{i}")) for i in (1, 2)]
        ports = {who: free_port() for who in ("coordinator", "node1", "node2", "compute1")}
        nodes = [LocalNode(f"node{i}", (devices[i - 1][0],), 60 * MB, 60 * MB,
                           {"kind": "generic", "comm_pattern": f"vsread-node{i}"},
                           {"metrics": {"listen": f"127.0.0.1:{ports[f'node{i}']}"}}) for i in (1, 2)]
        cluster = stack.enter_context(LocalCluster(
            name, [ALICE, BOB], nodes, agent_settings={"report_seconds": 0.5},
            coordinator_settings={"metrics": {"listen": f"127.0.0.1:{ports['coordinator']}"}}))
        compute = stack.enter_context(compute_agent(cluster, ports["compute1"]))
        prometheus = stack.enter_context(PrometheusServer(name, {
            "vnode-sync-coordinator": [f"127.0.0.1:{ports['coordinator']}"],
            "vnode-sync-agents": [f"127.0.0.1:{ports[n]}" for n in ("node1", "node2", "compute1")]},
            rule_files=(RULES,)))
        prometheus.wait_for_targets_up()
        readers = [start_reader(node, user) for node in cluster.nodes for user in (ALICE, ALICE, BOB)]
        stack.callback(stop_readers, readers)
        cluster.wait_for(lambda: all(n["measured_read_bps"] > 0 for u in cluster.status()["users"]
                                     for n in u["nodes"]), timeout=30, what="both users reading on both nodes")
        time.sleep(3)   # past the readers' start and one allocation of their VNodes
        before = kernel_counters(cluster)
        t0 = time.time()
        time.sleep(WINDOW)
        after = kernel_counters(cluster)
        t1 = time.time()
        time.sleep(2.5)   # the last report and scrape of the window are stored
        top = cluster.vnodectl("top", "--once").stdout
        top_json = json.loads(cluster.vnodectl("top", "--json").stdout)
        yield cluster, prometheus, before, after, t0, t1, top, top_json, compute


@contextlib.contextmanager
def compute_agent(cluster: LocalCluster, port: int):
    path = os.path.join(cluster.workdir, "agent-compute1.yaml")
    with open(path, "w") as f:
        json.dump({"node_id": "compute1", "role": "compute", "coordinator": cluster.address, "insecure": True,
                   "cgroup_name": f"{cluster.name}.compute1", "teardown_on_exit": True,
                   "compute": {"storage_endpoints": [":9866"], "min_uid": 64_000},
                   "metrics": {"listen": f"127.0.0.1:{port}"}}, f)
    process = subprocess.Popen([sys.executable, "-m", "vnode_sync.agents.main", "--config", path],
                               stderr=open(os.path.join(cluster.workdir, "agent-compute1.log"), "ab"))
    try:
        yield process
    finally:
        process.terminate()
        process.wait(15)


def start_reader(node: LocalNode, user: LocalUser) -> subprocess.Popen:
    pace = ["--bytes-per-second", str(BOB_PACE)] if user is BOB else []
    return subprocess.Popen([sys.executable, "-m", "testbed.direct_reader", node.devices[0], "--uid", str(user.uid),
                             "--name", f"vsread-{node.node_id}", "--seconds", "120", "--warmup", "0", *pace],
                            stdout=subprocess.DEVNULL)


def stop_readers(readers: list[subprocess.Popen]) -> None:
    for reader in readers:
        reader.kill()
        reader.wait()


def kernel_counters(cluster: LocalCluster) -> dict[tuple[str, str], int]:
    """Bytes read by each user's VNode, from the kernel's blkio.throttle.io_service_bytes."""
    out = {}
    for node in cluster.nodes:
        for user in (ALICE, BOB):
            path = os.path.join(HostCgroups().blkio_v1, cluster.cgroup_name(node.node_id), vnode_name(user.name),
                                "blkio.throttle.io_service_bytes")
            with open(path) as f:
                out[(node.node_id, user.name)] = sum(c.read_bytes for c in parse_io_service_bytes(f.read()).values())
    return out


def test_prometheus_rates_match_the_kernels_counters_within_10_percent(observed):
    cluster, prometheus, before, after, t0, t1, *_ = observed
    for node in ("node1", "node2"):
        stored = prometheus.values(f'rate(vnode_sync_user_read_bytes_total{{node="{node}"}}[{WINDOW:.0f}s])', "user",
                                   at=t1)
        for user in ("alice", "bob"):
            kernel = (after[(node, user)] - before[(node, user)]) / (t1 - t0)
            assert abs(stored[user] - kernel) <= 0.1 * kernel, \
                f"{user} on {node}: Prometheus {stored[user] / MB:.2f} MB/s, kernel {kernel / MB:.2f} MB/s"
        kernel_alice = (after[(node, "alice")] - before[(node, "alice")]) / (t1 - t0)
        assert abs(kernel_alice - 20 * MB) <= 0.1 * 20 * MB   # held at her share, as the limits say
        limits = prometheus.values(f'vnode_sync_user_limit_bytes_per_second{{node="{node}",direction="read"}}',
                                   "user", at=t1)
        assert limits["alice"] == 20 * MB and limits["bob"] == 40 * MB


def test_the_held_series_rise_for_the_capped_user_only(observed):
    cluster, prometheus, before, after, t0, t1, *_ = observed
    held = {}
    for at in (t0, t1):
        held[at] = {(r["metric"]["node"], r["metric"]["user"]): float(r["value"][1])
                    for r in prometheus.query("vnode_sync_user_held_seconds_total", at)}
    for node in ("node1", "node2"):
        alice = held[t1][(node, "alice")] - held[t0][(node, "alice")]
        bob = held[t1][(node, "bob")] - held[t0][(node, "bob")]
        assert alice >= 0.8 * (t1 - t0), f"alice held {alice:.1f} s of {t1 - t0:.1f} on {node}"
        assert bob == 0.0, f"bob held {bob:.1f} s on {node}"
    now = prometheus.values('vnode_sync_user_held{source="estimated"}', "user", at=t1)
    assert now["alice"] == 1 and now["bob"] == 0
    assert prometheus.values("vnode_sync_coordinator_user_nodes_held", "user", at=t1) == {"alice": 2, "bob": 0}


def test_the_agents_and_the_coordinator_report_their_state(observed):
    cluster, prometheus, *_ , compute = observed
    assert compute.poll() is None
    assert prometheus.values("vnode_sync_coordinator_agents_connected", "") == {"": 2}
    assert prometheus.values("vnode_sync_agent_generation_lag", "node") == {"node1": 0, "node2": 0}
    connected = prometheus.values('vnode_sync_agent_coordinator_connection_state{state="connected"}', "node")
    assert connected == {"node1": 1, "node2": 1, "compute1": 1}
    info = {(r["metric"]["node"], r["metric"]["role"]) for r in prometheus.query("vnode_sync_agent_info")}
    assert info == {("node1", "storage"), ("node2", "storage"), ("compute1", "compute")}
    threads = prometheus.values('vnode_sync_user_threads{node="node1"}', "user")
    assert threads["alice"] == 2 and threads["bob"] == 1
    captured = prometheus.values("vnode_sync_agent_capture_latency_seconds_count", "node")
    assert captured["node1"] >= 2 and captured["node2"] >= 2
    assert prometheus.values("sum(vnode_sync_agent_reconcile_errors_total)", "") == {"": 0}
    latency = prometheus.query('vnode_sync_coordinator_rpc_duration_seconds_count{method="Register"}')
    assert float(latency[0]["value"][1]) > 0


def test_the_bounded_series_add_up_the_node_totals_and_the_coordinators_rate_per_user(observed):
    """Each node serves its users (two, fewer than top_users), (default) and (other); the node's totals move
    what its user rows move; the coordinator's one series per user is the sum over both nodes."""
    prometheus, t1 = observed[1], observed[5]
    for node in ("node1", "node2"):
        rows = prometheus.values(f'vnode_sync_user_read_bytes_total{{node="{node}"}}', "user", at=t1)
        assert set(rows) == {"alice", "bob", "(default)", "(other)"}
        span = f"[{WINDOW:.0f}s]"
        total = prometheus.values(f'sum(rate(vnode_sync_node_read_bytes_total{{node="{node}"}}{span}))', "", at=t1)[""]
        users = prometheus.values(f'sum(rate(vnode_sync_user_read_bytes_total{{node="{node}"}}{span}))', "", at=t1)[""]
        assert abs(total - users) <= 0.01 * total, (node, total, users)
    agents = prometheus.values(f'sum by (user) (rate(vnode_sync_user_read_bytes_total{{user=~"alice|bob"}}[{WINDOW:.0f}s]))',
                               "user", at=t1)
    coordinator = prometheus.values('avg_over_time(vnode_sync_coordinator_user_rate_bytes_per_second{direction="read"}'
                                    f'[{WINDOW:.0f}s])', "user", at=t1)
    for user in ("alice", "bob"):
        assert abs(coordinator[user] - agents[user]) <= 0.15 * agents[user], (user, coordinator, agents)
    share = prometheus.values('user:vnode_sync_coordinator_user_rate_bytes_per_second:share{direction="read"}', "user",
                              at=t1)
    assert sum(share.values()) == pytest.approx(1.0, abs=0.01) and share["alice"] > share["bob"]


def test_vnodectl_top_shows_the_capped_user_first(observed):
    *_, top, top_json, _ = observed
    rows = [line.split() for line in top.splitlines()[3:] if line and not line.startswith(" ")]
    assert [row[0] for row in rows] == ["alice", "bob"], top
    alice, bob = top_json["users"]
    # Pressure is held time over all the coordinator has seen, which includes the readers' start-up
    # (longer on a loaded host): the held seconds over the window say how long she was capped.
    assert alice["user"] == "alice" and alice["nodes_held"] >= 1 and alice["pressure"] >= 0.5, (top, top_json)
    assert alice["held_seconds"] >= 0.8 * WINDOW, (top, top_json)
    assert {n["node_id"] for n in alice["nodes"]} == {"node1", "node2"}
    assert all(n["held_source"] == "estimated" for n in alice["nodes"])
    assert bob["nodes_held"] == 0 and bob["pressure"] < 0.5


def test_the_dashboards_queries_run_on_the_real_series_and_show_the_held_user(observed):
    prometheus = observed[1]
    with open(os.path.join(REPO, "deploy", "grafana", "vnode-sync.json")) as f:
        dashboard = json.load(f)
    queries = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(queries) >= 10
    answered = {}
    for query in queries:
        expr = (query.replace("$user", ".*").replace("$node", ".*").replace("$group", ".*")
                .replace("$__rate_interval", "10s")
                .replace("$__range", "30s"))
        answered[query] = prometheus.query(expr)   # a query Prometheus cannot parse raises here
    held = next(r for q, r in answered.items() if "increase(vnode_sync_user_held_seconds_total" in q)
    assert {r["metric"]["user"] for r in held} == {"alice"}
    # Errors are absent while nothing fails; the volume series are served by DataNode dispatchers only (this
    # cluster is blkio): those queries are parsed above, and their data is tested in tests/agents/test_metrics.py.
    # Group series exist only where groups do (this cluster has none): their data is tested in
    # tests/metrics/test_endpoint.py.
    empty = [q for q, r in answered.items()
             if not r and "errors" not in q and "vnode_sync_volume_" not in q and "_group_" not in q]
    assert not empty, f"dashboard queries with no data: {empty}"


def test_every_metric_served_is_listed_in_docs_metrics_md(observed):
    prometheus = observed[1]
    served = {r["metric"]["__name__"] for r in prometheus.query('group by (__name__) ({__name__=~"vnode_sync_.+"})')}
    with open(os.path.join(REPO, "docs", "metrics.md")) as f:
        documented = f.read()
    base = {name.removesuffix("_bucket").removesuffix("_count").removesuffix("_sum") for name in served}
    assert sorted(name for name in base if f"`{name}`" not in documented) == []
