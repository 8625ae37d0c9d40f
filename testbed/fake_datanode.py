"""A stand-in DataNode without Java: one thread per connection, named as HDFS names them.

The accepting thread is called "DataXceiverServ" and starts a thread per client, which
names itself "DataXceiver for" before reading the request, as DataXceiver.run() does.
It listens dual-stack on ::, so IPv4 clients show up as ::ffff:127.0.0.1 in tcp6, as
with Java. Requests, one line each:
    HOLD\n                 keep the connection open until the client closes it
    READ <path> <bytes>\n  read the file with O_DIRECT (block I/O, no page cache) and send it
Every served connection is logged on stdout as "SERVE <tid> <client port>".

    python -m testbed.fake_datanode --tag X org.apache.hadoop.hdfs.server.datanode.DataNode
prints "PORT <n>" first. The DataNode class name is an argument so discovery by
command line finds this process; --tag tells several of them apart.

`connect_as(uid, port, request)` starts a client process that runs as `uid` (needs root).
"""

import argparse
import ctypes
import mmap
import os
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass

PR_SET_NAME = 15
CHUNK = 256 << 10


def set_thread_name(name: str) -> None:
    ctypes.CDLL(None).prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def _serve_read(conn: socket.socket, path: str, size: int) -> None:
    buf = mmap.mmap(-1, CHUNK)  # page-aligned, as O_DIRECT requires
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        offset = 0
        while offset < size:
            n = os.preadv(fd, [buf], offset)
            if n <= 0:
                break
            n = min(n, size - offset)
            conn.sendall(buf[:n])
            offset += n
    finally:
        os.close(fd)


def _handle(conn: socket.socket, client_port: int) -> None:
    set_thread_name("DataXceiver for")
    print(f"SERVE {threading.get_native_id()} {client_port}", flush=True)
    with conn:
        request = conn.makefile("rb").readline().decode().split()
        if request and request[0] == "READ":
            _serve_read(conn, request[1], int(request[2]))
            conn.shutdown(socket.SHUT_WR)
        while conn.recv(65536):
            pass


def serve(listener: socket.socket) -> None:
    set_thread_name("DataXceiverServ")
    while True:
        conn, peer = listener.accept()
        threading.Thread(target=_handle, args=(conn, peer[1]), daemon=True).start()


def create_listener(port: int = 0) -> tuple[socket.socket, int]:
    listener = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("::", port))
    listener.listen(256)
    return listener, listener.getsockname()[1]


@dataclass
class FakeClient:
    """A client process; `close()` lets it hang up and reaps it."""

    port: int
    uid: int
    _hold_fd: int
    _done_fd: int
    _process: subprocess.Popen

    @property
    def pid(self) -> int:
        return self._process.pid

    def received(self) -> int:
        """Bytes the client got (blocks until its request is answered)."""
        return int(os.read(self._done_fd, 32) or b"-1")

    def close(self) -> None:
        os.close(self._hold_fd)
        os.close(self._done_fd)
        self._process.wait(10)


_CLIENT = """
import encodings.idna, os, socket, sys
uid, port_w, hold_r, done_w, host, port, request = sys.argv[1:]
uid, port_w, hold_r, done_w = int(uid), int(port_w), int(hold_r), int(done_w)
os.setgroups([])
os.setgid(uid)
os.setuid(uid)
s = socket.create_connection((host, int(port)))
os.write(port_w, str(s.getsockname()[1]).encode())
s.sendall(request.encode())
received = 0
if request.startswith("READ"):
    while chunk := s.recv(1 << 20):
        received += len(chunk)
os.write(done_w, str(received).encode())
os.read(hold_r, 1)
s.close()
"""


def connect_as(uid: int, port: int, request: str, host: str = "127.0.0.1") -> FakeClient:
    """Start a client running as `uid` that sends `request` and reads the answer to the end.

    It keeps the connection open until `close()`, so the test decides how long it lives.
    A fresh interpreter, not a fork: a forked copy of a process that has used gRPC
    inherits gRPC's event engine, which breaks in the child. It starts as root (the
    interpreter lives under /root) and drops to `uid` once its imports are done.
    """
    port_r, port_w = os.pipe()
    hold_r, hold_w = os.pipe()
    done_r, done_w = os.pipe()
    child = subprocess.Popen([sys.executable, "-c", _CLIENT, str(uid), str(port_w), str(hold_r), str(done_w),
                              host, str(port), request], pass_fds=(port_w, hold_r, done_w), cwd="/")
    os.close(port_w), os.close(hold_r), os.close(done_w)
    client_port = int(os.read(port_r, 16) or b"0")
    os.close(port_r)
    return FakeClient(client_port, uid, hold_w, done_r, child)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tag", default="")
    parser.add_argument("main_class", nargs="?")
    args = parser.parse_args()
    listener, port = create_listener(args.port)
    print(f"PORT {port}", flush=True)
    serve(listener)


if __name__ == "__main__":
    sys.exit(main())
