"""End to end with the DataNode-side backend: a real HDFS whose DataNodes load vnode-sync's Java
agent, storage agents with `backend: datanode-throttle` (no cgroup at all), two Unix users at
priorities 4 and 8 on 60 MB/s per DataNode. Default DataNode settings: writes are buffered,
which no cgroup v1 throttle can charge; here the split is measured where the DataNode receives
the bytes, from the Java agent's own counters. The WebHDFS checks, whose hooks differ between Hadoop
lines, run on each supported line (on the default line, on the split's cluster); the split and the control
socket's checks, on the default line. The
split runs with the DataNodes on the JDK on PATH (17). On Java 11 (Hadoop 3.3 and 3.4 support 8 and 11) the
agent's weaving, its control socket (libc's) and its identities are checked where a site gets them, by the
role from dist on a Java 11 DataNode (tests/e2e/test_hdfs_datanode_role.py: every hook woven, writes and
reads split 4 : 8 by the users' own clients); a test of its own here repeated that with a cluster of its own.
"""

import glob
import json
import os
import signal
import time

import pytest
from hdfs import InsecureClient

from tests.conftest import hadoop_lines, needs_java, needs_kernel, unique_name
from testbed.hdfs_cluster import JavaRuntime, default_java
from testbed.hdfs_cluster.metered import MeteredPut
from testbed.hdfs_vnode_cluster import hdfs_vnode_cluster
from testbed.local_cluster import LocalUser
from testbed.share_watch import assertion_missed, first_window_that_holds
from testbed.unix_users import local_users
from vnode_sync.datanode.channel import OPTIONAL_HOOKS, REQUIRED_HOOKS, ThrottleChannel

# Root for useradd and the testbed's loop disks; Java for HDFS and the agent.
pytestmark = [needs_kernel, needs_java, pytest.mark.slow]

MB = 1_000_000
MiB = 1 << 20
NODE_BW = 60 * MB


def channels(hdfs) -> dict[str, ThrottleChannel]:
    return {dn.id: ThrottleChannel(hdfs.throttle_socket(dn)) for dn in hdfs.datanodes}


def counted(hdfs, direction: str) -> dict[tuple[str, str], int]:
    """(DataNode, user) -> bytes the DataNode's throttler passed for that user."""
    found = {}
    for dn_id, channel in channels(hdfs).items():
        for user, c in channel.stats().users.items():
            found[(dn_id, user)] = getattr(c, f"{direction}_bytes")
    return found


def rates(hdfs, direction: str, seconds: float) -> dict[tuple[str, str], float]:
    before, t0 = counted(hdfs, direction), time.monotonic()
    time.sleep(seconds)
    after, elapsed = counted(hdfs, direction), time.monotonic() - t0
    return {key: (after[key] - before.get(key, 0)) / elapsed for key in after}


def wait_for_traffic(cluster, hdfs, users: list[str], direction: str) -> None:
    """Until every user's bytes move: writes on every DataNode (replication 2: each takes every byte), reads on
    one (a reader reads each block from one replica, picked at random; waiting for a reader to have picked each
    DataNode took 10 s of re-reads, and the read split is judged on a user's sum over the DataNodes)."""
    where = all if direction == "write" else any

    def flowing():
        now = counted(hdfs, direction)
        return all(where(now.get((dn.id, u), 0) > 0 for dn in hdfs.datanodes) for u in users)
    cluster.wait_for(flowing, timeout=60, what=f"{direction}s of every user")
    time.sleep(2.0)  # past the JVMs' start and the first block's burst


def no_cgroup_of(cluster) -> bool:
    """No directory in any cgroup hierarchy of the host carries the cluster's name (its agents' subtrees)."""
    return not any(cluster.name in d for root in glob.glob("/sys/fs/cgroup/*/") for _, dirs, _ in os.walk(root)
                   for d in dirs)


# The hierarchies a cgroup backend moves threads in: v1 blkio and the v2 (unified) one. Others, such as
# memory or cpu, belong to whatever started the test (a CI runner may regroup its processes there).
MOVED_BY_A_BACKEND = ("blkio", "")
PF_EXITING = 0x4  # include/linux/sched.h; /proc/PID/stat's 9th field holds the task's flags


def live_thread_cgroups(task_dir: str) -> frozenset[str] | None:
    """A thread's blkio and cgroup-v2 cgroups, or None if it is exiting or gone: the kernel shows an
    exiting task's v1 cgroups as "/" (proc_cgroup_show), and DataXceiver threads end as clients stop."""
    try:
        with open(os.path.join(task_dir, "cgroup")) as f:
            lines = [line.split(":", 2) for line in f.read().splitlines()]
        with open(os.path.join(task_dir, "stat")) as f:  # after: PF_EXITING, once set, stays
            flags = int(f.read().rsplit(")", 1)[1].split()[6])
    except (FileNotFoundError, ProcessLookupError):
        return None
    if flags & PF_EXITING:
        return None
    return frozenset(f"{controllers}:{path}" for _, controllers, path in lines if controllers in MOVED_BY_A_BACKEND)


def thread_cgroups(hdfs) -> set[frozenset[str]]:
    """The different sets of blkio and cgroup-v2 cgroups the DataNodes' live threads are in."""
    found = {live_thread_cgroups(task) for dn in hdfs.datanodes for task in glob.glob(f"/proc/{dn.pid}/task/*")}
    return found - {None}


def assert_nothing_moved(hdfs, at_start: set[frozenset[str]]) -> None:
    """No DataNode thread was moved: all are still in the cgroups the DataNodes started in (a thread
    inherits its creator's, so only a write to some cgroup's tasks file could change this)."""
    now = thread_cgroups(hdfs)
    assert now == at_start, f"DataNode threads moved: now also in {now - at_start}, no longer in {at_start - now}"


def default_bytes(hdfs, direction: str) -> int:
    return sum(getattr(c.stats().default, f"{direction}_bytes") for c in channels(hdfs).values())


def assert_datanodes_run_on(hdfs, runtime: JavaRuntime) -> None:
    """Every DataNode process is that runtime's java, and its agent wove every hook."""
    for dn in hdfs.datanodes:
        assert os.path.realpath(f"/proc/{dn.pid}/exe") == os.path.realpath(runtime.java), (dn.id, runtime)
        hooks = ThrottleChannel(hdfs.throttle_socket(dn)).hello().hooks
        assert hooks == {hook: "woven" for hook in {**REQUIRED_HOOKS, **OPTIONAL_HOOKS}}, (dn.id, runtime, hooks)


@pytest.fixture
def users():
    with local_users("vst", (4, 8), first_uid=64_531) as made:
        yield made


def assert_read_split(measured: dict[tuple[str, str], float], targets: dict[str, float]) -> None:
    """A reader reads one block at a time from one replica, so within a window it may move from one
    DataNode to the other: each user's rate summed over the DataNodes is within 10 % of its share
    of one DataNode, and no DataNode gives a user more than that share (+10 %)."""
    for user, target in targets.items():
        total = sum(v for (_, u), v in measured.items() if u == user)
        assert total == pytest.approx(target, rel=0.10), (user, measured)
        for (dn, u), v in measured.items():
            assert u != user or v <= target * 1.10, (dn, user, measured)


# A window can fall where a writer's pipeline changes blocks (bob at 34 of 36-44 MB/s once); wrong shares
# miss both.
WRITE_WINDOWS = 2


def assert_write_split(hdfs, measured: dict[tuple[str, str], float], targets: dict[str, float]) -> None:
    """Replication 2: every block also reaches the other DataNode, so each DataNode gives each writer
    its share (within 10 %)."""
    for dn in hdfs.datanodes:
        for user, target in targets.items():
            assert measured.get((dn.id, user), 0.0) == pytest.approx(target, rel=0.10), (dn.id, user, measured)


def flip(cluster, hdfs, user: LocalUser, priority: int) -> None:
    """Set `user`'s priority and wait until every DataNode's throttler has the new rates: within 3 s."""
    generations = {dn: c.stats().generation for dn, c in channels(hdfs).items()}
    cluster.vnodectl("set-priority", user.name, str(priority))
    cluster.wait_for(lambda: all(c.stats().generation > generations[dn] for dn, c in channels(hdfs).items()),
                     timeout=3, what="the flip in every DataNode within 3 s")
    time.sleep(1.0)  # let the buckets drain what was booked at the old rates


def test_buffered_writes_and_reads_split_by_priority_with_no_cgroup_and_follow_a_flip(users):
    """On the default Hadoop line only (70 s a line): the other lines' hooks are tested by the garbage and
    WebHDFS tests below, and the scheduler that splits is the same Java on every line. On the JDK on PATH;
    Java 11 is tests/e2e/test_hdfs_datanode_role.py's."""
    alice, bob = users
    # The throttler alone, as on a host where the agent may make no cgroup: without the transfer
    # threads' cpu groups (docs/edge.md G10), whose placement tests/datanode/test_cpu_shares.py checks.
    with hdfs_vnode_cluster(unique_name("dnthrottle"), [alice, bob], NODE_BW, backend="datanode-throttle",
                            replication=2, disk_mb=3072, throttle_settings={"cpu_shares": False}) as (hdfs, cluster):
        assert_datanodes_run_on(hdfs, default_java())
        assert no_cgroup_of(cluster)
        at_start = thread_cgroups(hdfs)
        assert len(at_start) == 1, at_start  # one set of cgroups for every thread of both DataNodes
        cluster.wait_for(lambda: all(set(c.stats().users) >= {alice.name, bob.name} for c in channels(hdfs).values()),
                         timeout=30, what="the agents' rates in every DataNode")

        # `hdfs dfs -put -` fed until the windows are done, then closed: each file is as long as they needed.
        writers = [MeteredPut(hdfs, f"/{u.name}.bin", as_uid=u.uid, hdfs_user=u.name) for u in (alice, bob)]
        try:
            wait_for_traffic(cluster, hdfs, [alice.name, bob.name], "write")
            first_window_that_holds(lambda: rates(hdfs, "write", 5),
                                    assertion_missed(lambda r: assert_write_split(hdfs, r, {alice.name: 20 * MB,
                                                                                             bob.name: 40 * MB})),
                                    "writes at 4 : 8", windows=WRITE_WINDOWS)
            flip(cluster, hdfs, alice, 8)
            first_window_that_holds(lambda: rates(hdfs, "write", 3),
                                    assertion_missed(lambda r: assert_write_split(hdfs, r, {alice.name: 30 * MB,
                                                                                             bob.name: 30 * MB})),
                                    "writes at 8 : 8", windows=WRITE_WINDOWS)
        finally:
            for w in writers:
                w.finish()   # the -put closed its file and exited 0

        hdfs.evict_page_cache()
        readers = [hdfs.start_read(f"/{u.name}.bin", as_uid=u.uid, hdfs_user=u.name, seconds=60)
                   for u in (alice, bob)]
        try:
            wait_for_traffic(cluster, hdfs, [alice.name, bob.name], "read")
            assert_read_split(rates(hdfs, "read", 3), {alice.name: 30 * MB, bob.name: 30 * MB})
            # Both read at their shares: vnodectl top shows them held, timed by the throttler itself.
            top = json.loads(cluster.vnodectl("top", "--json").stdout)
            assert {u["user"] for u in top["users"] if u["held_seconds"] > 0} == {alice.name, bob.name}, top
            sources = {n["held_source"] for u in top["users"] for n in u["nodes"] if n["held_seconds"]}
            assert sources == {"measured"}, top
            flip(cluster, hdfs, alice, 4)
            assert_read_split(rates(hdfs, "read", 3), {alice.name: 20 * MB, bob.name: 40 * MB})
        finally:
            for r in readers:
                r.kill()
                r.wait()
        assert no_cgroup_of(cluster)
        assert_nothing_moved(hdfs, at_start)
        assert not os.path.ismount(f"/run/vnode-sync/{cluster.cgroup_name('dn0')}.fast-moves")
        # The same cluster as the WebHDFS test's on the other lines (replication 2, block tokens): its checks here.
        assert_webhdfs_reads_and_writes_and_pipeline_replicas_are_charged_to_each_user(hdfs, alice, bob)


def test_garbage_on_the_socket_changes_nothing_and_a_dead_agent_leaves_the_rates(users):
    alice, bob = users
    with hdfs_vnode_cluster(unique_name("dnthrottle"), [alice, bob], NODE_BW, datanodes=1,
                            backend="datanode-throttle") as (hdfs, cluster):
        channel = channels(hdfs)["dn0"]
        cluster.wait_for(lambda: alice.name in channel.stats().users, timeout=30, what="the agent's rates")
        before = channel.stats().generation
        for garbage in (["APPLY 9", "USER ../etc 1 1", "DEFAULT 0 0", "END"], ["APPLY x", "END"],
                        ["APPLY 9", "USER alice -5 0", "DEFAULT 0 0", "END"], ["\x00\xff junk"]):
            with pytest.raises(Exception, match="DataNode throttle refused"):
                channel._exchange(garbage)
            assert channel.stats().generation == before
        cluster.stop_agent("dn0", signal.SIGKILL)
        assert channel.stats().generation == before       # the DataNode keeps the last rates
        assert alice.name in channel.stats().users
        hdfs.write_file("/after.bin", 8 * MiB, as_uid=alice.uid, hdfs_user=alice.name)


def assert_webhdfs_reads_and_writes_and_pipeline_replicas_are_charged_to_each_user(hdfs, alice, bob) -> None:
    """The `hdfs` package's WebHDFS client as two users: the DataNode's own client acts for the end user,
    and its block token names that user on both DataNodes (replication 2: one of them holds the
    downstream pipeline replica), so nothing lands in the default VNode."""
    size = 16 * MiB
    url = f"http://{hdfs.namenode.http_address}"
    data = {u.name: os.urandom(size) for u in (alice, bob)}
    for direction in ("write", "read"):
        for user, other in ((alice, bob), (bob, alice)):
            before, default_before = counted(hdfs, direction), default_bytes(hdfs, direction)
            client = InsecureClient(url, user=user.name)
            if direction == "write":
                client.write(f"/web-{user.name}.bin", data=data[user.name])
            else:
                with client.read(f"/web-{user.name}.bin") as reader:
                    assert reader.read() == data[user.name]
            after = counted(hdfs, direction)
            grew = {key: after[key] - before.get(key, 0) for key in after}
            if direction == "write":  # every DataNode holds a replica, each charged to the writer
                assert all(grew[(dn.id, user.name)] >= size for dn in hdfs.datanodes), grew
            else:
                assert sum(grew.get((dn.id, user.name), 0) for dn in hdfs.datanodes) >= size, grew
            assert all(grew.get((dn.id, other.name), 0) == 0 for dn in hdfs.datanodes), grew
            assert default_bytes(hdfs, direction) == default_before


@pytest.mark.parametrize("hadoop_line", hadoop_lines(but_the_default=True))
def test_webhdfs_reads_and_writes_and_pipeline_replicas_are_charged_to_each_user_with_block_tokens(users, hadoop_line):
    """On each Hadoop line but the default, whose split test makes these checks on its cluster."""
    alice, bob = users
    with hdfs_vnode_cluster(unique_name("dnthrottle"), [alice, bob], NODE_BW, backend="datanode-throttle",
                            replication=2, block_tokens=True, hadoop_version=hadoop_line) as (hdfs, cluster):
        cluster.wait_for(lambda: all(set(c.stats().users) >= {alice.name, bob.name} for c in channels(hdfs).values()),
                         timeout=30, what="the agents' rates in every DataNode")
        assert_webhdfs_reads_and_writes_and_pipeline_replicas_are_charged_to_each_user(hdfs, alice, bob)
