"""Nothing holds the coordinator's event loop: under a load of agents' streams and reports and
admins' changes, asyncio's debug mode (slow_callback_duration 50 ms) flags no callback that
blocks.

The coordinator runs in a process of its own, so the load's client threads do not share its
interpreter lock. On a shared, loaded machine a few callbacks are flagged because the process
or its loop thread was not scheduled (measured here at load 7 on 2 cores: up to 3 flags of one
kind in a 5-s run); a call that blocks is flagged every time it runs. So a kind of callback
fails the test once it is flagged BLOCKING_FLAGS times. The detector itself is checked by a
report handler made to sleep.
"""

import collections
import random
import re
import subprocess
import sys
import threading
import time

import grpc
import pytest
import yaml

from tests.fakes.reports import usage_report
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc

SLOW_CALLBACK_SECONDS = 0.05
BLOCKING_FLAGS = 5
USERS = 10_000
NODES = 20
LOAD_SECONDS = 5.0
LOAD_SECONDS_AT_MOST = 30.0

WATCHED_COORDINATOR = """
import logging, os, sys, time
from vnode_sync.coordinator.cluster import Cluster
from vnode_sync.coordinator.config import load_config
from vnode_sync.coordinator.control.node_runtime import NodeRuntimes
from vnode_sync.coordinator.api.server import create_server
from vnode_sync.coordinator.state.store import StateStore

if os.geteuid() == 0:   # other processes on a shared machine should not count as the loop's own stalls
    os.setpriority(os.PRIO_PROCESS, 0, -10)
logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")
if sys.argv[3] == "sleep-in-report-handler":
    real_report_usage = NodeRuntimes.report_usage

    def report_usage(self, report):
        time.sleep(0.06)   # a blocking call on the loop
        return real_report_usage(self, report)
    NodeRuntimes.report_usage = report_usage
config = load_config(sys.argv[1])
cluster = Cluster(config, StateStore(sys.argv[2], seed_users=config.users))
server, port = create_server(cluster, "127.0.0.1:0", slow_callback_seconds=float(sys.argv[4]))
server.start()
print(port, flush=True)
sys.stdin.read()   # serves until the test closes stdin
server.stop(0)
"""


def _config(tmp_path, users: int, nodes: int) -> str:
    path = tmp_path / "coordinator.yaml"
    path.write_text(yaml.safe_dump({
        "users": [{"name": f"u{i:05d}", "uid": 100_000 + i, "priority": 1 + i % 100} for i in range(users)],
        "storage_nodes": [{"id": f"dn{n:02d}", "devices": [
            {"name": "/dev/sda", "read_bps": 200_000_000, "write_bps": 100_000_000}]} for n in range(nodes)]}))
    return str(path)


class WatchedCoordinator:
    def __init__(self, tmp_path, users: int, nodes: int, variant: str = "as-built"):
        self.process = subprocess.Popen(
            [sys.executable, "-c", WATCHED_COORDINATOR, _config(tmp_path, users, nodes),
             str(tmp_path / "state.sqlite"), variant, str(SLOW_CALLBACK_SECONDS)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(tmp_path / "coordinator.log", "wb"),
            text=True)
        self.log = tmp_path / "coordinator.log"
        port = self.process.stdout.readline().strip()
        assert port, self.log.read_text()
        self.address = f"127.0.0.1:{port}"

    def slow_callbacks(self) -> collections.Counter:
        """Stops the coordinator; how often its loop flagged each kind of callback as slow."""
        self.process.stdin.close()
        self.process.wait(30)
        flagged = collections.Counter()
        for line in self.log.read_text().splitlines():
            if line.startswith("asyncio WARNING Executing") and "took" in line:
                kind = re.search(r"name='([^']*)'|<Handle ([^(]*)", line)
                flagged[kind and (kind[1] or kind[2]) or line] += 1
        return flagged

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _report(node: int, users: list[str], t: float) -> pb.UsageReport:
    return usage_report(f"dn{node:02d}", t, {(user, "/dev/sda"): (1e6, 5e5) for user in users},
                        held={user for i, user in enumerate(users) if i % 7 == 0})


def _enough(counts: dict[str, int], nodes: int) -> bool:
    return counts["changes"] >= 8 and counts["reports"] >= 100 and counts["states"] > nodes


def _load(address: str, seconds: float, nodes: int) -> dict[str, int]:
    """Agents' streams, usage and connection reports, and admins' changes, all at once."""
    done, counts, errors = threading.Event(), {"states": 0, "reports": 0, "changes": 0, "statuses": 0}, []
    channel = grpc.insecure_channel(address, options=[("grpc.max_receive_message_length", 64 << 20)])
    link, admin = pb_grpc.AgentLinkStub(channel), pb_grpc.AdminStub(channel)

    def guarded(work):
        def run():
            try:
                work()
            except Exception as e:  # noqa: BLE001 - reported by the test
                if not done.is_set():
                    errors.append(e)
        return run

    def watch(node: int):
        link.Register(pb.RegisterRequest(node_id=f"dn{node:02d}", backend="blkio-v1",
                                         devices=[pb.Device(name="/dev/sda", major=8, minor=0)]), timeout=10)
        stream = link.WatchDesiredState(pb.WatchRequest(node_id=f"dn{node:02d}"))
        threading.Thread(target=lambda: (done.wait(), stream.cancel()), daemon=True).start()
        try:
            for _ in stream:
                counts["states"] += 1
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:
                raise

    def report_usage():
        rng = random.Random(1)

        def reports():
            while not done.is_set():
                t = time.time()
                for node in range(nodes):
                    users = [f"u{rng.randrange(USERS):05d}" for _ in range(50)] + [f"ghost{node}"]
                    yield _report(node, users, t)
                    counts["reports"] += 1
                done.wait(0.1)   # each node reports every ~0.1 s (agents: report_seconds, 1 s by default)
        link.StreamUsage(reports(), timeout=LOAD_SECONDS_AT_MOST + 30)

    def report_connections():
        rng = random.Random(2)
        while not done.is_set():
            link.ReportConnections(pb.ConnectionReport(reporter=f"c{rng.randrange(3)}", connections=[
                pb.ConnectionOwner(client_address=f"10.1.{rng.randrange(4)}.{i % 250 + 1}", client_port=40_000 + i,
                                   user=f"u{rng.randrange(USERS):05d}", server_address="10.0.0.1",
                                   server_port=9866) for i in range(100)]), timeout=10)
            counts["reports"] += 1
            done.wait(0.1)

    def change():
        rng, added = random.Random(3), 0
        while not done.is_set():
            admin.SetPriority(pb.SetPriorityRequest(user=f"u{rng.randrange(USERS):05d}",
                                                    priority=rng.randrange(1, 100)), timeout=10)
            if counts["changes"] % 5 == 0:
                admin.AddUser(pb.AddUserRequest(user=f"new{added}", uid=300_000 + added, priority=5, active=True),
                              timeout=10)
                added += 1
            counts["changes"] += 1
            done.wait(0.5)   # each change costs the store thread ~0.1 s of CPU here (10,000 users' state)

    def status():
        while not done.is_set():
            admin.Status(pb.StatusRequest(max_entries=1000), timeout=30)
            admin.Pressure(pb.PressureRequest(), timeout=30)
            counts["statuses"] += 1
            done.wait(2.0)

    threads = [threading.Thread(target=guarded(lambda n=n: watch(n)), daemon=True) for n in range(nodes)]
    threads += [threading.Thread(target=guarded(work), daemon=True)
                for work in (report_usage, report_connections, change, status)]
    for thread in threads:
        thread.start()
    # At least `seconds`, and on a slow machine until the load has reached its least counts.
    started = time.monotonic()
    while time.monotonic() - started < seconds or not _enough(counts, nodes):
        if time.monotonic() - started > LOAD_SECONDS_AT_MOST or errors:
            break
        time.sleep(0.1)
    done.set()
    for thread in threads:
        thread.join(30)
    channel.close()
    assert not errors, errors
    return counts


@pytest.mark.slow
def test_no_callback_holds_the_event_loop_longer_than_50_ms_under_load(tmp_path):
    coordinator = WatchedCoordinator(tmp_path, USERS, NODES)
    try:
        counts = _load(coordinator.address, LOAD_SECONDS, NODES)
        slow = coordinator.slow_callbacks()
    finally:
        coordinator.kill()
    assert _enough(counts, NODES), counts
    assert {kind: n for kind, n in slow.items() if n >= BLOCKING_FLAGS} == {}, slow


def test_the_detector_sees_a_report_handler_that_blocks(tmp_path):
    coordinator = WatchedCoordinator(tmp_path, users=2, nodes=1, variant="sleep-in-report-handler")
    try:
        with grpc.insecure_channel(coordinator.address) as channel:
            for _ in range(BLOCKING_FLAGS):
                pb_grpc.AgentLinkStub(channel).StreamUsage(iter([_report(0, ["u00000"], time.time())]), timeout=10)
        slow = coordinator.slow_callbacks()
    finally:
        coordinator.kill()
    assert slow["HandleExceptions[/vnode_sync.v1.AgentLink/StreamUsage]"] >= BLOCKING_FLAGS, slow
