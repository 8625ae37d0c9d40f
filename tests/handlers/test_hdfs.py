"""HDFS discovery: DataXceiver threads and their users, on a fake /proc and on a Python DataNode."""

import os
import subprocess
import sys
import time

import pytest

from testbed.fake_datanode import connect_as
from tests.handlers.fakeproc import FakeProc
from vnode_sync.agents.handlers import hdfs
from vnode_sync.agents.handlers.base import HandlerThread, UserDirectory
from vnode_sync.agents.handlers.hdfs import (DATANODE_CLASS, HdfsDiscovery, configured_data_port,
                                             find_datanodes)
from vnode_sync.agents.handlers.proc_connector import ThreadChanges
from vnode_sync.agents.handlers.sockets import TCP_ESTABLISHED, TCP_LISTEN, TcpSocket

DN = 100
PORT = 9866
USERS = UserDirectory(users_by_uid={64001: "alice", 64002: "bob"})
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: clients setuid to other uids, "
                                                         "and another process's syscall files need ptrace rights")


def server_end(inode: int, client: tuple[str, int]) -> TcpSocket:
    return TcpSocket(("127.0.0.1", PORT), client, TCP_ESTABLISHED, 0, inode)


def client_end(inode: int, port: int, uid: int) -> TcpSocket:
    return TcpSocket(("127.0.0.1", port), ("127.0.0.1", PORT), TCP_ESTABLISHED, uid, inode)


@pytest.fixture
def proc(tmp_path, monkeypatch):
    monkeypatch.setattr(hdfs, "CHECK_SECONDS", 0.0)  # a fake thread may be asked on every scan
    fake = FakeProc(str(tmp_path / "proc"))
    fake.process(DN, ["java", "-cp", "jars/*:conf", DATANODE_CLASS])
    fake.thread(DN, 101, "org.apache.hado")  # DataXceiverServer, named after its Runnable
    fake.thread(DN, 99, "org.apache.hado")   # another such thread, not accepting
    fake.add_socket(DN, TcpSocket(("::", PORT), ("::", 0), TCP_LISTEN, 0, 900))
    fake.socket_fd(DN, 50, 900)
    fake.blocked_in(DN, 101, 43, 50, 0x7f0000, 0x7f0010)  # accept(listening socket, ...)
    return fake


def discovery(proc: FakeProc) -> HdfsDiscovery:
    return HdfsDiscovery(proc_root=proc.root, pid=DN, data_port=PORT)


def connect(proc: FakeProc, tid: int, port: int, uid: int, server_inode: int, fd: int) -> None:
    """A same-host client of `uid` connects and the DataNode starts thread `tid` for it."""
    proc.add_socket(DN, server_end(server_inode, ("127.0.0.1", port)))
    proc.add_socket(DN, client_end(server_inode + 1, port, uid), ipv6=False)
    proc.socket_fd(DN, fd, server_inode)
    proc.thread(DN, tid, "DataXceiver for")


def users(found, spawner: int = 101) -> dict[int, str | None]:
    """tid -> user of the DataXceiver threads (the spawner, always unidentified, left out)."""
    return {h.tid: h.user for h in found if h.tid != spawner}


def test_same_host_client_is_identified_by_the_uid_of_its_socket(proc):
    d = discovery(proc)
    assert users(d.scan(USERS)) == {}
    connect(proc, 102, 40001, 64001, 500, 60)
    assert users(d.scan(USERS)) == {102: "alice"}
    assert d.link_counts == {"elimination": 1}
    connect(proc, 103, 40002, 64002, 510, 61)
    assert users(d.scan(USERS)) == {102: "alice", 103: "bob"}
    proc.end_thread(DN, 102)
    assert users(d.scan(USERS)) == {103: "bob"}  # a thread that ended is simply gone


def test_the_spawner_goes_to_the_default_vnode_so_new_threads_are_born_there(proc):
    assert discovery(proc).scan(USERS) == [HandlerThread(DN, 101, None)]
    quiet = HdfsDiscovery(proc_root=proc.root, pid=DN, data_port=PORT, spawner_in_default=False)
    assert quiet.scan(USERS) == []


def test_unknown_uid_stays_unidentified_until_the_coordinator_knows_it(proc):
    d = discovery(proc)
    connect(proc, 102, 40001, 64077, 500, 60)
    assert users(d.scan(USERS)) == {102: None}
    later = UserDirectory(users_by_uid={**USERS.users_by_uid, 64077: "carol"})
    assert users(d.scan(later)) == {102: "carol"}


def test_remote_client_is_identified_through_compute_agent_reports(proc):
    d = discovery(proc)
    proc.add_socket(DN, server_end(500, ("10.0.0.7", 40001)))
    proc.socket_fd(DN, 60, 500)
    proc.thread(DN, 102, "DataXceiver for")
    assert users(d.scan(USERS)) == {102: None}
    reported = UserDirectory(users_by_uid=USERS.users_by_uid, connections={("10.0.0.7", 40001): "bob"})
    assert users(d.scan(reported)) == {102: "bob"}


def test_webhdfs_thread_serving_the_datanodes_own_client_stays_unidentified(proc):
    d = discovery(proc)
    root_users = UserDirectory(users_by_uid={0: "root", **USERS.users_by_uid})
    connect(proc, 102, 40001, 0, 500, 60)
    proc.socket_fd(DN, 61, 501)  # the client end is the DataNode's own socket
    assert users(d.scan(root_users)) == {102: None}


def test_concurrent_threads_are_told_apart_by_the_socket_they_block_on(proc):
    d = discovery(proc)
    connect(proc, 102, 40001, 64001, 500, 60)
    connect(proc, 103, 40002, 64002, 510, 61)
    assert users(d.scan(USERS)) == {102: None, 103: None}  # two of each, different users: ambiguous
    proc.blocked_in(DN, 103, 40, 61, 70, 0, 65536)  # sendfile(socket fd 61, block file)
    assert users(d.scan(USERS)) == {102: "alice", 103: "bob"}
    assert d.link_counts == {"evidence": 1, "elimination": 1}


def test_concurrent_threads_of_one_user_are_placed_before_they_link(proc):
    d = discovery(proc)
    connect(proc, 102, 40001, 64001, 500, 60)
    connect(proc, 103, 40002, 64001, 510, 61)
    assert users(d.scan(USERS)) == {102: "alice", 103: "alice"}
    assert d.link_counts == {"agreement": 2}


def test_evidence_corrects_an_elimination_guess(proc):
    d = discovery(proc)
    connect(proc, 102, 40001, 64001, 500, 60)  # accepted, its own thread not started yet ...
    proc.end_thread(DN, 102)
    proc.thread(DN, 103, "DataXceiver for")     # ... while another connection's thread starts
    assert users(d.scan(USERS)) == {103: "alice"}
    connect(proc, 104, 40002, 64002, 510, 61)
    proc.end_thread(DN, 104)
    proc.epoll_fd(DN, 80, [81, 61])               # 103 waits on the selector holding fd 61
    proc.blocked_in(DN, 103, 232, 80, 0x7f0000, 1024, 60000)
    assert users(d.scan(USERS)) == {103: "bob"}


def test_datanode_found_by_command_line_and_port_read_from_its_conf(proc, tmp_path):
    conf = tmp_path / "dn2" / "conf"
    conf.mkdir(parents=True)
    (conf / "hdfs-site.xml").write_text(
        "<configuration><property><name>dfs.datanode.address</name>"
        "<value>127.0.0.1:19866</value></property></configuration>")
    proc.process(200, ["java", "-cp", "jars/*:conf", DATANODE_CLASS], cwd=str(tmp_path / "dn2"))
    proc.process(300, ["java", "-cp", "jars/*", "org.apache.hadoop.hdfs.server.namenode.NameNode"])
    assert find_datanodes(proc.root) == [DN, 200]
    assert find_datanodes(proc.root, "dn2") == []  # the conf dir is relative: match what the cmdline says
    assert configured_data_port(proc.root, 200) == 19866
    d = HdfsDiscovery(proc_root=proc.root, cmdline_contains=None)
    assert d.scan(USERS) == [] and d.pid is None  # two DataNodes and no filter: refuse to guess


# ---- a Python DataNode on the real kernel -----------------------------------------


@pytest.fixture
def python_datanode():
    tag = f"vnode-sync-test.fakedn.{os.getpid()}"
    server = subprocess.Popen([sys.executable, "-m", "testbed.fake_datanode", "--tag", tag, DATANODE_CLASS],
                              stdout=subprocess.PIPE, text=True, cwd=os.path.dirname(os.path.dirname(
                                  os.path.dirname(os.path.abspath(__file__)))))
    port = int(server.stdout.readline().split()[1])
    yield server, tag, port
    server.kill()
    server.wait()


def _served(server, count: int) -> dict[int, int]:
    """client port -> handler TID, from the server's log."""
    ports = {}
    while len(ports) < count:
        _, tid, port = server.stdout.readline().split()
        ports[int(port)] = int(tid)
    return ports


@root_only
@pytest.mark.parametrize("events", ["auto", "poll"])
def test_python_datanode_threads_are_identified_per_client_uid(python_datanode, events):
    server, tag, port = python_datanode
    d = HdfsDiscovery(cmdline_contains=tag, events=events)
    assert d.scan(USERS) == [] and d.data_port is None
    clients = [connect_as(uid, port, "HOLD\n") for uid in (64001, 64002, 64001, 64002)]
    try:
        served = _served(server, len(clients))
        expected = {served[c.port]: USERS.users_by_uid[c.uid] for c in clients}
        deadline = time.monotonic() + 5
        found = {}
        while found != expected and time.monotonic() < deadline:
            d.wait_for_change(0.1)
            found = users(d.scan(USERS), spawner=server.pid)
        assert found == expected
        assert d.data_port == port  # learnt from the threads, as no hdfs-site.xml is on its command line
        assert HandlerThread(server.pid, server.pid, None) in d.scan(USERS)  # the accepting thread
    finally:
        for c in clients:
            c.close()
        d.close()


@root_only
def test_a_new_handler_wakes_discovery_within_milliseconds(python_datanode):
    server, tag, port = python_datanode
    d = HdfsDiscovery(cmdline_contains=tag, data_port=port)
    if not d.event_source.startswith("netlink"):
        pytest.skip(f"no process connector here: {d.event_source}")
    d.scan(USERS)
    client = connect_as(64001, port, "HOLD\n")
    try:
        tid = _served(server, 1)[client.port]
        while True:
            d.wait_for_change(2.0)
            woke = time.monotonic_ns()
            born = d._pending.born.get(tid)
            if born is not None:
                break
        assert (woke - born) / 1e6 < 20
        assert users(d.scan(USERS), spawner=server.pid) == {tid: "alice"}
    finally:
        client.close()
        d.close()


def test_a_packet_responder_goes_to_the_user_of_the_one_new_handler_that_can_have_started_it(proc):
    d = discovery(proc)
    connect(proc, 102, 40001, 64001, 500, 60)
    d.scan(USERS)
    proc.thread(DN, 110, "PacketResponder")
    assert HandlerThread(DN, 110, "alice", inherits=True) in d.scan(USERS)


def test_a_packet_responder_among_two_users_new_handlers_stays_where_it_was_born(proc):
    d = discovery(proc)
    connect(proc, 102, 40001, 64001, 500, 60)
    d.scan(USERS)
    connect(proc, 103, 40002, 64002, 510, 61)
    d.scan(USERS)
    proc.thread(DN, 110, "PacketResponder")
    assert HandlerThread(DN, 110, None, inherits=True) in d.scan(USERS)
    proc.end_thread(DN, 103)
    assert HandlerThread(DN, 110, None, inherits=True) in d.scan(USERS)  # decided once: no flapping


def test_a_packet_responder_waits_for_its_possible_creator_to_be_identified(proc):
    d = discovery(proc)
    proc.thread(DN, 102, "DataXceiver for")   # its connection not in the socket table yet
    proc.thread(DN, 110, "PacketResponder")
    assert HandlerThread(DN, 110, None, inherits=True) in d.scan(USERS)
    proc.add_socket(DN, server_end(500, ("127.0.0.1", 40001)))
    proc.add_socket(DN, client_end(501, 40001, 64001), ipv6=False)
    proc.socket_fd(DN, 60, 500)
    assert HandlerThread(DN, 110, "alice", inherits=True) in d.scan(USERS)


class ScriptedEvents:
    """Thread events the test hands out one batch per wait, as the process connector would."""

    def __init__(self):
        self.batches: list[ThreadChanges] = []

    def describe(self) -> str:
        return "scripted events"

    def wait(self, tgid, timeout) -> ThreadChanges:
        return self.batches.pop(0) if self.batches else ThreadChanges()

    def close(self) -> None:
        pass


def test_with_events_a_thread_born_with_its_creators_handler_name_waits_for_its_own_name(proc):
    d = discovery(proc)
    d.events, d.event_source = ScriptedEvents(), "scripted events"

    def next_scan(changes: ThreadChanges):
        d.events.batches.append(changes)
        d.wait_for_change(0)
        return d.scan(USERS)

    connect(proc, 102, 40001, 64001, 500, 60)
    assert users(next_scan(ThreadChanges(born={102: 1}, renamed={102: "DataXceiver for"}))) == {102: "alice"}
    proc.thread(DN, 110, "DataXceiver for")  # the DataXceiver's PacketResponder, before the JVM names it
    assert 110 not in users(next_scan(ThreadChanges(born={110: 2})))  # not taken for a DataXceiver
    proc.thread(DN, 110, "PacketResponder")
    assert HandlerThread(DN, 110, "alice", inherits=True) in next_scan(ThreadChanges(renamed={110: "PacketResponder"}))


def test_an_elimination_still_unconfirmed_when_its_thread_settles_is_corrected_later(proc):
    d = HdfsDiscovery(proc_root=proc.root, pid=DN, data_port=PORT, settle_seconds=0.05)
    connect(proc, 102, 40001, 64001, 500, 60)  # accepted, its own thread not started yet ...
    proc.end_thread(DN, 102)
    proc.thread(DN, 103, "DataXceiver for")     # ... while another connection's thread starts
    assert users(d.scan(USERS)) == {103: "alice"}
    time.sleep(0.06)                              # 103 is no longer young, and gave no evidence yet
    connect(proc, 104, 40002, 64002, 510, 61)
    proc.end_thread(DN, 104)
    proc.blocked_in(DN, 103, 40, 61, 70, 0, 65536)  # sendfile(socket fd 61, block file): bob's
    assert users(d.scan(USERS)) == {103: "bob"}


def test_a_datanode_that_reads_ahead_in_a_pool_is_named_as_not_holding_read_shares(proc):
    d = discovery(proc)
    connect(proc, 102, 40001, 64001, 500, 60)
    d.scan(USERS)
    assert d.not_enforcing() is None
    proc.thread(DN, 120, "Readahead Threa")   # ReadaheadPool's first thread: libhadoop is loaded
    assert users(d.scan(USERS)) == {102: "alice"}  # the pool's threads are nobody's handlers
    assert "dfs.datanode.readahead.bytes to 0" in d.not_enforcing()
    proc.end_thread(DN, 120)                  # the pool lets idle threads go; the DataNode still reads ahead
    d.scan(USERS)
    assert "reads ahead in a thread pool" in d.not_enforcing()
