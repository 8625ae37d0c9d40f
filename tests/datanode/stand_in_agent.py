"""A stand-in for the DataNode's Java agent that answers only the handshake, on a Unix socket, until killed:
what a restarted DataNode's agent says, for tests that need no JVM (the deploy role's restart handler).

    python -m tests.datanode.stand_in_agent SOCKET [--skip HOOK]...   (HOOK answered "not_found")
"""

import argparse
import os
import socket
import sys

from vnode_sync.datanode.channel import OPTIONAL_HOOKS, REQUIRED_HOOKS


def hello_answer(skipped: list[str]) -> bytes:
    hooks = " ".join(f"hook.{h}={'not_found' if h in skipped else 'woven'}" for h in {**REQUIRED_HOOKS, **OPTIONAL_HOOKS})
    return f"OK protocol=2 min_protocol=2 agent=vnode-sync-datanode-throttle version=0.3.0 hadoop=3.4.2 " \
           f"started_ms=1 {hooks}\n".encode()


def serve(path: str, skipped: list[str]) -> None:
    if os.path.exists(path):
        os.unlink(path)   # as the Java agent replaces a stale socket
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(path)
        server.listen(4)
        while True:
            conn, _ = server.accept()
            with conn:
                request = conn.recv(4096)
                conn.sendall(hello_answer(skipped) if request.startswith(b"HELLO") else b"ERR unknown request\n")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("socket")
    parser.add_argument("--skip", action="append", default=[])
    args = parser.parse_args()
    serve(args.socket, args.skip)
    return 0


if __name__ == "__main__":
    sys.exit(main())
