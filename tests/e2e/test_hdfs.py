"""End to end with a real HDFS: DataNode handler threads captured into users' VNodes,
priorities enforced on the DataNodes' disks, a priority flip followed within 3 s, and
identity from a compute agent for clients on another (network-namespace) host."""

import contextlib
import os
import pwd
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
import yaml

from tests.conftest import needs_java, needs_kernel, unique_name
from vnode_sync.kernel.backend import HostCgroups, vnode_name
from testbed.compute_host import ComputeHost
from testbed.hdfs_vnode_cluster import hdfs_vnode_cluster, placement_report, vnode_usage, write_user_files
from testbed.local_cluster import LocalCluster, LocalUser
from testbed.processes import stop_process
from testbed.unix_users import unix_users

pytestmark = [needs_kernel, needs_java, pytest.mark.slow]

MB = 1_000_000
MiB = 1 << 20
NODE_BW = 60 * MB


def vnode_file(cluster: LocalCluster, node_id: str, user: str, filename: str) -> str:
    return os.path.join(HostCgroups().blkio_v1, cluster.cgroup_name(node_id), f"vnode.{user}", filename)


def vnode_read_bytes(cluster: LocalCluster, hdfs, user: str) -> int:
    """What the kernel charged to `user`'s VNodes on the DataNodes' own disks."""
    return sum(vnode_usage(cluster, dn, vnode_name(user)).read_bytes for dn in hdfs.datanodes)


def rates(cluster: LocalCluster, hdfs, users: list[str], seconds: float) -> dict[str, float]:
    start = {u: vnode_read_bytes(cluster, hdfs, u) for u in users}
    t0 = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - t0
    return {u: (vnode_read_bytes(cluster, hdfs, u) - start[u]) / elapsed for u in users}


def wait_until_every_user_reads_from_every_datanode(cluster: LocalCluster, hdfs, users: list[str],
                                                    readers=()) -> None:
    """Reader JVMs take seconds to start on a loaded 2-core machine: wait for their handlers."""
    def placed_everywhere():
        for dn in hdfs.datanodes:
            for user in users:
                with open(vnode_file(cluster, dn.id, user, "tasks")) as f:
                    if not f.read().split():
                        return False
        return True
    cluster.wait_for(placed_everywhere, timeout=60, what="a DataXceiver of every user in its VNode on every DataNode",
                     explain=lambda: placement_report(cluster, hdfs, readers))
    time.sleep(1.0)


@contextlib.contextmanager
def readers_of(hdfs, users: list[LocalUser], datanodes=None) -> Iterator[list[subprocess.Popen]]:
    """Each user reads its file on each DataNode (`datanodes`, default all) through Hadoop's client;
    the readers are killed on the way out."""
    readers = [hdfs.start_read(f"/{u.name}/on-{dn.id}.bin", as_uid=u.uid, hdfs_user=u.name)
               for u in users for dn in (datanodes or hdfs.datanodes)]
    try:
        yield readers
    finally:
        for r in readers:
            r.kill()
            r.wait()


def assert_split(measured: dict[str, float], expected: dict[str, float]) -> None:
    for user, rate in expected.items():
        assert measured[user] == pytest.approx(rate, rel=0.10), measured


def test_two_users_get_their_priority_shares_of_both_datanodes_and_follow_a_flip():
    alice, bob = LocalUser("alice", 64_501, 4), LocalUser("bob", 64_502, 8)
    with hdfs_vnode_cluster(unique_name("hdfs"), [alice, bob], NODE_BW,
                            before_agents=write_user_files([alice, bob], 768 * MiB)) as (hdfs, cluster):
        with readers_of(hdfs, [alice, bob]) as readers:
            wait_until_every_user_reads_from_every_datanode(cluster, hdfs, ["alice", "bob"], readers)
            assert_split(rates(cluster, hdfs, ["alice", "bob"], 6), {"alice": 2 * 20 * MB, "bob": 2 * 40 * MB})
            cluster.vnodectl("set-priority", "alice", "8")
            cluster.vnodectl("set-priority", "bob", "4")
            flipped = time.monotonic()
            followed = None
            while time.monotonic() - flipped < 6:
                now = rates(cluster, hdfs, ["alice", "bob"], 0.5)
                if now["alice"] >= 0.9 * 80 * MB and now["bob"] <= 1.1 * 40 * MB:
                    followed = time.monotonic() - flipped
                    break
            assert followed is not None and followed <= 3.0, f"rates did not follow within 3 s: {now}"
            assert_split(rates(cluster, hdfs, ["alice", "bob"], 3), {"alice": 80 * MB, "bob": 40 * MB})
            status = {u["name"]: u for u in cluster.status()["users"]}
            assert {n["node_id"]: n["target_read_bps"] for n in status["alice"]["nodes"]} == \
                {"dn0": 40 * MB, "dn1": 40 * MB}


def test_a_datanode_that_loads_libhadoop_reads_ahead_outside_every_vnode_and_its_agent_says_so():
    """Production DataNodes load libhadoop, and then read ahead from a thread pool that serves every
    user: most of a reader's disk reads are charged to no VNode. The agent names it (vnodectl nodes)."""
    alice, bob = LocalUser("alice", 64_501, 4), LocalUser("bob", 64_502, 8)
    with hdfs_vnode_cluster(unique_name("hdfs-native"), [alice, bob], NODE_BW, datanodes=1, native=True,
                            before_agents=write_user_files([alice, bob], 256 * MiB)) as (hdfs, cluster):
        def said():
            (node,) = cluster.status()["nodes"]
            return node["not_enforcing"] if not node["enforcing"] else None
        with readers_of(hdfs, [alice, bob]):
            reason = cluster.wait_for(said, timeout=60, what="the agent saying the DataNode reads ahead in a pool")
        assert f"DataNode {hdfs.datanodes[0].pid} reads ahead in a thread pool" in reason
        assert "dfs.datanode.readahead.bytes to 0" in reason


def test_with_libhadoop_and_the_datanodes_read_ahead_off_reads_split_by_priority():
    """The remedy the agent names: the kernel then reads ahead in each handler's thread, charged to its user."""
    alice, bob = LocalUser("alice", 64_501, 4), LocalUser("bob", 64_502, 8)
    with hdfs_vnode_cluster(unique_name("hdfs-native"), [alice, bob], NODE_BW, native=True,
                            hdfs_site={"dfs.datanode.readahead.bytes": "0"},
                            before_agents=write_user_files([alice, bob], 512 * MiB)) as (hdfs, cluster):
        with readers_of(hdfs, [alice, bob]) as readers:
            wait_until_every_user_reads_from_every_datanode(cluster, hdfs, ["alice", "bob"], readers)
            assert_split(rates(cluster, hdfs, ["alice", "bob"], 5), {"alice": 2 * 20 * MB, "bob": 2 * 40 * MB})
            assert all(n["enforcing"] for n in cluster.status()["nodes"]), cluster.status()["nodes"]


def test_clients_on_another_host_are_identified_by_the_compute_agent():
    """Readers run in their own network namespace: the storage side cannot see their sockets'
    owners, so only the compute agent's report can tell whose each DataXceiver is."""
    name = unique_name("netns")
    uids = [64_521, 64_522]
    names = [f"vst{uuid.uuid4().hex[:6]}" for _ in uids]
    alice, bob = LocalUser(names[0], uids[0], 4), LocalUser(names[1], uids[1], 8)
    with unix_users(names, uids):
        # One DataNode: the readers read there only, as the compute agent's storage endpoint names it (a second
        # held files nobody read: 3 s of writes).
        with ComputeHost(name) as host, hdfs_vnode_cluster(
                name, [alice, bob], NODE_BW, host=host.host_address, datanodes=1,
                before_agents=write_user_files([alice, bob], 384 * MiB)) as (hdfs, cluster):
            dn = hdfs.datanodes[0]
            config = os.path.join(cluster.workdir, "compute.yaml")
            with open(config, "w") as f:
                yaml.safe_dump({"node_id": "compute1", "role": "compute", "coordinator": cluster.address,
                                "cgroup_name": f"{name}.compute1", "teardown_on_exit": True, "insecure": True,
                                "compute": {"storage_endpoints": [f"{dn.host}:{dn.ports.data}"]}}, f)
            agent = host.popen([sys.executable, "-m", "vnode_sync.agents.main", "--config", config],
                               stderr=open(os.path.join(cluster.workdir, "compute.log"), "wb"))
            readers = []
            try:
                for user in (alice, bob):
                    entry = pwd.getpwnam(user.name)
                    readers.append(host.popen(
                        hdfs.client_command("VnodeSyncHdfsStream", "read", hdfs.namenode_uri,
                                            f"/{user.name}/on-{dn.id}.bin", "0"),
                        uid=entry.pw_uid, gid=entry.pw_gid, cwd="/",
                        env=dict(os.environ, HADOOP_USER_NAME=user.name),
                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
                cluster.wait_for(lambda: all(open(vnode_file(cluster, dn.id, u.name, "tasks")).read().split()
                                             for u in (alice, bob)), timeout=60,
                                 what="each netns reader's DataXceiver in its user's VNode",
                                 explain=lambda: placement_report(cluster, hdfs, readers))
                time.sleep(1.0)
                measured = rates(cluster, hdfs, [alice.name, bob.name], 4)
                assert measured[alice.name] == pytest.approx(20 * MB, rel=0.10), measured
                assert measured[bob.name] == pytest.approx(40 * MB, rel=0.10), measured
            finally:
                for r in readers:
                    if r.poll() is None:
                        r.kill()
                        r.wait()
                stop_process(agent)
