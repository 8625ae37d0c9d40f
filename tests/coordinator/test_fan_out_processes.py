"""A coordinator whose agents' streams are served by fan-out processes (fan_out_processes: 2): a real
coordinator process with its children, serving mutual TLS to real agent links (the storage
agent's CoordinatorLink), each with its own node certificate."""

import signal
import threading
import time
from collections.abc import Iterator

import grpc
import psutil
import pytest
import yaml

from tests.coordinator.test_process import start, write_config
from testbed.processes import stop_process
from vnode_sync.agents.storage.link import CoordinatorLink
from vnode_sync.coordinator.fan_out.pipe import share_of
from vnode_sync.security import certs
from vnode_sync.security.tls import TlsFiles, secure_channel
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc

NODES = ("dn1", "dn2", "dn3", "dn4")
PROCESSES = 2


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> tuple[str, str]:
    directory = str(tmp_path_factory.mktemp("pki"))
    ca = certs.create_ca(directory)
    certs.issue(directory, "coordinator", hosts=("127.0.0.1", "localhost"))
    certs.issue(directory, "admin", "root")
    for node in NODES:
        certs.issue(directory, "node", node)
    return directory, ca.cert


def files(pki, stem: str) -> TlsFiles:
    directory, ca = pki
    return TlsFiles(ca=ca, cert=f"{directory}/{stem}.crt", key=f"{directory}/{stem}.key")


class Agents:
    """One real agent link per node, each recording the generations it was sent."""

    def __init__(self, address: str, pki):
        self.generations: dict[str, list[int]] = {node: [] for node in NODES}
        self.links = [CoordinatorLink(address, lambda node=node: pb.RegisterRequest(node_id=node, backend="test"),
                                      lambda state, node=node: self.generations[node].append(state.generation),
                                      files(pki, f"node-{node}")) for node in NODES]
        self.threads = [threading.Thread(target=loop, daemon=True)
                        for link in self.links for loop in (link.run, link.send_reports)]
        for thread in self.threads:
            thread.start()

    def all_watch_fan_out_processes(self, timeout: float = 20.0) -> bool:
        deadline = time.monotonic() + timeout
        while not all(link.stream_port for link in self.links):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def all_have(self, generation: int, timeout: float = 20.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(g and g[-1] >= generation for g in self.generations.values()):
                return True
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        for link in self.links:
            link.stop()


@pytest.fixture
def coordinator(tmp_path, pki) -> Iterator[tuple[psutil.Process, int]]:
    coordinator_files = files(pki, "coordinator")
    config = tmp_path / "coordinator.yaml"
    config.write_text(yaml.safe_dump({
        "listen": "127.0.0.1:0", "state_path": str(tmp_path / "state.sqlite"), "fan_out_processes": PROCESSES,
        "tls": {"ca": coordinator_files.ca, "cert": coordinator_files.cert, "key": coordinator_files.key},
        "users": [{"name": "alice", "uid": 1001, "priority": 4}, {"name": "bob", "uid": 1002, "priority": 8}],
        "storage_nodes": [{"id": n, "devices": [{"name": "/dev/loop7", "read_bps": 60_000_000, "write_bps": 30_000_000}]}
                          for n in NODES]}))
    process, port = start(str(config), tmp_path / "coordinator.log")
    try:
        yield psutil.Process(process.pid), port
    finally:
        stop_process(process)


def children(coordinator: psutil.Process, count: int = PROCESSES, timeout: float = 30.0) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout
    while len(found := coordinator.children()) != count:
        assert time.monotonic() < deadline, f"{len(found)} fan-out processes, not {count}"
        time.sleep(0.05)
    return found


def set_priority(pki, port: int, priority: int) -> int:
    with secure_channel(f"127.0.0.1:{port}", files(pki, "admin-root")) as channel:
        admin = pb_grpc.AdminStub(channel)
        admin.SetPriority(pb.SetPriorityRequest(user="alice", priority=priority), timeout=5)
        return admin.ListUsers(pb.ListUsersRequest(), timeout=5).generation


def register(pki, port: int, node: str) -> pb.RegisterResponse:
    with secure_channel(f"127.0.0.1:{port}", files(pki, f"node-{node}")) as channel:
        return pb_grpc.AgentLinkStub(channel).Register(pb.RegisterRequest(node_id=node, backend="test"), timeout=5)


def listed_at(pki, port: int, generation: int, timeout: float = 20.0) -> bool:
    """Until ListNodes shows every node connected and at `generation` (from their reports)."""
    deadline = time.monotonic() + timeout
    with secure_channel(f"127.0.0.1:{port}", files(pki, "admin-root")) as channel:
        admin = pb_grpc.AdminStub(channel)
        while time.monotonic() < deadline:
            nodes = admin.ListNodes(pb.ListNodesRequest(), timeout=5).nodes
            if all(n.connected and n.applied_generation >= generation for n in nodes):
                return True
            time.sleep(0.05)
    return False


def test_streams_are_served_by_the_fan_out_processes_under_the_same_tls_and_access_rules(coordinator, pki):
    process, port = coordinator
    children(process)
    assert len({share_of(n, PROCESSES) for n in NODES}) == PROCESSES, "the test's nodes use every process"
    deadline = time.monotonic() + 30   # until both have told their ports (meanwhile: 0, streams served here)
    while not all((ports := {n: register(pki, port, n).stream_port for n in NODES}).values()):
        assert time.monotonic() < deadline, ports
        time.sleep(0.05)
    assert all(ports.values()) and len(set(ports.values())) == PROCESSES and port not in ports.values()
    agents = Agents(f"127.0.0.1:{port}", pki)
    try:
        assert agents.all_have(1)
        generation = set_priority(pki, port, 9)
        assert agents.all_have(generation), agents.generations
        # Reports taken by the fan-out processes reach the coordinator.
        for link in agents.links:
            link.report(pb.UsageReport(node_id=link.register().node_id, applied_generation=generation))
        assert listed_at(pki, port, generation)
        shard = f"127.0.0.1:{ports['dn1']}"
        # A node's certificate watches only its own node's state, there as on the coordinator.
        with secure_channel(shard, files(pki, "node-dn1")) as channel:
            with pytest.raises(grpc.RpcError) as e:
                next(pb_grpc.AgentLinkStub(channel).WatchDesiredState(pb.WatchRequest(node_id="dn2"), timeout=5))
            assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
            with pytest.raises(grpc.RpcError) as e:
                pb_grpc.AgentLinkStub(channel).StreamUsage(iter([pb.UsageReport(node_id="dn2")]), timeout=5)
            assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
        # Nothing but the streams is served there, to an administrator either.
        with secure_channel(shard, files(pki, "admin-root")) as channel:
            with pytest.raises(grpc.RpcError) as e:
                pb_grpc.AdminStub(channel).ListUsers(pb.ListUsersRequest(), timeout=5)
            assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
        # A client without a certificate is refused at the handshake.
        with grpc.insecure_channel(shard) as channel:
            with pytest.raises(grpc.RpcError) as e:
                next(pb_grpc.AgentLinkStub(channel).WatchDesiredState(pb.WatchRequest(node_id="dn1"), timeout=5))
            assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        agents.stop()


def test_a_killed_fan_out_process_is_started_again_and_sigterm_ends_all_within_2_s(coordinator, pki):
    process, port = coordinator
    agents = Agents(f"127.0.0.1:{port}", pki)
    try:
        assert agents.all_have(1)
        assert agents.all_watch_fan_out_processes(), "the coordinator started serving once its processes did"
        killed = children(process)[0]
        killed.kill()
        deadline = time.monotonic() + 30
        while killed.pid in {c.pid for c in process.children()} or len(process.children()) != PROCESSES:
            assert time.monotonic() < deadline, "the killed fan-out process was not started again"
            time.sleep(0.05)
        generation = set_priority(pki, port, 11)
        assert agents.all_have(generation), agents.generations
        # The agents that the coordinator served meanwhile are sent back to the restarted process.
        assert agents.all_watch_fan_out_processes(), [link.stream_port for link in agents.links]
        left = children(process)
        t0 = time.monotonic()
        process.send_signal(signal.SIGTERM)
        assert process.wait(5) == 0
        assert time.monotonic() - t0 < 2.0
        gone, alive = psutil.wait_procs(left, timeout=1)
        assert not alive, f"fan-out processes outlived the coordinator: {alive}"
    finally:
        agents.stop()


def test_without_tls_an_unconfigured_node_is_refused_by_a_fan_out_process_which_keeps_serving(tmp_path):
    process, port = start(write_config(tmp_path, fan_out_processes=PROCESSES), tmp_path / "coordinator.log")
    try:
        coordinator = psutil.Process(process.pid)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            link = pb_grpc.AgentLinkStub(channel)
            deadline = time.monotonic() + 30
            while not (stream_port := link.Register(pb.RegisterRequest(node_id="dn1"), timeout=5).stream_port):
                assert time.monotonic() < deadline
                time.sleep(0.05)
        before = {c.pid for c in children(coordinator)}
        with grpc.insecure_channel(f"127.0.0.1:{stream_port}") as channel:
            with pytest.raises(grpc.RpcError) as e:
                next(pb_grpc.AgentLinkStub(channel).WatchDesiredState(pb.WatchRequest(node_id="zz9"), timeout=5))
            assert e.value.code() == grpc.StatusCode.NOT_FOUND
            assert next(pb_grpc.AgentLinkStub(channel).WatchDesiredState(pb.WatchRequest(node_id="dn1"),
                                                                         timeout=5)).node_id == "dn1"
        time.sleep(0.5)
        assert {c.pid for c in children(coordinator)} == before, "no fan-out process ended"
    finally:
        stop_process(process)


def test_a_node_added_at_runtime_is_served_by_its_fan_out_process_and_a_removed_one_refused(tmp_path):
    process, port = start(write_config(tmp_path, fan_out_processes=PROCESSES), tmp_path / "coordinator.log")
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            admin, link = pb_grpc.AdminStub(channel), pb_grpc.AgentLinkStub(channel)
            admin.AddStorageNode(pb.StorageNodeSpec(node_id="dn5", devices=[
                pb.Device(name="/dev/sdc", read_bps=90_000_000, write_bps=80_000_000)]), timeout=5)
            deadline = time.monotonic() + 30
            while not (stream_port := link.Register(pb.RegisterRequest(node_id="dn5"), timeout=5).stream_port):
                assert time.monotonic() < deadline
                time.sleep(0.05)
            with grpc.insecure_channel(f"127.0.0.1:{stream_port}") as served:
                stream = pb_grpc.AgentLinkStub(served).WatchDesiredState(pb.WatchRequest(node_id="dn5"), timeout=10)
                state = next(stream)
                assert (state.node_id, state.devices[0].read_bps) == ("dn5", 90_000_000)
                admin.RemoveStorageNode(pb.StorageNodeRequest(node_id="dn5"), timeout=5)
                assert next(stream, None) is None, "its stream ends"
                with pytest.raises(grpc.RpcError) as e:
                    next(pb_grpc.AgentLinkStub(served).WatchDesiredState(pb.WatchRequest(node_id="dn5"), timeout=5))
                assert e.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        stop_process(process)


def test_a_fan_out_process_takes_the_coordinators_gate():
    """A leader's pause ends a process's streams and its learning holds them (docs/ha.md)."""
    import asyncio

    from vnode_sync.coordinator.api.fan_out_process import StreamsOfShare
    from vnode_sync.security.authorization import OpenAccess

    async def follow() -> None:
        streams = StreamsOfShare(0, 1, {"dn1"}, OpenAccess(), lambda event: None)
        streams.take(pb.FanOutBatch(gate=pb.FanOutGate(learn_seconds=0.2)))
        assert not streams.granting.is_set() and not streams.changes.closing
        await asyncio.sleep(0.3)
        assert streams.granting.is_set()
        streams.take(pb.FanOutBatch(gate=pb.FanOutGate(closed=True)))
        assert streams.changes.closing
        streams.take(pb.FanOutBatch(generation=3))
        assert streams.changes.closing, "a batch without a gate leaves it"
        streams.take(pb.FanOutBatch(gate=pb.FanOutGate(closed=False)))
        assert not streams.changes.closing
    asyncio.run(follow())
