"""The coordinator as a real process: clean SIGTERM with streams open, one coordinator per address,
and a burst of job and priority calls from many clients that ends in exactly the last written state."""

import asyncio
import os
import pathlib
import shutil
import signal
import socket
import tempfile
import subprocess
import sys
import threading
import time

import grpc
import pytest
from grpc import aio

from tests.conftest import unique_name
from tests.conftest import write_coordinator_config as write_config
from testbed.processes import start_coordinator as start
from testbed.processes import stop_process
from vnode_sync.coordinator.state.store import StateStore
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc

STREAMS = 20
OWN_CONNECTION = (("grpc.use_local_subchannel_pool", 1),)  # each client its own TCP connection


def test_sigterm_ends_open_streams_and_exits_cleanly_within_2_s(tmp_path):
    log = tmp_path / "coordinator.log"
    process, port = start(write_config(tmp_path), log)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        link = pb_grpc.AgentLinkStub(channel)
        streams = [link.WatchDesiredState(pb.WatchRequest(node_id="dn1")) for _ in range(STREAMS)]
        assert all(next(s).node_id == "dn1" for s in streams)
        ended = []

        def drain(stream):
            try:
                for _ in stream:
                    pass
                ended.append("ok")
            except grpc.RpcError as e:
                ended.append(e.code())
        readers = [threading.Thread(target=drain, args=(s,), daemon=True) for s in streams]
        for r in readers:
            r.start()
        t0 = time.monotonic()
        process.send_signal(signal.SIGTERM)
        assert process.wait(5) == 0
        took = time.monotonic() - t0
        for r in readers:
            r.join(5)
        assert took < 2.0, f"shutdown took {took:.2f} s"
        assert len(ended) == STREAMS, "every stream ended when the coordinator stopped"
        text = log.read_text()
        assert "Traceback" not in text and "ERROR" not in text, text
        assert "stopping" in text
    finally:
        channel.close()
        stop_process(process)


def test_a_second_coordinator_on_the_same_address_refuses_in_one_line(tmp_path):
    first, port = start(write_config(tmp_path), tmp_path / "first.log")
    try:
        (tmp_path / "second").mkdir()
        second_config = write_config(tmp_path / "second", listen=f"127.0.0.1:{port}")
        result = subprocess.run([sys.executable, "-m", "vnode_sync.coordinator.main", "--config", second_config,
                                 "--print-port"], capture_output=True, text=True, timeout=30)
        assert result.returncode == 2
        assert result.stdout == ""
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0] == (f"vnode-coordinator: error: cannot listen on '127.0.0.1:{port}': in use by another "
                            "process (is another coordinator running?)")
        # The first one still answers.
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            assert pb_grpc.AdminStub(channel).ListUsers(pb.ListUsersRequest(), timeout=5).generation > 0
    finally:
        stop_process(first)


@pytest.mark.parametrize("content,message", [
    (b"listen: \xff\n", "(whole file): got byte 0xff at offset 8; allowed: UTF-8 text"),
    (b"policy: {sharing: fastest}\n", "policy.sharing: got 'fastest'; allowed: one of static, work-conserving"),
    (b"users: [{name: alice, uid: 1001}, {name: bob, uid: 1001}]\n",
     "users[1].uid: got 1001; allowed: a uid no user listed before has"),
    (b"insecure: false\n", "tls: got nothing; allowed: a tls section {ca, cert, key}, or insecure: true (lab only); "
                            "the coordinator refuses to serve plaintext otherwise"),
])
def test_a_bad_config_is_one_line_exit_2_and_nothing_is_started(tmp_path, content, message):
    from testbed.ports import free_port
    port = free_port()
    state = tmp_path / "state.sqlite"
    config = tmp_path / "coordinator.yaml"
    config.write_bytes(content + f"listen: 127.0.0.1:{port}\nstate_path: {state}\n".encode()
                       if not content.startswith(b"listen") else content + f"state_path: {state}\n".encode())
    result = subprocess.run([sys.executable, "-m", "vnode_sync.coordinator.main", "--config", str(config),
                             "--print-port"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == f"vnode-coordinator: error: config {config}: {message}\n"
    assert sorted(os.listdir(tmp_path)) == ["coordinator.yaml"]   # no state file, no lock file
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))   # nothing listens


JOB_CALLS = 4_000
CLIENTS = 16
# Each client starts this many jobs and ends every other one: 1.5 calls per job, 4,000 in all (as many
# clients at once as 10,000 had: the races are the same, in 40 % of the time).
JOBS_PER_CLIENT = -(-JOB_CALLS * 2 // 3 // CLIENTS)
USERS = [f"load{i}" for i in range(8)]
PRIORITY_CLIENTS = 4


def test_load_held_jobs_and_priorities_end_in_the_last_written_state(tmp_path):
    """4,000 StartJob/EndJob calls from 16 clients (each its own connection) while 4 other clients
    set the same users' priorities: no call fails, and the state is exactly what was written last:
    every user's running jobs are exactly the jobs started and not ended, its priority the one set
    last, in the store and in the desired state a storage node is sent.

    The clients are asyncio gRPC clients in one process (cheap on the client side, so the
    coordinator is what is loaded); the state file is on a tmpfs when the host has one, so the
    run is bounded by the coordinator's work, not by the disk's flushes (4,000 durable
    transactions; durability itself is tested in test_store)."""
    users = [{"name": name, "uid": 20_000 + i, "priority": 10, "active": False} for i, name in enumerate(USERS)]
    state_dir = tmp_path
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        state_dir = pathlib.Path(tempfile.mkdtemp(prefix=unique_name("load") + ".", dir="/dev/shm"))
    state = str(state_dir / "state.sqlite")
    process, port = start(write_config(tmp_path, users=users, state_path=state), tmp_path / "coordinator.log")
    address = f"127.0.0.1:{port}"
    last_priority: dict[str, int] = {}
    running: dict[str, set[str]] = {u: set() for u in USERS}

    async def jobs(client: int) -> int:
        calls = 0
        async with aio.insecure_channel(address, options=OWN_CONNECTION) as channel:
            admin = pb_grpc.AdminStub(channel)
            for i in range(JOBS_PER_CLIENT):
                user, job_id = USERS[(client + i) % len(USERS)], f"{client}.{i}"
                await admin.StartJob(pb.JobRequest(job_id=job_id, user=user, uid=20_000 + USERS.index(user),
                                                   node=f"c{client}"), timeout=60)
                calls += 1
                # Every other job keeps running: the end state has running jobs to check.
                if i % 2 == 0:
                    await admin.EndJob(pb.JobRequest(job_id=job_id, node=f"c{client}"), timeout=60)
                    calls += 1
                else:
                    running[user].add(f"{job_id}@c{client}")
        return calls

    async def priorities(client: int, lock: asyncio.Lock, stop: asyncio.Event) -> int:
        calls = 0
        async with aio.insecure_channel(address, options=OWN_CONNECTION) as channel:
            admin = pb_grpc.AdminStub(channel)
            while not stop.is_set():
                user, priority = USERS[(client + calls) % len(USERS)], 1 + (client * 7 + calls) % 100
                # The lock orders "written last" between priority clients exactly as the coordinator sees it.
                async with lock:
                    await admin.SetPriority(pb.SetPriorityRequest(user=user, priority=priority), timeout=60)
                    last_priority[user] = priority
                calls += 1
        return calls

    async def load() -> tuple[int, int]:
        lock, stop = asyncio.Lock(), asyncio.Event()
        setters = [asyncio.create_task(priorities(c, lock, stop)) for c in range(PRIORITY_CLIENTS)]
        job_calls = sum(await asyncio.gather(*(jobs(c) for c in range(CLIENTS))))
        stop.set()
        return job_calls, sum(await asyncio.gather(*setters))

    try:
        job_calls, priority_calls = asyncio.run(load())
        assert job_calls >= JOB_CALLS and priority_calls > 0
        with grpc.insecure_channel(address) as channel:
            response = pb_grpc.AdminStub(channel).ListUsers(pb.ListUsersRequest(), timeout=10)
            listed, generation = {u.name: u for u in response.users}, response.generation
            # What a storage node is sent: the same last written state.
            state_sent = next(pb_grpc.AgentLinkStub(channel).WatchDesiredState(pb.WatchRequest(node_id="dn1"),
                                                                                timeout=10))
        sent = {v.user: v.priority for v in state_sent.vnodes}
        for user in USERS:
            assert listed[user].running_jobs == len(running[user])
            assert listed[user].active
            # Jobs asked for no priority of their own: the user's priority is the one written last.
            assert listed[user].priority == last_priority[user]
            assert sent[user] == last_priority[user]
        assert state_sent.generation == generation, "the stream sends the latest generation"
        assert "Traceback" not in (tmp_path / "coordinator.log").read_text()
    finally:
        stop_process(process)
    store = StateStore(state, create=False)
    try:
        for user in USERS:
            assert {f"{job}@{node}" for job, node in store.jobs_of(user)} == running[user], user
            assert store.user(user).priority == last_priority[user]
    finally:
        store.close()
        if state_dir != tmp_path:
            shutil.rmtree(state_dir, ignore_errors=True)


# A real coordinator process whose job-expiry pass raises (injected: no store state makes a pass
# raise on demand) the first `failures` times.
FAILING_COORDINATOR = """
import sys
from vnode_sync import supervision
from vnode_sync.coordinator import main
from vnode_sync.coordinator.commands.users import Commands

supervision.FIRST_RETRY_SECONDS = 0.05
supervision.FAILURES_BEFORE_GIVING_UP = 4
main.JOB_EXPIRY_CHECK_SECONDS = 0.05
failures_left = int(sys.argv[1])
real_expire = Commands.expire_jobs

def expire_jobs(self):
    global failures_left
    if failures_left:
        failures_left -= 1
        raise OSError("disk I/O error (injected)")
    return real_expire(self)

Commands.expire_jobs = expire_jobs
sys.exit(main.main(sys.argv[2:]))
"""


def _failing_coordinator(tmp_path, failures: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", FAILING_COORDINATOR, str(failures), "--config",
                             write_config(tmp_path), "--print-port"], stdout=subprocess.PIPE,
                            stderr=open(tmp_path / "coordinator.log", "wb"), text=True)


def test_a_coordinator_pass_that_raises_is_retried_and_the_coordinator_keeps_serving(tmp_path):
    process = _failing_coordinator(tmp_path, failures=2)
    try:
        port = int(process.stdout.readline())
        log = tmp_path / "coordinator.log"
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and "recovered after 2 failed passes" not in log.read_text():
            time.sleep(0.1)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            assert pb_grpc.AdminStub(channel).SetPriority(pb.SetPriorityRequest(user="alice", priority=9),
                                                          timeout=5).priority == 9
        assert process.poll() is None
    finally:
        stop_process(process)
    text = (tmp_path / "coordinator.log").read_text()
    assert "job-expiry pass failed" in text and "disk I/O error (injected)" in text
    assert "recovered after 2 failed passes" in text and "Traceback" not in text
    assert process.returncode == 0


def test_a_coordinator_loop_that_cannot_continue_exits_non_zero(tmp_path):
    process = _failing_coordinator(tmp_path, failures=1_000)
    try:
        assert process.wait(30) == 3
    finally:
        stop_process(process)
    text = (tmp_path / "coordinator.log").read_text()
    assert "4 passes failed in a row" in text and "exiting 3 so the service manager restarts" in text
