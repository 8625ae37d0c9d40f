"""End to end with a real HDFS under the work-conserving policy: the share a user leaves idle is
lent to the other within 3 s, and taken back within 2 s of the idle user reading again.
(benchmarks/fair_shares.py measures this and more against the static policy.)"""

import collections
import time
import uuid

import pytest

from tests.conftest import needs_java, needs_kernel, unique_name
from tests.e2e.test_hdfs import MB, MiB, NODE_BW, wait_until_every_user_reads_from_every_datanode
from testbed.hdfs_vnode_cluster import hdfs_vnode_cluster, vnode_usage, write_user_files
from testbed.local_cluster import LocalUser
from vnode_sync.kernel.backend import vnode_name

pytestmark = [needs_kernel, needs_java, pytest.mark.slow]


@pytest.fixture
def dn_users():
    """Two Unix users (the DataNode-side backend names users by their HDFS identity and uid)."""
    from tests.e2e.test_hdfs_datanode_throttle import free_uids
    from testbed.unix_users import unix_users
    names = [f"vsf{uuid.uuid4().hex[:6]}" for _ in range(2)]
    uids = free_uids(2, start=64_541)
    with unix_users(names, uids):
        yield LocalUser(names[0], uids[0], 8), LocalUser(names[1], uids[1], 4)


def seconds_until(counters, at_least: float, within: float, window: float = 0.5) -> tuple[float | None, dict]:
    """Seconds from now until every node's rate over the last `window` s (counters sampled every
    50 ms) was at least `at_least` bytes/s; None if not within `within` s. Also the last rates.
    A sliding window: disjoint 0.5-s windows would add up to 0.5 s to what is measured."""
    since = time.monotonic()
    samples: collections.deque = collections.deque([(since, counters())])
    rates: dict = {}
    while time.monotonic() - since < within:
        time.sleep(0.05)
        now, latest = time.monotonic(), counters()
        samples.append((now, latest))
        while len(samples) > 2 and now - samples[1][0] >= window:
            samples.popleft()
        start, first = samples[0]
        if now - start >= window:
            rates = {node: (latest[node] - first.get(node, 0)) / (now - start) for node in latest}
            if rates and all(r >= at_least for r in rates.values()):
                return now - since, rates
    return None, rates


def test_an_idle_users_share_is_lent_and_taken_back():
    alice, bob = LocalUser("alice", 64_531, 8), LocalUser("bob", 64_532, 4)
    # Idleness is seen after 0.5 s of reports and acted on at the next tick: 0.25 s reports, 0.5 s ticks.
    policy = {"allocation": "work-conserving", "control_seconds": 0.5}
    with hdfs_vnode_cluster(unique_name("fair"), [alice, bob], NODE_BW, policy=policy,
                            agent_settings={"report_seconds": 0.25},
                            before_agents=write_user_files([alice, bob], 640 * MiB)) as (hdfs, cluster):
        def usage_of(user: str) -> dict[str, int]:
            return {dn.id: vnode_usage(cluster, dn, vnode_name(user)).read_bytes for dn in hdfs.datanodes}
        readers = {u.name: [hdfs.start_read(f"/{u.name}/on-{dn.id}.bin", as_uid=u.uid, hdfs_user=u.name)
                            for dn in hdfs.datanodes] for u in (alice, bob)}
        try:
            wait_until_every_user_reads_from_every_datanode(cluster, hdfs, ["alice", "bob"])
            for reader in readers.pop("bob"):
                reader.kill()
                reader.wait()
            lent, rates = seconds_until(lambda: usage_of("alice"), 0.9 * NODE_BW, within=6)
            print(f"cgroup throttle: lent in {lent} s")
            assert lent is not None and lent <= 3.0, f"alice did not get 90% of each node within 3 s: {rates}"

            hdfs.evict_page_cache()   # bob's files again from the disk, not the page cache
            readers["bob"] = [hdfs.start_read(f"/bob/on-{dn.id}.bin", as_uid=bob.uid, hdfs_user="bob")
                              for dn in hdfs.datanodes]
            start = {dn.id: vnode_usage(cluster, dn, vnode_name("bob")).read_bytes for dn in hdfs.datanodes}
            cluster.wait_for(lambda: all(vnode_usage(cluster, dn, vnode_name("bob")).read_bytes > start[dn.id]
                                         for dn in hdfs.datanodes), timeout=60,
                             what="bob's readers reading again on both DataNodes", interval=0.02)
            share = NODE_BW * 4 / 12   # bob's weighted share of each node against alice
            reclaimed, rates = seconds_until(lambda: usage_of("bob"), 0.9 * share, within=5)
            print(f"cgroup throttle: reclaimed in {reclaimed} s")
            assert reclaimed is not None and reclaimed <= 2.0, f"bob not back to 90% of {share / MB} MB/s: {rates}"
        finally:
            for group in readers.values():
                for reader in group:
                    reader.kill()
                    reader.wait()


def test_through_the_datanode_side_backend_too(dn_users):
    """The same lending and reclaim with `backend: datanode-throttle` (no cgroup): the allocation is
    just the rates the agent gives the DataNode's throttler; rates are its own counters."""
    from tests.e2e.test_hdfs_datanode_throttle import counted
    alice, bob = dn_users
    policy = {"allocation": "work-conserving", "control_seconds": 0.5}
    with hdfs_vnode_cluster(unique_name("fairdn"), [alice, bob], NODE_BW, policy=policy,
                            backend="datanode-throttle", agent_settings={"report_seconds": 0.25},
                            before_agents=write_user_files([alice, bob], 256 * MiB)) as (hdfs, cluster):
        def counted_for(user: str) -> dict[str, int]:
            found = counted(hdfs, "read")
            return {dn.id: found.get((dn.id, user), 0) for dn in hdfs.datanodes}

        def per_node(user: str, seconds: float) -> dict[str, float]:
            before, t0 = counted_for(user), time.monotonic()
            time.sleep(seconds)
            after, t1 = counted_for(user), time.monotonic()
            return {dn: (after[dn] - before[dn]) / (t1 - t0) for dn in after}

        def start(user):   # re-reads for 120 s: the throttler paces transfers, page-cache hits too
            return [hdfs.start_read(f"/{user.name}/on-{dn.id}.bin", as_uid=user.uid, hdfs_user=user.name,
                                    seconds=120) for dn in hdfs.datanodes]
        readers = {u.name: start(u) for u in (alice, bob)}
        try:
            cluster.wait_for(lambda: all(v > 0 for u in (alice, bob) for v in per_node(u.name, 0.2).values()),
                             timeout=60, what="both users reading from both DataNodes")
            time.sleep(2)
            for reader in readers.pop(bob.name):
                reader.kill()
                reader.wait()
            lent, rates = seconds_until(lambda: counted_for(alice.name), 0.9 * NODE_BW, within=6)
            print(f"datanode-throttle: lent in {lent} s")
            assert lent is not None and lent <= 3.0, f"alice did not get 90% of each node within 3 s: {rates}"
            readers[bob.name] = start(bob)
            cluster.wait_for(lambda: all(v > 0 for v in per_node(bob.name, 0.05).values()), timeout=60,
                             what="bob reading again on both DataNodes", interval=0.01)
            reclaimed, rates = seconds_until(lambda: counted_for(bob.name), 0.9 * NODE_BW * 4 / 12, within=5)
            print(f"datanode-throttle: reclaimed in {reclaimed} s")
            assert reclaimed is not None and reclaimed <= 2.0, f"bob not back to 90% of his share: {rates}"
        finally:
            for group in readers.values():
                for reader in group:
                    reader.kill()
                    reader.wait()
