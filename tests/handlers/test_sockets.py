"""TCP table parsing and the socket a thread is blocked on, on fake and real /proc."""

import os
import socket
import sys
import threading

import pytest

from tests.handlers.fakeproc import FakeProc
from vnode_sync.agents.handlers.sockets import (TCP_ESTABLISHED, TCP_LISTEN, TcpSocket, diag_tcp_sockets,
                                                normalise_address, parse_tcp_table, peer_of, sockets_in_use,
                                                tcp_sockets)

HEADER = "  sl  local_address                         remote_address                        st ...\n"
# Real rows (x86-64, little-endian): a Java DataNode's end of a loopback connection, and a listener.
TCP6_ROWS = (
    "   0: 00000000000000000000000000000000:2682 00000000000000000000000000000000:0000 0A 00000000:00000000 "
    "00:00000000 00000000     0        0 39211 1 0000000000000000 100 0 0 10 0\n"
    "   1: 0000000000000000FFFF00000100007F:2682 0000000000000000FFFF00000100007F:AD9C 01 00000000:00000000 "
    "00:00000000 00000000     0        0 41245 1 0000000000000000 20 4 30 10 -1\n"
    "   2: 00000000000000000000000001000000:C350 00000000000000000000000001000000:2682 01 00000000:00000000 "
    "00:00000000 00000000 64002        0 41301 1 0000000000000000 20 4 30 10 -1\n"
)
TCP4_ROW = ("   0: 0100007F:AD9C 0100007F:2682 01 00000000:00000000 00:00000000 00000000 64001        0 41244 1 "
            "0000000000000000 20 4 30 10 -1\n")

little_endian_only = pytest.mark.skipif(sys.byteorder != "little", reason="the literal rows are x86-64 dumps")


@little_endian_only
def test_tcp6_rows_decode_mapped_ipv4_and_plain_ipv6():
    listener, mapped, v6 = parse_tcp_table(HEADER + TCP6_ROWS)
    assert listener == TcpSocket(("::", 9858), ("::", 0), TCP_LISTEN, 0, 39211)
    assert mapped == TcpSocket(("127.0.0.1", 9858), ("127.0.0.1", 44444), TCP_ESTABLISHED, 0, 41245)
    assert v6.local == ("::1", 50000) and v6.remote == ("::1", 9858) and v6.uid == 64002


@little_endian_only
def test_ipv4_row_and_its_mapped_peer_match():
    client, = parse_tcp_table(HEADER + TCP4_ROW)
    server = parse_tcp_table(HEADER + TCP6_ROWS)[1]
    assert client.uid == 64001 and client.established
    assert peer_of([client], server) == client


@little_endian_only
def test_port_filter_keeps_sockets_with_that_port_at_either_end():
    rows = parse_tcp_table(HEADER + TCP6_ROWS, port=0xAD9C)
    assert [r.inode for r in rows] == [41245]


def test_addresses_have_one_spelling():
    assert normalise_address("::ffff:10.1.2.3") == "10.1.2.3"
    assert normalise_address("2001:db8:0:0::1") == "2001:db8::1"


def test_blocked_call_names_the_socket_directly_or_through_epoll(tmp_path):
    proc = FakeProc(str(tmp_path))
    proc.process(100, ["java"])
    proc.socket_fd(100, 7, 5001)
    proc.socket_fd(100, 8, 5002)
    os.symlink("/data/blk_1", os.path.join(str(tmp_path), "100", "fd", "9"))
    proc.thread(100, 101, "DataXceiver for")
    proc.blocked_in(100, 101, 40, 7, 9, 0, 65536)          # sendfile(socket, block file)
    assert sockets_in_use(str(tmp_path), 100, 101, "x86_64") == {5001}
    proc.epoll_fd(100, 12, [13, 8])                         # fd 13: the selector's wakeup eventfd
    proc.blocked_in(100, 101, 232, 12, 0x7f0000, 1024, 60000)
    assert sockets_in_use(str(tmp_path), 100, 101, "x86_64") == {5002}
    proc.blocked_in(100, 101, 17, 9, 0x7f0000, 65536)       # pread64 on the block file: no socket
    assert sockets_in_use(str(tmp_path), 100, 101, "x86_64") == set()
    proc.syscall(100, 101, "running")
    assert sockets_in_use(str(tmp_path), 100, 101, "x86_64") == set()
    assert sockets_in_use(str(tmp_path), 100, 999, "x86_64") == set()  # thread gone: not an error


@pytest.mark.skipif(os.geteuid() != 0, reason="reading another thread's syscall file needs ptrace rights (root)")
def test_real_thread_blocked_in_recv_shows_its_socket():
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    conn, _ = server.accept()
    ready = threading.Event()
    tids = []

    def wait_for_data():
        tids.append(threading.get_native_id())
        ready.set()
        conn.recv(1)

    t = threading.Thread(target=wait_for_data)
    t.start()
    ready.wait()
    inode = os.stat(f"/proc/self/fd/{conn.fileno()}").st_ino
    try:
        for _ in range(200):
            if sockets_in_use("/proc", os.getpid(), tids[0]) == {inode}:
                break
            threading.Event().wait(0.005)
        assert sockets_in_use("/proc", os.getpid(), tids[0]) == {inode}
        mine = [s for s in tcp_sockets("/proc", os.getpid(), server.getsockname()[1]) if s.inode == inode]
        assert mine and mine[0].remote == ("127.0.0.1", client.getsockname()[1])
    finally:
        client.sendall(b"x")
        t.join()
        for s in (client, conn, server):
            s.close()


def test_sock_diag_with_a_port_filter_agrees_with_the_proc_tables():
    server = socket.create_server(("::", 0), family=socket.AF_INET6, dualstack_ipv6=True)
    port = server.getsockname()[1]
    clients = [socket.create_connection(("127.0.0.1", port)), socket.create_connection(("::1", port))]
    accepted = [server.accept()[0] for _ in clients]
    try:
        diag = diag_tcp_sockets(socket.AF_INET, port) + diag_tcp_sockets(socket.AF_INET6, port)
        with open("/proc/self/net/tcp") as v4, open("/proc/self/net/tcp6") as v6:
            table = parse_tcp_table(v4.read(), port) + parse_tcp_table(v6.read(), port, ipv6=True)
        assert sorted(diag, key=lambda s: s.inode) == sorted(table, key=lambda s: s.inode)
        assert len(diag) == 5  # the listener, and both ends of two connections
        assert {s.local for s in diag if s.state == TCP_ESTABLISHED} >= {("127.0.0.1", port), ("::1", port)}
    finally:
        for s in clients + accepted + [server]:
            s.close()
