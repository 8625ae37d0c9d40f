"""Short-circuit local reads stay governed (issue 27, item 4): a real HDFS with
`dfs.client.read.shortcircuit=true` and a domain socket, the DataNode-side throttler, work-conserving
shares (weights, no ceilings), two local users at priorities 4 and 8.

The Java agent hands out a block's file descriptors only while the user's share cannot bind (no
ceiling, nobody else reading through the DataNode, no other recent grant), and revokes grants when
another user's read starts; a refused client reads that block through the DataNode, where the
scheduler holds it. So a user alone keeps short-circuit speed, and two users at once are split by
their weights, the bytes counted by the throttler."""

import pytest

from tests.conftest import needs_java, needs_kernel, unique_name
from testbed.hdfs_cluster import has_native
from testbed.hdfs_cluster.metered import MeteredCat, counted, window
from testbed.hdfs_vnode_cluster import hdfs_vnode_cluster
from testbed.unix_users import local_users
from vnode_sync.datanode.channel import ThrottleChannel

pytestmark = [needs_kernel, needs_java, pytest.mark.slow,
              pytest.mark.skipif(not has_native(), reason="needs libhadoop.so for the domain socket "
                                                          "(deploy/hadoop/native.txt); run scripts/setup.d/hdfs.sh")]

MB = 1_000_000
MiB = 1 << 20
NODE_BW = 40 * MB
FILE = 64 * MiB
SCR_OFF = ("-Ddfs.client.read.shortcircuit=false",)


@pytest.fixture
def users():
    with local_users("vss", (4, 8), first_uid=64_611) as made:
        yield made


def granted(hdfs, success: bool) -> int:
    """Short-circuit requests the DataNode answered (its clienttrace log), granted or refused."""
    with open(hdfs.datanodes[0].log) as f:
        return sum(1 for line in f if "op: REQUEST_SHORT_CIRCUIT_FDS" in line
                   and f"success: {str(success).lower()}" in line)


def test_a_lone_local_reader_keeps_short_circuit_and_two_at_once_are_split_through_the_datanode(users):
    alice, bob = users
    names = [alice.name, bob.name]

    def write(hdfs) -> None:
        for user in users:
            hdfs.write_file(f"/{user.name}/f.bin", FILE, as_uid=user.uid, hdfs_user=user.name)

    with hdfs_vnode_cluster(unique_name("scr"), [alice, bob], NODE_BW, datanodes=1, backend="datanode-throttle",
                            short_circuit=True, before_agents=write,
                            policy={"sharing": "work-conserving"}) as (hdfs, cluster):
        channel = ThrottleChannel(hdfs.throttle_socket(hdfs.datanodes[0]))
        cluster.wait_for(lambda: set(channel.stats().users) >= set(names),
                         timeout=30, what="the agent's shares")

        # Alone: bob reads his file four times with short-circuit reads, then once more without.
        before, grants = counted(hdfs, "read").get(("dn0", bob.name), 0), granted(hdfs, True)
        scr_rate = MeteredCat(hdfs, [f"/{bob.name}/f.bin"] * 4, as_uid=bob.uid, hdfs_user=bob.name).finish()
        through = counted(hdfs, "read").get(("dn0", bob.name), 0) - before
        assert granted(hdfs, True) > grants
        assert through < 0.1 * 4 * FILE, through  # the bytes did not pass the DataNode
        before = counted(hdfs, "read").get(("dn0", bob.name), 0)
        tcp_rate = MeteredCat(hdfs, [f"/{bob.name}/f.bin"], as_uid=bob.uid, hdfs_user=bob.name,
                              options=SCR_OFF).finish()
        assert counted(hdfs, "read")[("dn0", bob.name)] - before >= FILE
        print(f"bob alone: short-circuit {scr_rate / MB:.0f} MB/s, through the DataNode {tcp_rate / MB:.0f} MB/s")

        # Both at once: short-circuit is refused (or revoked) and the DataNode splits them 1:2.
        refusals = granted(hdfs, False)
        cats = {u.name: MeteredCat(hdfs, [f"/{u.name}/f.bin"] * 200, as_uid=u.uid, hdfs_user=u.name) for u in users}
        try:
            cluster.wait_for(lambda: all(c.bytes > 2 * FILE for c in cats.values()), timeout=60,
                             what="both readers past their first blocks")
            clients, nodes = window(hdfs, cats, "read", 5)
            assert all(c.running for c in cats.values())
        finally:
            for cat in cats.values():
                cat.stop()
        assert granted(hdfs, False) > refusals
        total = sum(clients.values())
        print(f"both: {alice.name} {clients[alice.name] / MB:.0f} MB/s, {bob.name} {clients[bob.name] / MB:.0f} MB/s")
        for user, share in ((alice.name, 1 / 3), (bob.name, 2 / 3)):
            assert clients[user] == pytest.approx(share * total, rel=0.10), (user, clients, nodes)
            # What the client got passed the DataNode's scheduler (within 10 %): no short-circuit bytes.
            assert nodes[("dn0", user)] == pytest.approx(clients[user], rel=0.10), (user, clients, nodes)
