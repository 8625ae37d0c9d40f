"""The DataNode Java agent (agents/datanode-throttle) inside real DataNodes: per-user rates over its socket,
bytes charged to the right user, a write cap held, bad input refused, reads served without the socket."""

import os
import socket

import pytest

from tests.conftest import REPO, needs_java, needs_kernel, unique_name
from testbed.hdfs_cluster import HdfsCluster, hadoop_version, has_jars
from vnode_sync.datanode.channel import OPTIONAL_HOOKS, REQUIRED_HOOKS, ThrottleChannel

JAR = os.path.join(REPO, "agents", "datanode-throttle", "target", "vnode-sync-datanode-throttle.jar")

pytestmark = [
    needs_java, needs_kernel, pytest.mark.slow,
    pytest.mark.skipif(not has_jars(), reason=f"needs the Hadoop {hadoop_version()} jars; run scripts/setup.d/hdfs.sh"),
    pytest.mark.skipif(not os.path.exists(JAR), reason=f"needs {JAR}; run scripts/setup.d/datanode-throttle.sh"),
]

MiB = 1 << 20
MB = 1_000_000
ALICE_UID, BOB_UID = 64_301, 64_302  # no passwd entries needed by the testbed's client
WRITE_CAP = 10 * MB


def talk(path: str, request: str) -> list[str]:
    """One request on the agent's socket; the reply's lines up to and including its OK/ERR line."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(path)
        s.sendall(request.encode())
        data = b""
        while not data.endswith(b"\n") or not data.splitlines()[-1].startswith((b"OK", b"ERR")):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return data.decode().splitlines()


COUNTERS = ("read_bytes", "write_bytes", "read_wait_ns", "write_wait_ns", "read_ops", "write_ops")


def fields(line: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in line.split()[1:] if "=" in part)


def stats(path: str) -> dict[str, list[int]]:
    """name -> [read_bytes, write_bytes, read_wait_ns, write_wait_ns, read_ops, write_ops]."""
    lines = talk(path, "STATS\n")
    assert lines[-1].startswith("OK generation="), lines
    out = {}
    for line in lines[:-1]:
        kind, f = line.split()[0], fields(line)
        if kind == "DEFAULT":
            out["DEFAULT"] = [int(f.get(c, 0)) for c in COUNTERS]
        elif kind == "USER":
            out[f["name"]] = [int(f.get(c, 0)) for c in COUNTERS]
    return out


def apply(path: str, generation: int, *lines: str) -> list[str]:
    return talk(path, f"APPLY generation={generation}\n" + "".join(line + "\n" for line in lines) + "END\n")


def ceilings(read: int, write: int) -> str:
    return f"read_ceiling_bps={read} write_ceiling_bps={write}"


def agent_cluster(tokens: bool, datanodes: int, replication: int) -> HdfsCluster:
    site = {"dfs.block.access.token.enable": "true"} if tokens else {}
    # 1 GiB disks: until a DataNode reports a block, the NameNode counts a whole block (128 MiB) against
    # its space per write scheduled on it, and a DataNode short of that is excluded from pipelines.
    return HdfsCluster(unique_name("dnt"), datanodes=datanodes, disk_mb=1024, replication=replication,
                       hdfs_site=site, datanode_throttle=JAR)


@pytest.fixture(scope="module")
def tokens_on():
    cluster = agent_cluster(tokens=True, datanodes=2, replication=2)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def test_socket_is_private_and_agent_says_it_has_no_shares_yet(tokens_on):
    cluster = tokens_on
    for dn in cluster.datanodes:
        path = cluster.throttle_socket(dn)
        assert os.stat(path).st_mode & 0o777 == 0o600
        assert os.stat(os.path.dirname(path)).st_mode & 0o777 == 0o700
        assert talk(path, "PING\n")[-1].startswith("OK vnode-sync-datanode-throttle ")
        with open(dn.log) as f:
            log = f.read()
        assert "shares are unknown until the storage agent sends them" in log
        assert "hooked org.apache.hadoop.hdfs.server.datanode.BlockReceiver" in log


def test_the_handshake_names_the_protocol_hadoop_and_every_hook_woven_from_the_start(tokens_on):
    """The hooked classes are loaded when the agent starts, so the handshake knows before any op."""
    hello = ThrottleChannel(tokens_on.throttle_socket(tokens_on.datanodes[0])).hello()
    assert (hello.protocol, hello.hadoop) == (2, hadoop_version())
    assert hello.hooks == {hook: "woven" for hook in {**REQUIRED_HOOKS, **OPTIONAL_HOOKS}}
    assert hello.missing_hooks() == {}


def test_stats_name_the_volume_an_op_ran_on_by_its_storage_id_and_python_reads_it(tokens_on):
    """After a write, each DataNode's dispatcher of the block's volume (its storage ID, not the whole node)."""
    tokens_on.write_file(f"/alice/{unique_name('vol')}.bin", 4 * MiB, as_uid=ALICE_UID, hdfs_user="alice")
    stats = ThrottleChannel(tokens_on.throttle_socket(tokens_on.datanodes[0])).stats()
    assert stats.node["volumes"] == len(stats.volumes) >= 1
    for queue in stats.volumes:
        assert queue.volume.startswith("DS-") and queue.depth >= 1, queue


def test_write_cap_held_and_pipeline_replica_charged_to_the_writer(tokens_on):
    """Block tokens on: both DataNodes of a replication-2 pipeline charge the writer (the downstream one
    sees the writer's token, not its upstream DataNode). Alice is capped at 10 MB/s, bob is not."""
    cluster = tokens_on
    for dn in cluster.datanodes:
        # UID lines name the other user: the token must win over the socket owner.
        assert apply(cluster.throttle_socket(dn), 1, "DEFAULT", f"USER name=alice {ceilings(0, WRITE_CAP)}",
                     "USER name=bob", f"UID uid={ALICE_UID} name=bob", f"UID uid={BOB_UID} name=alice") == \
            ["OK generation=1"]
    before = {dn.id: stats(cluster.throttle_socket(dn)) for dn in cluster.datanodes}
    size = 40 * MiB
    alice = cluster.write_file("/alice/capped.bin", size, as_uid=ALICE_UID, hdfs_user="alice")
    bob = cluster.write_file("/bob/free.bin", size, as_uid=BOB_UID, hdfs_user="bob")
    print(f"alice (cap {WRITE_CAP / MB:.0f} MB/s) wrote at {alice.bytes_per_second / MB:.2f} MB/s, "
          f"bob (unlimited) at {bob.bytes_per_second / MB:.2f} MB/s")
    assert alice.bytes_per_second <= 1.15 * WRITE_CAP
    assert alice.bytes_per_second >= 0.5 * WRITE_CAP
    # Bob's own speed is this shared machine's; his zero wait below is the proof he is not throttled.
    assert bob.bytes_per_second > 1.15 * WRITE_CAP
    alice_waited = []
    for dn in cluster.datanodes:
        now = stats(cluster.throttle_socket(dn))
        for user in ("alice", "bob"):
            written = now[user][1] - before[dn.id].get(user, [0] * 6)[1]
            assert written >= size, (dn.id, user, written)
        alice_waited.append(now["alice"][3] - before[dn.id].get("alice", [0] * 6)[3])
        assert now["bob"][3] == before[dn.id].get("bob", [0] * 6)[3], "bob never waited"
        assert now["DEFAULT"][1] == before[dn.id]["DEFAULT"][1], "nothing written was charged to DEFAULT"
    # The pipeline's first DataNode paces her; the second gets her packets at that pace already and
    # need not wait (a wait under 1 ms is not slept, so not counted: seen once in a loaded run).
    assert max(alice_waited) > 0, f"alice waited in her throttler: {alice_waited}"


def test_read_charged_to_the_reader(tokens_on):
    cluster = tokens_on
    cluster.write_file("/alice/r.bin", 8 * MiB, as_uid=ALICE_UID, hdfs_user="alice", replication=1)
    before = sum(stats(cluster.throttle_socket(dn)).get("bob", [0] * 6)[0] for dn in cluster.datanodes)
    cluster.read_file("/alice/r.bin", as_uid=BOB_UID, hdfs_user="bob", seconds=0)
    after = sum(stats(cluster.throttle_socket(dn))["bob"][0] for dn in cluster.datanodes)
    assert after - before >= 8 * MiB


def test_webhdfs_charged_to_the_end_user(tokens_on):
    """WebHDFS with tokens on: the DataNode's own DFS client acts as the end user and carries its
    block token, so the DataNode charges that user although both socket ends are the DataNode."""
    from hdfs import InsecureClient

    cluster = tokens_on
    url = f"http://{cluster.namenode.http_address}"
    data = os.urandom(6 * MiB)

    def total(user: str, column: int) -> int:
        return sum(stats(cluster.throttle_socket(dn)).get(user, [0] * 6)[column] for dn in cluster.datanodes)

    for dn in cluster.datanodes:
        assert apply(cluster.throttle_socket(dn), 2, "USER name=alice", "USER name=bob") == ["OK generation=2"]
    wrote, read = total("alice", 1), total("bob", 0)
    InsecureClient(url, user="alice").write("/alice/web.bin", data, overwrite=True, replication=1)
    with InsecureClient(url, user="bob").read("/alice/web.bin") as reader:
        assert reader.read() == data
    assert total("alice", 1) - wrote >= len(data)
    assert total("bob", 0) - read >= len(data)


def test_garbage_gets_err_and_changes_nothing(tokens_on):
    cluster = tokens_on
    path = cluster.throttle_socket(cluster.datanodes[0])
    assert apply(path, 7, "DEFAULT", f"USER name=alice {ceilings(0, 5_000_000)}") == ["OK generation=7"]
    assert talk(path, "HELLO protocol=1\n")[-1].startswith("ERR protocol 1 is not spoken here")
    assert talk(path, "APPLY 8\nUSER alice 0 0\nEND\n")[-1].startswith("ERR "), "protocol 1's APPLY is refused"
    reply = apply(path, 8, "USER name=alice", "USER name=bob read_weight=nonsense")
    assert len(reply) == 1 and reply[0].startswith("ERR line 2"), reply
    assert talk(path, "\x00\xff garbage\n")[-1].startswith("ERR")
    assert talk(path, "STATS\n")[-1] == "OK generation=7"
    # The set of generation 7 still holds: alice is capped at 5 MB/s on this DataNode.
    alice = cluster.write_file("/alice/g.bin", 12 * MiB, as_uid=ALICE_UID, hdfs_user="alice", replication=1,
                               on_datanode=cluster.datanodes[0])
    assert alice.bytes_per_second <= 1.15 * 5 * MB


def test_datanode_serves_reads_when_the_socket_is_gone(tokens_on):
    cluster = tokens_on
    cluster.write_file("/bob/keep.bin", 4 * MiB, as_uid=BOB_UID, hdfs_user="bob")
    for dn in cluster.datanodes:
        os.unlink(cluster.throttle_socket(dn))
    assert cluster.read_file("/bob/keep.bin", as_uid=BOB_UID, hdfs_user="bob", seconds=0).bytes >= 4 * MiB


def test_tokens_off_same_host_socket_owner_and_pipeline_falls_to_default():
    """Block tokens off: the first DataNode knows the writer from its socket's owner (UID lines); the
    downstream replica's client is the upstream DataNode (uid 0 here, not mapped), so it charges DEFAULT."""
    cluster = agent_cluster(tokens=False, datanodes=2, replication=2)
    try:
        cluster.start()
        for dn in cluster.datanodes:
            assert apply(cluster.throttle_socket(dn), 1, "USER name=alice", f"UID uid={ALICE_UID} name=alice") == \
                ["OK generation=1"]
        cluster.write_file("/alice/t.bin", 8 * MiB, as_uid=ALICE_UID, hdfs_user="alice")
        written = [stats(cluster.throttle_socket(dn)) for dn in cluster.datanodes]
        # Which DataNode heads the pipeline is the NameNode's choice: one charges alice, the other DEFAULT.
        by_alice = sorted(s.get("alice", [0] * 6)[1] >= 8 * MiB for s in written)
        assert by_alice == [False, True], written
        tail = next(s for s in written if s.get("alice", [0] * 6)[1] < 8 * MiB)
        assert tail["DEFAULT"][1] >= 8 * MiB, written
    finally:
        cluster.stop()


def test_a_hook_left_unwoven_by_an_agent_setting_is_reported_by_the_handshake_and_the_backend():
    """skip_hook=BlockSender.sendBlock leaves reads to Hadoop's throttler: the handshake says so, and
    one reconcile pass of the storage agent's backend reports the node as not enforcing, with why."""
    from vnode_sync.agents.storage.reconciler import Reconciler
    from vnode_sync.datanode.backend import DataNodeThrottleBackend
    from vnode_sync.wire import vnode_pb2 as pb

    class NoThreads:
        name, shared_process = "none", False

        def scan(self, users):
            return []

    cluster = HdfsCluster(unique_name("dnt-skip"), datanodes=1, disk_mb=1024, datanode_throttle=JAR,
                          datanode_throttle_args=("skip_hook=BlockSender.sendBlock",))
    try:
        cluster.start()
        path = cluster.throttle_socket(cluster.datanodes[0])
        hello = ThrottleChannel(path).hello()
        assert hello.missing_hooks() == {"BlockSender.sendBlock": "skipped"}
        reconciler = Reconciler(DataNodeThrottleBackend(ThrottleChannel(path)), NoThreads(), {})
        reconciler.apply(pb.DesiredState(generation=1, node_id="dn0"))
        assert reconciler.not_enforcing == (
            f"DataNode throttle agent {hello.version} (Hadoop {hadoop_version()}): hook BlockSender.sendBlock "
            "skipped: reads are not scheduled: the node is not enforcing")
        # Reads still work, with Hadoop's own throttler: the DataNode serves everyone.
        cluster.write_file("/bob/s.bin", 2 * MiB, as_uid=BOB_UID, hdfs_user="bob")
        assert cluster.read_file("/bob/s.bin", as_uid=BOB_UID, hdfs_user="bob", seconds=0).bytes >= 2 * MiB
    finally:
        cluster.stop()
