"""The network-namespace compute host: reachable from the host, its sockets invisible to it."""

import os
import socket
import subprocess
import sys

import pytest

from tests.conftest import unique_name
from testbed.compute_host import ComputeHost

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to create network namespaces")


def test_a_client_in_the_namespace_reaches_the_host_and_its_socket_is_not_in_our_proc_net():
    with ComputeHost(unique_name("netns")) as host:
        server = socket.socket()
        server.bind((host.host_address, 0))
        server.listen()
        port = server.getsockname()[1]
        client = host.popen([sys.executable, "-c",
                             f"import socket,time; s=socket.create_connection(('{host.host_address}',{port}));"
                             "print(s.getsockname()[1], flush=True); time.sleep(3)"],
                            stdout=subprocess.PIPE, text=True)
        conn, (peer_address, peer_port) = server.accept()
        assert peer_address == host.address
        assert int(client.stdout.readline()) == peer_port
        local_view = open("/proc/net/tcp").read()
        client_end = f"{socket.inet_aton(host.address)[::-1].hex().upper()}:{peer_port:04X}"
        assert not any(line.split()[1] == client_end for line in local_view.splitlines()[1:])
        client.kill(), client.wait(), conn.close(), server.close()
    assert unique_name("x") and subprocess.run(["ip", "netns", "list"], capture_output=True, text=True) \
        .stdout.count(host.netns) == 0
