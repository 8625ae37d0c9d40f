"""Storage nodes added, changed and removed while the coordinator runs: persisted in the store (the
config file seeds it once), published at once, refused in one line having changed nothing."""

import json
import logging

import pytest

from vnode_sync.coordinator.cluster import Cluster
from vnode_sync.coordinator.config import parse_config
from vnode_sync.coordinator.control.node_edge import Edge
from vnode_sync.coordinator.state.store import StateStore
from vnode_sync.errors import InvalidArgument, NotFound
from vnode_sync.wire import vnode_pb2 as pb

MB = 1_000_000
FILE = {"users": [{"name": "alice", "uid": 1001, "priority": 4, "active": True},
                  {"name": "bob", "uid": 1002, "priority": 8, "active": True}],
        "storage_nodes": [{"id": "dn1", "devices": [{"name": "/dev/sdb", "read_bps": 60 * MB,
                                                     "write_bps": 30 * MB, "read_iops": 500}]}]}


def cluster_of(tmp_path, **extra) -> Cluster:
    config = parse_config({**FILE, **extra})
    return Cluster(config, StateStore(str(tmp_path / "state.sqlite"), seed_users=config.users))


def device(name="/dev/sdb", read=120 * MB, write=90 * MB) -> pb.Device:
    return pb.Device(name=name, read_bps=read, write_bps=write)


def shares(cluster: Cluster, node_id: str) -> dict[str, tuple[int, int]]:
    """user -> (read, write) bytes/s of the node's desired state of the current generation."""
    cluster.publishing.refresh_snapshot()
    return cluster.publishing.targets(node_id)


def test_new_capacities_are_published_at_once_in_a_new_generation(tmp_path):
    cluster = cluster_of(tmp_path)
    assert shares(cluster, "dn1")["alice"] == (20 * MB, 10 * MB), "4/(4+8) of the file's 60/30 MB/s"
    generation = cluster.generation()
    node = cluster.node_commands.set("dn1", [device()], [], None, "admin:test")
    assert cluster.generation() == generation + 1
    assert shares(cluster, "dn1")["alice"] == (40 * MB, 30 * MB)
    state = cluster.publishing.desired_state("dn1")
    assert [(d.name, d.read_bps, d.write_bps) for d in state.devices] == [("/dev/sdb", 120 * MB, 90 * MB)]
    assert node.devices[0].read_iops == 500, "iops the request did not give stay as they were"


def test_a_node_added_at_runtime_is_served_and_a_removed_one_is_refused(tmp_path):
    cluster = cluster_of(tmp_path)
    told = []
    cluster.on_nodes_changed(lambda node_ids, removed: told.append((node_ids, removed)))
    cluster.node_commands.add("dn2", [device("/dev/sdc")], ["10.0.0.2:9866"], "admin:test")
    assert "dn2" in cluster.publishing.nodes, "its agent's certificate is now allowed (the access policy asks this)"
    assert cluster.publishing.desired_state("dn2").node_id == "dn2"
    assert cluster.runtime.node_runtime("dn2").streams == 0
    cluster.node_commands.remove("dn1", "admin:test")
    assert told == [(["dn1", "dn2"], set()), (["dn2"], {"dn1"})], "the server ends its streams, tells its processes"
    assert "dn1" not in cluster.publishing.nodes
    with pytest.raises(NotFound, match="not configured"):
        cluster.runtime.register_node("dn1", [], "blkio-v1", [])
    assert [n.node_id for n in cluster.config.storage_nodes] == ["dn2"]


def test_the_store_wins_over_the_file_at_the_next_start(tmp_path, caplog):
    cluster = cluster_of(tmp_path)
    cluster.node_commands.set("dn1", [device()], [], None, "admin:test")
    cluster.node_commands.add("dn2", [device("/dev/sdc")], [], "admin:test")
    cluster.store.close()
    with caplog.at_level(logging.WARNING):
        again = cluster_of(tmp_path)
    assert [(n.node_id, n.devices[0].read_bps) for n in again.config.storage_nodes] == [("dn1", 120 * MB),
                                                                                      ("dn2", 120 * MB)]
    assert "the store's are used" in caplog.text


@pytest.mark.parametrize("change,error,message", [
    (lambda c: c.add("dn1", [device()], [], "a"), InvalidArgument, "exists already"),
    (lambda c: c.add("dn 2", [device()], [], "a"), InvalidArgument, "invalid node id"),
    (lambda c: c.add("dn2", [], [], "a"), InvalidArgument, "devices"),
    (lambda c: c.add("dn2", [device(read=10**13)], [], "a"), InvalidArgument, "read_bps: got 10000000000000"),
    (lambda c: c.add("dn2", [device(write=0)], [], "a"), InvalidArgument, "write_bps: got 0"),
    (lambda c: c.add("dn2", [device(), device()], [], "a"), InvalidArgument, "a device not listed before"),
    (lambda c: c.add("dn2", [device()], ["not-an-address"], "a"), InvalidArgument, "endpoints"),
    (lambda c: c.set("dn9", [device()], [], None, "a"), NotFound, "unknown storage node 'dn9'"),
    (lambda c: c.set("dn1", [], ["/dev/sdz"], None, "a"), NotFound, "no device '/dev/sdz'"),
    (lambda c: c.set("dn1", [], ["/dev/sdb"], None, "a"), InvalidArgument, "devices"),
    (lambda c: c.remove("dn9", "a"), NotFound, "unknown storage node 'dn9'"),
])
def test_a_bad_change_is_one_line_and_changes_nothing(tmp_path, change, error, message):
    cluster = cluster_of(tmp_path)
    generation, stored = cluster.generation(), cluster.store.storage_nodes()
    with pytest.raises(error, match=message) as raised:
        change(cluster.node_commands)
    assert "\n" not in str(raised.value)
    assert cluster.generation() == generation and cluster.store.storage_nodes() == stored
    assert [n.node_id for n in cluster.config.storage_nodes] == ["dn1"]


def test_a_capacity_below_the_admitted_reservations_is_refused(tmp_path):
    cluster = cluster_of(tmp_path, policy={"sharing": "work-conserving"})
    cluster.commands.set_reservation("alice", 20 * MB, "admin:test")
    generation = cluster.generation()
    with pytest.raises(InvalidArgument, match="reservations would total 20.0 MB/s"):
        cluster.node_commands.set("dn1", [device(write=10 * MB)], [], None, "admin:test")
    assert cluster.generation() == generation


def test_work_conserving_takes_capacities_and_nodes_added_or_removed_in_place(tmp_path):
    """No coordinator restart: the weight step's columns follow at once."""
    cluster = cluster_of(tmp_path, policy={"sharing": "work-conserving"})
    cluster.node_commands.set("dn1", [device()], [], None, "admin:test")
    assert list(cluster.weights._book_columns.capacity) == [120 * MB, 90 * MB], "the next weight step steps on them"
    generation = cluster.generation()
    cluster.node_commands.add("dn2", [device("/dev/sdc"), device("/dev/sdd")], [], "admin:test")
    assert cluster.generation() == generation + 1 and "dn2" in cluster.publishing.nodes
    assert cluster.weights._book_columns.node_ids == ["dn1", "dn2"] and len(cluster.weights._book_columns) == 6
    cluster.runtime.register_node("dn2", [], "datanode-throttle", [], Edge(by_weight=True, per_node=True))
    assert cluster.weights.manages("dn2")
    cluster.node_commands.remove("dn1", "admin:test")
    assert cluster.weights._book_columns.node_ids == ["dn2"] and cluster.weights.manages("dn2")
    cluster.control_tick(cluster.users())   # a step on the new layout
    cluster.store.close()
    again = cluster_of(tmp_path, policy={"sharing": "work-conserving"})
    assert "dn2" in again.publishing.nodes and "dn1" not in again.publishing.nodes


def test_a_fan_out_process_takes_the_node_list_it_is_sent(tmp_path):
    """Its access policy and its streams share the set the coordinator's batches update."""
    from vnode_sync.coordinator.api.fan_out_process import StreamsOfShare
    from vnode_sync.security.authorization import AccessPolicy, PermissionDenied
    from vnode_sync.security.identity import CallerIdentity

    nodes = {"dn1"}
    streams = StreamsOfShare(0, 2, nodes, AccessPolicy(nodes, lambda user: 10), lambda event: None)
    streams.take(pb.FanOutBatch(generation=5, states=[pb.FanOutState(node_id="dn1", message=b"x")],
                                nodes=pb.FanOutNodes(node_ids=["dn1", "dn2"])))
    streams.access.authorize("StreamUsage", CallerIdentity("node", "dn2"), pb.UsageReport(node_id="dn2"), "peer")
    streams.take(pb.FanOutBatch(generation=6, nodes=pb.FanOutNodes(node_ids=["dn2"])))
    assert nodes == {"dn2"} and streams.messages == {} and streams.changes.moves_of("dn1") == 1
    with pytest.raises(PermissionDenied):
        streams.access.authorize("StreamUsage", CallerIdentity("node", "dn1"), pb.UsageReport(node_id="dn1"), "peer")
    streams.take(pb.FanOutBatch(generation=7))
    assert nodes == {"dn2"}, "a batch without the list leaves it"


def test_each_change_is_audited_with_old_and_new(tmp_path, caplog):
    cluster = cluster_of(tmp_path)
    with caplog.at_level(logging.INFO, logger="vnode_sync.audit"):
        cluster.node_commands.set("dn1", [device()], [], None, "admin:alice")
    line = next(r.getMessage() for r in caplog.records if "set-storage-node" in r.getMessage())
    assert "actor=admin:alice" in line and '"read_bps":60000000' in line and '"read_bps":120000000' in line
    assert all("=" in pair for pair in line.split()), "key=value pairs, split on spaces"
    assert json.loads(cluster.store.storage_nodes()["dn1"])["devices"][0]["read_bps"] == 120 * MB


def test_the_access_policy_follows_the_nodes_an_admin_adds_and_removes(tmp_path):
    """Under mutual TLS the server's policy holds the coordinator's live node set (server.py)."""
    from vnode_sync.security.authorization import AccessPolicy, PermissionDenied
    from vnode_sync.security.identity import CallerIdentity

    cluster = cluster_of(tmp_path)
    policy = AccessPolicy(cluster.publishing.nodes, lambda user: 10)
    agent, request = CallerIdentity("node", "dn2"), pb.RegisterRequest(node_id="dn2")
    with pytest.raises(PermissionDenied, match="not a storage node configured"):
        policy.authorize("Register", agent, request, "peer")
    cluster.node_commands.add("dn2", [device("/dev/sdc")], [], "admin:test")
    assert policy.authorize("Register", agent, request, "peer") is agent
    for method in ("AddStorageNode", "SetStorageNode", "RemoveStorageNode"):
        assert policy.authorize(method, CallerIdentity("admin", "ops"), pb.StorageNodeRequest(), "peer")
        with pytest.raises(PermissionDenied):
            policy.authorize(method, CallerIdentity("monitor", "grafana"), pb.StorageNodeRequest(), "peer")
    cluster.node_commands.remove("dn2", "admin:test")
    with pytest.raises(PermissionDenied):
        policy.authorize("Register", agent, request, "peer")
