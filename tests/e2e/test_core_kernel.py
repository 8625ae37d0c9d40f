"""End to end on the real kernel: coordinator and two agent processes over gRPC on loopback,
real blkio VNodes on loop devices, O_DIRECT readers running as two users."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import needs_kernel, unique_name
from testbed.loopdev import loop_device, stale_mounts
from vnode_sync.kernel.backend import HostCgroups, vnode_name
from vnode_sync.kernel.types import IoCounters
from testbed.hdfs_vnode_cluster import node_vnodes
from testbed.local_cluster import LocalCluster, LocalNode, LocalUser

pytestmark = [needs_kernel, pytest.mark.slow]

MB = 1_000_000
ALICE_UID, BOB_UID = 64_101, 64_102


@pytest.fixture
def cluster():
    name = unique_name("e2e")
    with contextlib.ExitStack() as stack:
        devices = [stack.enter_context(loop_device(f"{name}.disk{i}")) for i in (1, 2)]
        nodes = [LocalNode(f"node{i}", (devices[i - 1][0],), 60 * MB, 60 * MB,
                           {"kind": "generic", "comm_pattern": f"vsread-node{i}"}) for i in (1, 2)]
        users = [LocalUser("alice", ALICE_UID, 4), LocalUser("bob", BOB_UID, 8)]
        c = stack.enter_context(LocalCluster(name, users, nodes))
        c.devices = devices
        yield c


def start_reader(device: str, uid: int, node_id: str, seconds: float = 6.0, warmup: float = 1.5) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "testbed.direct_reader", device, "--uid", str(uid),
                             "--name", f"vsread-{node_id}", "--seconds", str(seconds), "--warmup", str(warmup)],
                            stdout=subprocess.PIPE, text=True)


def rate(reader: subprocess.Popen) -> float:
    out, _ = reader.communicate(timeout=60)
    return json.loads(out)["bytes_per_second"]


def vnode_tree(cluster: LocalCluster, node_id: str) -> dict:
    root = os.path.join(HostCgroups().blkio_v1, cluster.cgroup_name(node_id))
    tree = {}
    for entry in sorted(os.listdir(root)):
        path = os.path.join(root, entry)
        if os.path.isdir(path):
            with open(os.path.join(path, "blkio.throttle.read_bps_device")) as f:
                tree[entry] = f.read()
    return tree


def test_priorities_4_and_8_on_60_mb_per_s_give_20_and_40(cluster):
    readers = {(user, node.node_id): start_reader(node.devices[0], uid, node.node_id)
               for node in cluster.nodes for user, uid in (("alice", ALICE_UID), ("bob", BOB_UID))}
    rates = {key: rate(r) for key, r in readers.items()}
    for (user, node_id), measured in rates.items():
        target = 20 * MB if user == "alice" else 40 * MB
        assert abs(measured - target) <= 0.1 * target, f"{user} on {node_id}: {measured / MB:.1f} MB/s"
    status = cluster.status()
    targets = {u["name"]: {n["node_id"]: n["target_read_bps"] for n in u["nodes"]} for u in status["users"]}
    assert targets == {"alice": {"node1": 20 * MB, "node2": 20 * MB}, "bob": {"node1": 40 * MB, "node2": 40 * MB}}


def test_coordinator_restart_keeps_users_and_priorities(cluster):
    cluster.vnodectl("set-priority", "alice", "30")
    before = cluster.status()["generation"]
    cluster.stop_coordinator()
    cluster.start_coordinator()
    users = {u["name"]: u for u in cluster.status()["users"]}
    assert users["alice"]["priority"] == 30 and users["bob"]["priority"] == 8
    assert cluster.status()["generation"] >= before
    cluster.vnodectl("set-priority", "bob", "10")
    generation = cluster.status()["generation"]
    cluster.wait_for(lambda: all(n["applied_generation"] == generation for n in cluster.status()["nodes"]),
                     timeout=20, what="agents reconnected and applied the new generation")


def vnode_read_rate(cluster: LocalCluster, node_id: str, user: str, device, seconds: float = 3.0) -> float:
    """Bytes/s the kernel charged to `user`'s VNode on `device` over the next `seconds`."""
    def read_bytes() -> int:
        return node_vnodes(cluster, node_id).counters(vnode_name(user)).get(device, IoCounters()).read_bytes
    start, began = read_bytes(), time.monotonic()
    time.sleep(seconds)
    return (read_bytes() - start) / (time.monotonic() - began)


def test_an_agent_killed_with_sigkill_and_restarted_converges_without_duplicates(cluster):
    before = vnode_tree(cluster, "node1")
    cluster.stop_agent("node1", signal.SIGKILL)
    assert vnode_tree(cluster, "node1") == before, "a dead agent's VNodes keep enforcing"
    path, device = cluster.devices[0]
    reader = start_reader(path, ALICE_UID, "node1", seconds=60, warmup=0)  # born while no agent runs
    try:
        cluster.vnodectl("set-priority", "alice", "8")  # changed while the agent is down
        generation = cluster.status()["generation"]
        cluster.start_agent(cluster.nodes[0])
        cluster.wait_for(lambda: next(n for n in cluster.status()["nodes"] if n["node_id"] == "node1")
                         ["applied_generation"] == generation, timeout=20, what="restarted agent converged")
        after = vnode_tree(cluster, "node1")
        assert sorted(after) == sorted(before) == ["vnode-default", "vnode.alice", "vnode.bob"]
        assert after["vnode.alice"].split() == after["vnode.bob"].split()  # 8 vs 8: equal shares now
        cluster.wait_for(lambda: reader.pid in node_vnodes(cluster, "node1").members(vnode_name("alice")),
                         timeout=10, what="the reader born while the agent was down placed in alice's VNode")
        # Counted by the kernel from here on, however long the restart took.
        assert abs(vnode_read_rate(cluster, "node1", "alice", device) - 30 * MB) <= 3 * MB
    finally:
        reader.kill()
        reader.wait()


def _fast_moves_mounted(cluster, node_id: str) -> bool:
    mountpoint = f"/run/vnode-sync/{cluster.cgroup_name(node_id)}.fast-moves"
    return mountpoint in stale_mounts(mountpoint)


def test_agents_keep_fast_thread_moves_on_while_they_run_and_a_killed_ones_mount_is_cleaned(cluster):
    assert _fast_moves_mounted(cluster, "node1") and _fast_moves_mounted(cluster, "node2")
    cluster.stop_agent("node2")                      # SIGTERM: unmounts on the way out
    assert not _fast_moves_mounted(cluster, "node2")
    cluster.stop_agent("node1", signal.SIGKILL)      # no chance to unmount
    assert _fast_moves_mounted(cluster, "node1")
    subprocess.run([sys.executable, "-m", "vnode_sync.agents.main", "--config",
                    cluster.agent_config(cluster.nodes[0]), "--teardown"], check=True, capture_output=True)
    assert not _fast_moves_mounted(cluster, "node1")
