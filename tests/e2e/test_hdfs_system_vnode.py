"""DataNode-internal traffic is a class of its own (issue 27, item 5): a real HDFS of 3 DataNodes with
the DataNode-side throttler, replication 2, users alice (priority 4) and bob (8) and the `system` VNode
(4, an admin-active user like any other). A DataNode is decommissioned while both users read: the
re-replication that the NameNode orders (DataTransfer on the source, writeBlock with an empty client
name on the target) is charged to `system` and held to its share, and the users' split holds.
Static allocation: every class is capped at its priority's part of the node bandwidth."""

import json
import time
import uuid

import pytest

from tests.conftest import needs_java, needs_kernel, unique_name
from testbed.hdfs_cluster.metered import MeteredCat, counted, window
from testbed.hdfs_vnode_cluster import hdfs_vnode_cluster
from testbed.local_cluster import LocalUser
from testbed.share_watch import first_window_that_holds
from testbed.unix_users import free_uids, unix_users
from vnode_sync.datanode.channel import ThrottleChannel

pytestmark = [needs_kernel, needs_java, pytest.mark.slow]

MB = 1_000_000
MiB = 1 << 20
NODE_BW = 30 * MB
READ_FILE = 32 * MiB
MOVED_FILES, MOVED_FILE = 4, 64 * MiB   # on the leaving DataNode: what re-replication copies
SYSTEM = "system"


def users_split_missed(staying, caps: dict, names: list[str], clients: dict, reads: dict) -> list:
    """Where the users' split does not hold (each at its cap within 10 %) on a DataNode they read
    from, client side or throttler side."""
    return [(dn.id, user, side, rates[key])
            for dn in staying for user in names
            for side, rates, key in (("client", clients, (user, dn.id)), ("throttler", reads, (dn.id, user)))
            if rates[key] != pytest.approx(caps[user], rel=0.10)]


@pytest.fixture
def users():
    names = [f"vsy{uuid.uuid4().hex[:6]}" for _ in range(2)]
    uids = free_uids(3, start=64_631)
    with unix_users(names, uids[:2]):
        yield LocalUser(names[0], uids[0], 4), LocalUser(names[1], uids[1], 8), LocalUser(SYSTEM, uids[2], 4)


def test_a_decommissioned_datanodes_re_replication_is_charged_to_system_and_held_while_users_split(users):
    alice, bob, system = users
    names = [alice.name, bob.name]

    def write(hdfs) -> None:
        staying = hdfs.datanodes[:2]
        for user in (alice, bob):
            for dn in staying:
                hdfs.write_file(f"/{user.name}/on-{dn.id}.bin", READ_FILE, as_uid=user.uid, hdfs_user=user.name,
                                replication=1, on_datanode=dn)
        for i in range(MOVED_FILES):
            hdfs.write_file(f"/data/{i}.bin", MOVED_FILE, as_uid=alice.uid, hdfs_user=alice.name, replication=2,
                            on_datanode=hdfs.datanodes[2])

    with hdfs_vnode_cluster(unique_name("sysvnode"), [alice, bob, system], NODE_BW, datanodes=3,
                            backend="datanode-throttle", replication=2, disk_mb=1024,
                            before_agents=write) as (hdfs, cluster):
        channels = {dn.id: ThrottleChannel(hdfs.throttle_socket(dn)) for dn in hdfs.datanodes}
        cluster.wait_for(lambda: all(set(c.stats().users) >= {*names, SYSTEM} for c in channels.values()),
                         timeout=30, what="the agents' shares")
        status = cluster.status()
        caps = {u["name"]: u["nodes"][0]["target_read_bps"] for u in status["users"]}
        assert caps[SYSTEM] == pytest.approx(caps[alice.name]) and caps[bob.name] == pytest.approx(2 * caps[alice.name])

        staying = hdfs.datanodes[:2]
        cats = {(u.name, dn.id): MeteredCat(hdfs, [f"/{u.name}/on-{dn.id}.bin"] * 100, as_uid=u.uid,
                                            hdfs_user=u.name) for u in (alice, bob) for dn in staying}
        try:
            cluster.wait_for(lambda: all(c.bytes > 0 for c in cats.values()), timeout=60, what="every reader")
            time.sleep(2)
            hdfs.decommission([hdfs.datanodes[2]])
            moved = lambda: sum(v for (_, u), v in counted(hdfs, "write").items() if u == SYSTEM)  # noqa: E731
            start = moved()
            cluster.wait_for(lambda: moved() > start + 8 * MiB, timeout=60, what="re-replication charged to system")
            # All the windows fall while re-replicating.
            def measure():
                written, t0 = counted(hdfs, "write"), time.monotonic()
                clients, reads = window(hdfs, cats, "read", 5)
                elapsed = time.monotonic() - t0
                writes = {k: (v - written.get(k, 0)) / elapsed for k, v in counted(hdfs, "write").items()}
                assert hdfs.admin_states()[hdfs.datanodes[2].id] == "Decommission In Progress"
                assert all(c.running for c in cats.values())
                return clients, reads, writes
            clients, reads, writes = first_window_that_holds(
                measure, lambda m: users_split_missed(staying, caps, names, *m[:2]), "the users' split")
        finally:
            for cat in cats.values():
                cat.stop()

        # Re-replication was charged to system (sent from one DataNode, received by another), and held
        # to system's share on every DataNode in each direction.
        print(f"system: read {[round(reads.get((dn.id, SYSTEM), 0) / MB, 1) for dn in hdfs.datanodes]} MB/s, "
              f"written {[round(writes.get((dn.id, SYSTEM), 0) / MB, 1) for dn in hdfs.datanodes]} MB/s, "
              f"cap {caps[SYSTEM] / MB:.1f}; users {({k: round(v / MB, 1) for k, v in clients.items()})}")
        assert sum(writes.get((dn.id, SYSTEM), 0) for dn in hdfs.datanodes) > 0.2 * caps[SYSTEM], writes
        assert sum(reads.get((dn.id, SYSTEM), 0) for dn in hdfs.datanodes) > 0.2 * caps[SYSTEM], reads
        for dn in hdfs.datanodes:
            assert reads.get((dn.id, SYSTEM), 0) <= 1.1 * caps[SYSTEM], (dn.id, reads)
            assert writes.get((dn.id, SYSTEM), 0) <= 1.1 * caps[SYSTEM], (dn.id, writes)

        top = json.loads(cluster.vnodectl("top", "--json").stdout)
        assert SYSTEM in {u["user"] for u in top["users"]}, top
        assert SYSTEM in cluster.vnodectl("status").stdout
