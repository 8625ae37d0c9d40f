"""HDFS discovery against a real 2-DataNode HDFS (Java): a read as a uid gives that user's thread."""

import os
import threading
import time
import urllib.request

import pytest

from tests.conftest import needs_java, needs_kernel, unique_name
from vnode_sync.agents.handlers.base import UserDirectory
from vnode_sync.agents.handlers.hdfs import HANDLER_COMM, HdfsDiscovery
from vnode_sync.agents.handlers.generic import thread_comm

USERS = UserDirectory(users_by_uid={64001: "alice", 64002: "bob"})


def _users_seen(discovery: HdfsDiscovery, identity: UserDirectory, while_running, seconds: float = 120
                ) -> dict[int, str | None]:
    """tid -> user of every DataXceiver seen while `while_running()` holds (a JVM takes seconds to start)."""
    seen: dict[int, str | None] = {}
    deadline = time.monotonic() + seconds
    while while_running() and time.monotonic() < deadline:
        discovery.wait_for_change(0.05)
        for h in discovery.scan(identity):
            if thread_comm("/proc", h.pid, h.tid) == HANDLER_COMM:
                seen[h.tid] = h.user if h.user is not None else seen.get(h.tid)
    return seen


@pytest.mark.slow
@needs_kernel
@needs_java
def test_a_read_as_a_uid_is_served_by_a_datanode_thread_identified_as_that_user():
    from testbed.hdfs_cluster import HdfsCluster

    with HdfsCluster(unique_name("hdfs"), datanodes=2) as cluster:
        dn0, dn1 = cluster.datanodes
        cluster.write_file("/alice/a.bin", 16 << 20, hdfs_user="alice", on_datanode=dn0)

        def conf(dn) -> str:  # the DataNode's conf dir on its classpath tells the JVMs apart
            return os.path.join(cluster.workdir, "conf", dn.id) + ":"

        on_dn0, on_dn1 = HdfsDiscovery(cmdline_contains=conf(dn0)), HdfsDiscovery(cmdline_contains=conf(dn1))
        try:
            on_dn0.scan(USERS), on_dn1.scan(USERS)
            assert (on_dn0.pid, on_dn1.pid) == (dn0.pid, dn1.pid)
            assert on_dn0.data_port == dn0.ports.data  # read from the hdfs-site.xml on its classpath
            reader = cluster.start_read("/alice/a.bin", as_uid=64001, hdfs_user="alice", seconds=3)
            seen = _users_seen(on_dn0, USERS, lambda: reader.poll() is None)
            out, err = reader.communicate(timeout=60)
            assert reader.returncode == 0, err[-2000:]
            assert "alice" in seen.values(), f"DataXceivers seen on dn0: {seen}"
            assert "bob" not in seen.values()
            assert "alice" not in _users_seen(on_dn1, USERS, lambda: True, seconds=0.2).values()

            # WebHDFS: the DataNode reads through its own client, both ends are the DataNode's.
            as_root = UserDirectory(users_by_uid={0: "root", **USERS.users_by_uid})
            url = f"http://{cluster.namenode.http_address}/webhdfs/v1/alice/a.bin?op=OPEN&user.name=alice"
            got: list[int] = []
            web = threading.Thread(target=lambda: got.append(len(urllib.request.urlopen(url, timeout=60).read())))
            web.start()
            seen = _users_seen(on_dn0, as_root, web.is_alive)
            web.join(60)
            assert got == [16 << 20]
            assert seen and set(seen.values()) == {None}, f"WebHDFS DataXceivers: {seen}"
        finally:
            on_dn0.close()
            on_dn1.close()
