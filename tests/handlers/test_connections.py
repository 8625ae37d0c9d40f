"""Compute side: users' connections to storage ports, on a fake table and on the real kernel."""

import os

import pytest

from testbed.fake_datanode import connect_as, create_listener
from tests.handlers.fakeproc import FakeProc
from vnode_sync.agents.compute.connections import OwnedConnection, storage_connections
from vnode_sync.agents.handlers.sockets import TCP_ESTABLISHED, TCP_LISTEN, TcpSocket

USERS = {64001: "alice", 64002: "bob"}


def test_only_known_users_connections_to_storage_ports_are_reported_with_their_storage_end(tmp_path):
    proc = FakeProc(str(tmp_path))
    proc.process("self", ["vnode-agent"])
    proc.add_socket("self", TcpSocket(("10.0.0.5", 40001), ("10.0.0.9", 9866), TCP_ESTABLISHED, 64001, 1))
    proc.add_socket("self", TcpSocket(("10.0.0.5", 40002), ("10.0.0.8", 9866), TCP_ESTABLISHED, 64002, 2),
                    ipv6=False)
    proc.add_socket("self", TcpSocket(("10.0.0.5", 40003), ("10.0.0.9", 22), TCP_ESTABLISHED, 64001, 3))
    proc.add_socket("self", TcpSocket(("10.0.0.5", 40004), ("10.0.0.9", 9866), TCP_ESTABLISHED, 1000, 4))
    proc.add_socket("self", TcpSocket(("::", 9866), ("::", 0), TCP_LISTEN, 64001, 5))
    assert storage_connections(USERS, [(None, 9866)], proc.root) == [
        OwnedConnection("10.0.0.5", 40001, "alice", "10.0.0.9", 9866),
        OwnedConnection("10.0.0.5", 40002, "bob", "10.0.0.8", 9866)]
    assert storage_connections(USERS, [("::ffff:10.0.0.9", 9866)], proc.root) == [
        OwnedConnection("10.0.0.5", 40001, "alice", "10.0.0.9", 9866)]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the client runs as another uid")
def test_real_connection_of_a_user_process_is_found():
    listener, port = create_listener()
    client = connect_as(64002, port, "HOLD\n")
    try:
        assert OwnedConnection("127.0.0.1", client.port, "bob", "127.0.0.1", port) in storage_connections(
            USERS, [(None, port)])
    finally:
        client.close()
        listener.close()
