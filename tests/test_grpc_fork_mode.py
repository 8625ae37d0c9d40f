"""This process starts clients (Hadoop's, lctl, agents) beside live gRPC servers and channels. gRPC's
fork handlers, on by default, would restart its poller in each child, which then dies of EBADF before
exec. vnode_sync turns them off; this checks it did so before gRPC loaded in the test process itself."""

import os
import subprocess
import threading
import time
from concurrent import futures

import grpc

SKIPPED_HANDLERS = "fork() handlers"


def _slow_echo(request, context):
    time.sleep(0.02)
    return request


def test_children_forked_beside_calls_in_flight_run_no_grpc_fork_handlers(capfd):
    handler = grpc.method_handlers_generic_handler(
        "probe", {"Echo": grpc.unary_unary_rpc_method_handler(_slow_echo)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), handlers=[handler])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    echo = channel.unary_unary("/probe/Echo")
    stop = threading.Event()

    def call_until_stopped():
        while not stop.is_set():
            echo(b"x", timeout=10)

    callers = [threading.Thread(target=call_until_stopped) for _ in range(4)]
    for caller in callers:
        caller.start()
    try:
        for _ in range(30):
            # A group makes Python fork rather than vfork, as the testbed's clients do with user= and group=.
            child = subprocess.run(["true"], group=os.getgid())
            assert child.returncode == 0
    finally:
        stop.set()
        for caller in callers:
            caller.join()
        channel.close()
        server.stop(None)
    assert SKIPPED_HANDLERS not in capfd.readouterr().err
