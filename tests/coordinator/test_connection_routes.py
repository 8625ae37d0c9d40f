"""Connection reports reach only the storage nodes they concern: a node with `endpoints` gets the
connections to those endpoints, over its real stream, at the same generation; the others get nothing."""

import queue
import threading

import grpc
import pytest

from tests.conftest import COORDINATOR_CONFIG, served_coordinator
from vnode_sync.coordinator.config import parse_config
from vnode_sync.errors import ConfigError
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc

DEVICE = {"name": "/dev/loop7", "read_bps": 60_000_000, "write_bps": 30_000_000}
CONFIG = {**COORDINATOR_CONFIG, "storage_nodes": [
    {"id": "dn1", "devices": [DEVICE], "endpoints": ["10.0.0.1:9866"]},
    {"id": "dn2", "devices": [DEVICE], "endpoints": ["10.0.0.2"]},   # every port of that address
    {"id": "dn3", "devices": [DEVICE], "endpoints": ["[fd00::3]:9866", "[::ffff:10.0.0.33]:9866"]},
    {"id": "legacy", "devices": [DEVICE]},                            # no endpoints: every connection
]}


def owner(port: int, server: str, server_port: int = 9866, user: str = "alice") -> pb.ConnectionOwner:
    return pb.ConnectionOwner(client_address="10.9.0.5", client_port=port, user=user, server_address=server,
                              server_port=server_port)


def test_endpoints_are_parsed_normalised_and_bad_ones_refused_in_one_line():
    nodes = {n.node_id: n.endpoints for n in parse_config(CONFIG).storage_nodes}
    assert nodes == {"dn1": (("10.0.0.1", 9866),), "dn2": (("10.0.0.2", None),),
                     "dn3": (("fd00::3", 9866), ("10.0.0.33", 9866)), "legacy": ()}
    for bad in ("dn1.example:9866", "10.0.0.1:0", "10.0.0.1:http"):
        raw = {**COORDINATOR_CONFIG, "storage_nodes": [{"id": "dn1", "devices": [DEVICE], "endpoints": [bad]}]}
        with pytest.raises(ConfigError) as e:
            parse_config(raw, "c.yaml")
        assert str(e.value) == (f"config c.yaml: storage_nodes[0].endpoints[0]: got {bad!r}; allowed: an IP address "
                                "with a port (10.0.0.5:9866, [fd00::5]:9866), or an address alone for every port")


class Watch:
    """A node's real desired-state stream, read on a thread."""

    def __init__(self, channel: grpc.Channel, node_id: str):
        self.states: queue.Queue = queue.Queue()
        self._stream = pb_grpc.AgentLinkStub(channel).WatchDesiredState(pb.WatchRequest(node_id=node_id))
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        try:
            for state in self._stream:
                self.states.put(state)
        except grpc.RpcError:
            pass

    def next(self, timeout: float) -> pb.DesiredState | None:
        try:
            return self.states.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self):
        self._stream.cancel()


def test_a_connection_change_is_sent_only_to_the_nodes_it_concerns_without_a_new_generation(tmp_path):
    with served_coordinator(CONFIG, tmp_path) as (cluster, channel, _):
        watches = {n: Watch(channel, n) for n in ("dn1", "dn2", "dn3", "legacy")}
        try:
            first = {n: w.next(5) for n, w in watches.items()}
            assert all(s is not None and not s.connections for s in first.values())
            generation = cluster.generation()
            link = pb_grpc.AgentLinkStub(channel)
            link.ReportConnections(pb.ConnectionReport(reporter="c1", connections=[
                owner(40001, "10.0.0.1"), owner(40002, "10.0.0.2", 50010, "bob")]), timeout=5)

            dn1, dn2, legacy = watches["dn1"].next(5), watches["dn2"].next(5), watches["legacy"].next(5)
            assert [(c.client_port, c.user) for c in dn1.connections] == [(40001, "alice")]
            assert [(c.client_port, c.user) for c in dn2.connections] == [(40002, "bob")]
            assert {c.client_port for c in legacy.connections} == {40001, 40002}
            assert dn1.generation == dn2.generation == legacy.generation == generation, "no new generation"
            assert watches["dn3"].next(1.0) is None, "dn3's connections did not change: nothing sent to it"
            assert cluster.generation() == generation

            # dn3's IPv4-mapped endpoint; the other nodes' parts are unchanged, so only dn3 and legacy hear.
            link.ReportConnections(pb.ConnectionReport(reporter="c2", connections=[owner(40003, "10.0.0.33")]),
                                   timeout=5)
            assert [c.client_port for c in watches["dn3"].next(5).connections] == [40003]
            assert {c.client_port for c in watches["legacy"].next(5).connections} == {40001, 40002, 40003}
            assert watches["dn1"].next(1.0) is None and watches["dn2"].next(0.1) is None
        finally:
            for watch in watches.values():
                watch.close()


def test_a_storage_end_that_is_not_a_normalised_address_is_refused_and_changes_nothing(tmp_path):
    with served_coordinator(CONFIG, tmp_path) as (cluster, channel, _):
        link = pb_grpc.AgentLinkStub(channel)
        for server, port in (("dn1.example", 9866), ("::ffff:10.0.0.1", 9866), ("10.0.0.1", 70000), ("", 0)):
            with pytest.raises(grpc.RpcError) as e:
                link.ReportConnections(pb.ConnectionReport(reporter="c1", connections=[owner(40001, server, port)]),
                                       timeout=5)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "storage end" in e.value.details()
        assert cluster.runtime.connections_version() == 0
        assert not cluster.publishing.desired_state("dn1").connections
