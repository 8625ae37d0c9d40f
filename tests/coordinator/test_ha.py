"""Several real coordinator processes on a real three-server ZooKeeper ensemble: one leads, the
standbys name it, clients given every address follow it; a SIGKILLed leader is replaced and no
acknowledged change is lost; a leader cut off from ZooKeeper stops publishing at once and a
standby takes over at a higher generation (no generation published by two coordinators)."""

import signal
import threading
import time

import grpc
import pytest

from testbed.ha_coordinators import HACoordinators
from testbed.zookeeper_ensemble import WHY_NO_ZOOKEEPER
from tests.conftest import COORDINATOR_CONFIG, unique_name
from tests.fakes.reports import usage_report
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc
from vnode_sync.wire.leader import LEADER_KEY, dial

pytestmark = [pytest.mark.skipif(WHY_NO_ZOOKEEPER is not None, reason=WHY_NO_ZOOKEEPER or ""), pytest.mark.slow]
SESSION_SECONDS = 3.0


def _stub(address: str):
    return pb_grpc.AdminStub(grpc.insecure_channel(address))


class StreamWatcher:
    """One agent-like WatchDesiredState stream to one coordinator: the generations it sent, and when it ended."""

    def __init__(self, address: str, node_id: str = "dn1"):
        self.generations: list[int] = []
        self.ended_at: float | None = None
        self._channel = grpc.insecure_channel(address)
        self._stream = pb_grpc.AgentLinkStub(self._channel).WatchDesiredState(pb.WatchRequest(node_id=node_id))
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def wait_for(self, count: int = 1, timeout: float = 30.0) -> None:
        """Until the stream has sent `count` states (a fixed sleep is too short on a loaded machine)."""
        deadline = time.monotonic() + timeout
        while len(self.generations) < count:
            assert self.ended_at is None and time.monotonic() < deadline, f"the stream sent {self.generations}"
            time.sleep(0.02)

    def _read(self) -> None:
        try:
            for state in self._stream:
                self.generations.append(state.generation)
        except grpc.RpcError:
            pass
        self.ended_at = time.monotonic()

    def close(self) -> None:
        self._stream.cancel()
        self._channel.close()


def test_standbys_name_the_leader_and_a_client_of_every_address_follows_it(ensemble):
    name = unique_name("ha")
    with HACoordinators(name, ensemble.hosts, dict(COORDINATOR_CONFIG), count=2,
                        session_timeout_seconds=SESSION_SECONDS) as coordinators:
        leader = coordinators.wait_for_leader()
        standby = 1 - leader
        deadline = time.monotonic() + 30
        while True:   # until the standby's watch has read the contenders (a moment; longer on a loaded host)
            with pytest.raises(grpc.RpcError) as refused:
                _stub(f"127.0.0.1:{coordinators.ports[standby]}").ListUsers(pb.ListUsersRequest(), timeout=5)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
            named = dict(refused.value.trailing_metadata() or ()).get(LEADER_KEY)
            if named or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert named == f"127.0.0.1:{coordinators.ports[leader]}"
        agent_link = pb_grpc.AgentLinkStub(grpc.insecure_channel(f"127.0.0.1:{coordinators.ports[standby]}"))
        with pytest.raises(grpc.RpcError) as refused:
            next(agent_link.WatchDesiredState(pb.WatchRequest(node_id="dn1"), timeout=5))
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        with dial(f"127.0.0.1:{coordinators.ports[standby]},127.0.0.1:{coordinators.ports[leader]}",
                  grpc.insecure_channel) as channel:
            user = pb_grpc.AdminStub(channel).SetPriority(pb.SetPriorityRequest(user="alice", priority=9), timeout=10)
        assert user.priority == 9


def test_a_killed_leader_is_replaced_and_keeps_every_acknowledged_change(ensemble):
    name = unique_name("ha")
    with HACoordinators(name, ensemble.hosts, dict(COORDINATOR_CONFIG), count=3,
                        session_timeout_seconds=SESSION_SECONDS) as coordinators:
        leader = coordinators.wait_for_leader()
        with dial(coordinators.addresses, grpc.insecure_channel) as channel:
            admin = pb_grpc.AdminStub(channel)
            admin.SetPriority(pb.SetPriorityRequest(user="alice", priority=33), timeout=10)
            before = admin.ListUsers(pb.ListUsersRequest(), timeout=10).generation
            watcher = StreamWatcher(f"127.0.0.1:{coordinators.ports[leader]}")
            watcher.wait_for()
            killed_at = time.monotonic()
            coordinators.kill(leader, signal.SIGKILL)
            admin.SetPriority(pb.SetPriorityRequest(user="bob", priority=44), timeout=30)
            took = time.monotonic() - killed_at
            after = admin.ListUsers(pb.ListUsersRequest(), timeout=10)
        watcher.close()
        new_leader = coordinators.leader()
        assert new_leader not in (None, leader)
        assert {u.name: u.priority for u in after.users} == {"alice": 33, "bob": 44}
        assert after.generation >= before + 2, "the new leader took a generation of its own, then the change"
        assert took < SESSION_SECONDS + 10, f"a standby served {took:.1f} s after the kill"
        assert max(watcher.generations) <= before


def test_a_leader_cut_off_from_zookeeper_stops_publishing_and_a_standby_takes_over(ensemble):
    """Coordinator 0 reaches ZooKeeper only through server 1; stopping that server cuts it off
    (the other two servers keep a quorum, and serve the standbys)."""
    name = unique_name("ha")
    servers = ensemble.servers
    hosts = [servers[0].address, ",".join(s.address for s in servers[1:]), ",".join(s.address for s in servers[1:])]
    coordinators = HACoordinators(name, hosts, dict(COORDINATOR_CONFIG), count=3,
                                  session_timeout_seconds=SESSION_SECONDS)
    try:
        coordinators.start_one(0)
        assert coordinators.wait_for_leader() == 0
        coordinators.start_one(1)
        coordinators.start_one(2)
        old = StreamWatcher(f"127.0.0.1:{coordinators.ports[0]}")
        old.wait_for()
        cut_at = time.monotonic()
        ensemble.stop_server(0, signal.SIGKILL)
        try:
            new_leader = coordinators.wait_for_leader(timeout=4 * SESSION_SECONDS + 10, among=(1, 2))
            took_over = time.monotonic() - cut_at
            assert new_leader in (1, 2)
            assert old.ended_at is not None and old.ended_at - cut_at < SESSION_SECONDS, \
                "the cut-off leader ended its agents' streams within its session timeout"
            new = StreamWatcher(f"127.0.0.1:{coordinators.ports[new_leader]}")
            new.wait_for()
            _stub(f"127.0.0.1:{coordinators.ports[new_leader]}").SetPriority(
                pb.SetPriorityRequest(user="alice", priority=12), timeout=10)
            new.wait_for(2)
            new.close()
            assert set(old.generations).isdisjoint(new.generations), "no generation published by both"
            assert min(new.generations) > max(old.generations)
            assert coordinators.processes[0].wait(2 * SESSION_SECONDS + 5) != 0, "the cut-off leader gave up"
            assert "lost leadership" in open(coordinators.log_path(0)).read()
            assert took_over < 3 * SESSION_SECONDS + 5
        finally:
            ensemble.start_server(0)
    finally:
        coordinators.stop()


def _stream_port(address: str, node_id: str = "dn1", timeout: float = 30.0) -> int:
    """The fan-out process's port a Register names (0 until the leader's processes serve)."""
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(address) as channel:
        while not (port := pb_grpc.AgentLinkStub(channel).Register(pb.RegisterRequest(node_id=node_id),
                                                                   timeout=10).stream_port):
            assert time.monotonic() < deadline, "no fan-out process serves"
            time.sleep(0.05)
    return port


def test_fan_out_processes_follow_the_leader_cut_off_and_the_new_one(ensemble):
    """fan_out_processes with ZooKeeper: the cut-off leader's processes end their streams within its
    session timeout, as its own; the new leader's processes serve at its higher generation."""
    name = unique_name("ha")
    servers = ensemble.servers
    hosts = [servers[0].address, ",".join(s.address for s in servers[1:])]
    coordinators = HACoordinators(name, hosts, {**COORDINATOR_CONFIG, "fan_out_processes": 2}, count=2,
                                  session_timeout_seconds=SESSION_SECONDS)
    try:
        coordinators.start_one(0)
        assert coordinators.wait_for_leader() == 0
        coordinators.start_one(1)
        old = StreamWatcher(f"127.0.0.1:{_stream_port(f'127.0.0.1:{coordinators.ports[0]}')}")
        old.wait_for()
        cut_at = time.monotonic()
        ensemble.stop_server(0, signal.SIGKILL)
        try:
            assert coordinators.wait_for_leader(timeout=4 * SESSION_SECONDS + 10, among=(1,)) == 1
            assert old.ended_at is not None and old.ended_at - cut_at < SESSION_SECONDS, \
                "the cut-off leader's fan-out process ended its stream within the session timeout"
            new = StreamWatcher(f"127.0.0.1:{_stream_port(f'127.0.0.1:{coordinators.ports[1]}')}")
            new.wait_for()
            new.close()
            assert min(new.generations) > max(old.generations)
        finally:
            ensemble.start_server(0)
    finally:
        coordinators.stop()


def test_a_new_leader_under_the_work_conserving_policy_learns_before_it_sends_states_with_allocations(ensemble):
    """Doorman's rule: the new leader sends a node nothing for learn_seconds while usage reports come
    in; the first state it sends carries an allocation (never the static shares alone first)."""
    name = unique_name("ha")
    config = {**COORDINATOR_CONFIG, "policy": {"sharing": "work-conserving", "control_seconds": 0.2},
              "zookeeper": {"learn_seconds": 2.0}}
    with HACoordinators(name, ensemble.hosts, config, count=2, session_timeout_seconds=SESSION_SECONDS) as co:
        leader = co.wait_for_leader()
        co.kill(leader, signal.SIGKILL)
        new_leader = co.wait_for_leader(timeout=30)
        address = f"127.0.0.1:{co.ports[new_leader]}"
        opened = time.monotonic()
        channel = grpc.insecure_channel(address)
        link = pb_grpc.AgentLinkStub(channel)
        # as an agent does: it registers (a cap-only node here), then streams its reports
        link.Register(pb.RegisterRequest(node_id="dn1", backend="blkio-throttle",
                                         devices=[pb.Device(name="/dev/loop7", major=7, minor=7)]), timeout=15)
        reports = [usage_report("dn1", time.time() + 0.5 * i, {("alice", "/dev/loop7"): (20_000_000, 0.0)})
                   for i in range(1, 4)]

        def paced():
            for report in reports:
                yield report
                time.sleep(0.5)
        threading.Thread(target=lambda: link.StreamUsage(paced(), timeout=10), daemon=True).start()
        first = next(link.WatchDesiredState(pb.WatchRequest(node_id="dn1"), timeout=15))
        waited = time.monotonic() - opened
        channel.close()
        assert waited > 1.0, f"the new leader sent a state {waited:.2f} s after the stream opened, before learning"
        assert first.HasField("allocation") and first.allocation.shares.users, "the first state carries an allocation"


def test_store_commands_of_the_sqlite_file_refuse_a_zookeeper_config(tmp_path):
    from vnode_sync.coordinator.main import main

    config = tmp_path / "coordinator.yaml"
    config.write_text("insecure: true\nzookeeper: {hosts: '127.0.0.1:1', advertise: '127.0.0.1:7070'}\n")
    assert main(["--config", str(config), "backup", str(tmp_path / "copy")]) == 2
    assert not (tmp_path / "copy").exists()


def test_a_batch_hook_given_every_coordinator_reaches_the_new_leader_after_a_kill(ensemble):
    from vnode_sync.batch.client import CoordinatorClient
    from vnode_sync.batch.jobs import JobEvent, JobPhase
    from vnode_sync.security.tls import TransportSecurity

    name = unique_name("ha")
    with HACoordinators(name, ensemble.hosts, dict(COORDINATOR_CONFIG), count=2,
                        session_timeout_seconds=SESSION_SECONDS) as coordinators:
        coordinators.kill(coordinators.wait_for_leader(), signal.SIGKILL)
        with CoordinatorClient(coordinators.addresses, TransportSecurity(insecure=True)) as client:
            outcome = client.send(JobEvent(JobPhase.START, "77", "carol", 1003, "c1"), deadline_seconds=30)
        assert outcome.user_active and outcome.running_jobs == 1
