"""Secure HDFS end to end (issue 27, item 1): a KDC of the run's own (MIT Kerberos from Debian),
`hadoop.security.authentication=kerberos`, block access tokens, SASL `privacy` (AES/CTR) on the data
transfer protocol, SPNEGO on HTTP; two DataNodes with vnode-sync's DataNode-side throttler,
replication 2; two principals, alice@REALM and bob@REALM, at priorities 4 and 8. The secure WebHDFS
checks run on every supported Hadoop line (on the default line, on the cluster of the ~60-s split test,
which runs there only).

Every split is measured twice: from the client side (the bytes `hdfs dfs -put -` took from the test
and `hdfs dfs -cat` gave it, no vnode-sync counter involved) and from the throttlers' counters on
each DataNode. The assertions are on the split (each user's part of what a DataNode passed), not
on how the throttler reaches it: the secure DataNodes are CPU-bound here (~25 MB/s each with both
users writing, less when loaded), so the node bandwidth is set well below that."""

import json
import os
import subprocess
import time

import pytest

from tests.conftest import hadoop_lines, needs_java, needs_kernel, unique_name
from testbed.hdfs_cluster.kerberos import SERVICE_HOST
from testbed.hdfs_cluster.metered import MeteredCat, MeteredPut, counted, window
from testbed.hdfs_vnode_cluster import hdfs_vnode_cluster
from testbed.kdc import kdc_processes, missing_tools
from testbed.local_cluster import LocalUser
from testbed.share_watch import assertion_missed, first_window_that_holds
from testbed.unix_users import local_users
from vnode_sync.datanode.channel import ThrottleChannel

pytestmark = [needs_kernel, needs_java, pytest.mark.slow,
              pytest.mark.skipif(bool(missing_tools()), reason=f"needs MIT Kerberos ({', '.join(missing_tools())}); "
                                                                "run scripts/setup.d/hdfs.sh")]

MB = 1_000_000
MiB = 1 << 20
NODE_BW = 12 * MB
READ_FILE = 32 * MiB
TOLERANCE = 0.10


@pytest.fixture
def users():
    """Unix users with passwd entries: a Kerberos client's JVM needs its uid's name."""
    with local_users("vsk", (4, 8), first_uid=64_561) as made:
        yield made


def channels(hdfs) -> dict[str, ThrottleChannel]:
    return {dn.id: ThrottleChannel(hdfs.throttle_socket(dn)) for dn in hdfs.datanodes}


def assert_split(rates: dict[str, float], priorities: dict[str, int], where: str) -> None:
    """Each user's part of the total is its priority's part, within 10 %."""
    total = sum(rates[u] for u in priorities)
    assert total > 0.3 * NODE_BW, (where, rates)  # the traffic flowed
    for user, priority in priorities.items():
        share = priority / sum(priorities.values())
        assert rates[user] == pytest.approx(share * total, rel=TOLERANCE), (where, user, share, rates)


def flip(cluster, hdfs, user: LocalUser, priority: int) -> None:
    """Set `user`'s priority; every DataNode's throttler must have it within 3 s."""
    generations = {dn: c.stats().generation for dn, c in channels(hdfs).items()}
    cluster.vnodectl("set-priority", user.name, str(priority))
    cluster.wait_for(lambda: all(c.stats().generation > generations[dn] for dn, c in channels(hdfs).items()),
                     timeout=3, what="the flip in every DataNode within 3 s")
    time.sleep(1.0)  # what was booked at the old rates drains


def wait_for_flow(cluster, hdfs, meters: dict, users: list[str], direction: str) -> None:
    def flowing():
        now = counted(hdfs, direction)
        return (all(m.bytes > 0 for m in meters.values())
                and all(now.get((dn.id, u), 0) > 0 for dn in hdfs.datanodes for u in users))
    cluster.wait_for(flowing, timeout=60, what=f"{direction}s of every user on every DataNode")
    time.sleep(2.0)  # past the JVMs' start and the first packets' burst


def write_read_files(users: list[LocalUser]):
    """Before vnode-sync: each user's /<user>/on-<dn>.bin, one replica, on that DataNode only, so that
    each `-cat` reads from one known DataNode and both users read on every DataNode at once."""
    def write(hdfs) -> None:
        for user in users:
            for dn in hdfs.datanodes:
                hdfs.write_file(f"/{user.name}/on-{dn.id}.bin", READ_FILE, as_uid=user.uid, hdfs_user=user.name,
                                replication=1, on_datanode=dn)
    return write


def put_split(hdfs, names: list[str], priorities: dict[str, int]):
    def check(measured: tuple[dict, dict]) -> None:
        clients, nodes = measured
        assert_split(clients, priorities, "put, client side")
        for dn in hdfs.datanodes:  # replication 2: each DataNode receives every byte of both users
            on_dn = {u: nodes[(dn.id, u)] for u in names}
            assert_split(on_dn, priorities, f"put, {dn.id}'s throttler")
            for u in names:
                assert on_dn[u] == pytest.approx(clients[u], rel=TOLERANCE), (dn.id, u, clients, on_dn)
    return check


def cat_split(hdfs, names: list[str], priorities: dict[str, int]):
    def check(measured: tuple[dict, dict]) -> None:
        clients, nodes = measured
        for dn in hdfs.datanodes:  # each -cat reads one DataNode's file: its rate is that DataNode's
            assert_split({u: clients[(u, dn.id)] for u in names}, priorities, f"cat from {dn.id}, client side")
            assert_split({u: nodes[(dn.id, u)] for u in names}, priorities, f"cat, {dn.id}'s throttler")
    return check


def test_secure_puts_and_cats_split_by_priority_on_every_datanode_and_follow_a_flip(users):
    alice, bob = users
    names = [alice.name, bob.name]
    with hdfs_vnode_cluster(unique_name("krb"), [alice, bob], NODE_BW, backend="datanode-throttle", replication=2,
                            kerberos=True, disk_mb=2048, before_agents=write_read_files([alice, bob])) as (hdfs, cluster):
        cluster.wait_for(lambda: all(set(c.stats().users) >= set(names) for c in channels(hdfs).values()),
                         timeout=30, what="the agents' rates in every DataNode")
        # The probe and the read files were written before vnode-sync started: the default's.
        default_before = {dn: c.stats().default for dn, c in channels(hdfs).items()}

        puts = {u.name: MeteredPut(hdfs, f"/{u.name}/put.bin", as_uid=u.uid, hdfs_user=u.name) for u in users}
        try:
            wait_for_flow(cluster, hdfs, puts, names, "write")
            # One flip, the cats' below: a flip is the coordinator's and the agents' work, the same with Kerberos.
            first_window_that_holds(lambda: window(hdfs, puts, "write", 5),
                                    assertion_missed(put_split(hdfs, names, {alice.name: 4, bob.name: 8})), "puts at 4:8")
        finally:
            for put in puts.values():
                put.finish()

        hdfs.evict_page_cache()
        cats = {(u.name, dn.id): MeteredCat(hdfs, [f"/{u.name}/on-{dn.id}.bin"] * 24, as_uid=u.uid,
                                            hdfs_user=u.name)
                for u in users for dn in hdfs.datanodes}
        try:
            wait_for_flow(cluster, hdfs, cats, names, "read")
            first_window_that_holds(lambda: window(hdfs, cats, "read", 5),
                                    assertion_missed(cat_split(hdfs, names, {alice.name: 4, bob.name: 8})), "cats at 4:8")
            flip(cluster, hdfs, alice, 8)
            first_window_that_holds(lambda: window(hdfs, cats, "read", 3),
                                    assertion_missed(cat_split(hdfs, names, {alice.name: 8, bob.name: 8})), "cats after the flip to 8:8")
            assert all(cat.running for cat in cats.values())
        finally:
            for cat in cats.values():
                cat.stop()

        # Charged to the principals' short names (auth_to_local), never to the default VNode or a principal.
        for dn, channel in channels(hdfs).items():
            stats = channel.stats()
            assert not any("@" in user or "/" in user for user in stats.users), stats.users
            assert stats.default == default_before[dn], (stats.default, default_before[dn])
        with open(hdfs.namenode.audit_log) as f:
            audit = f.read()
        assert f"ugi={alice.name}@{hdfs.kerberos.realm} (auth:KERBEROS)" in audit or \
            f"ugi={alice.name} (auth:KERBEROS)" in audit, audit[-2000:]
        # The secure WebHDFS test's checks on the default line, on this cluster.
        assert_webhdfs_answers_only_spnego_and_charges_the_principal(hdfs, alice, bob)
        kdc_dir = hdfs.kerberos.kdc.directory
        assert kdc_processes(kdc_dir)
    # The realm's KDC, database and keytabs went with the cluster.
    assert not kdc_processes(kdc_dir) and not os.path.exists(hdfs.workdir)


def assert_webhdfs_answers_only_spnego_and_charges_the_principal(hdfs, alice: LocalUser, bob: LocalUser) -> None:
    """WebHDFS refuses a request without SPNEGO whatever user.name it claims; alice's write through it (the
    NameNode under SPNEGO, then the DataNode with the delegation token it gave) is hers, charged to her on dn0."""
    size = 8 * MiB
    url = f"http://{SERVICE_HOST}:{hdfs.namenode.http_port}/webhdfs/v1/web-{alice.name}.bin"
    anonymous = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                                f"{url}?op=GETFILESTATUS&user.name={alice.name}"], capture_output=True, text=True)
    assert anonymous.stdout == "401", anonymous  # no SPNEGO: refused, whatever user.name claims

    data = bytes(range(256)) * (size // 256)
    before = counted(hdfs, "write")
    # WebHDFS's two steps: the NameNode (SPNEGO) answers where to write, with a delegation token in
    # the DataNode's URL; the bytes go there.
    asked = subprocess.run(["curl", "-sS", "-f", "-4", "--negotiate", "-u", ":", "-X", "PUT", "-o", "/dev/null",
                            "-w", "%{redirect_url}", f"{url}?op=CREATE&overwrite=true"], capture_output=True,
                           text=True, env=os.environ | hdfs.kerberos.client_env(alice.name))
    assert asked.returncode == 0 and "delegation=" in asked.stdout, asked
    sent = subprocess.run(["curl", "-sS", "-f", "-X", "PUT", "--data-binary", "@-", "-H",
                           "Content-Type: application/octet-stream", asked.stdout], input=data, capture_output=True)
    assert sent.returncode == 0, sent.stderr
    status = json.loads(hdfs.kerberos.curl(f"{url}?op=GETFILESTATUS", user=alice.name))["FileStatus"]
    assert status["owner"] == alice.name and status["length"] == size, status
    grew = {k: v - before.get(k, 0) for k, v in counted(hdfs, "write").items()}
    assert grew.get(("dn0", alice.name), 0) >= size and grew.get(("dn0", bob.name), 0) == 0, grew


@pytest.mark.parametrize("hadoop_line", hadoop_lines(but_the_default=True))
def test_webhdfs_answers_only_spnego_and_charges_the_principal(users, hadoop_line):
    """On each Hadoop line but the default, whose split test makes these checks on its cluster."""
    alice, bob = users
    with hdfs_vnode_cluster(unique_name("krb"), [alice, bob], NODE_BW, datanodes=1, backend="datanode-throttle",
                            kerberos=True, hadoop_version=hadoop_line) as (hdfs, cluster):
        channel = channels(hdfs)["dn0"]
        cluster.wait_for(lambda: alice.name in channel.stats().users, timeout=30, what="the agent's rates")
        assert_webhdfs_answers_only_spnego_and_charges_the_principal(hdfs, alice, bob)
        kdc_dir = hdfs.kerberos.kdc.directory
        assert kdc_processes(kdc_dir)
    # The realm's KDC, database and keytabs went with the cluster.
    assert not kdc_processes(kdc_dir) and not os.path.exists(hdfs.workdir)
