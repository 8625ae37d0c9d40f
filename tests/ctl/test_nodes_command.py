"""`vnodectl nodes add|set|remove` as an admin runs them: real process, real coordinator over gRPC, and
an agent's desired-state stream that gets the change without the coordinator restarting."""

import json

import grpc
import pytest

from tests.ctl.test_vnodectl import vnodectl
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc


def nodes_json(port) -> dict:
    result = vnodectl(port, "nodes", "--json")
    assert result.returncode == 0, result.stderr
    return {n["node_id"]: n for n in json.loads(result.stdout)["nodes"]}


def test_a_capacity_set_with_vnodectl_reaches_the_agents_stream_at_once(coordinator):
    cluster, channel, port = coordinator
    stream = pb_grpc.AgentLinkStub(channel).WatchDesiredState(pb.WatchRequest(node_id="dn1"), timeout=30)
    first = next(stream)
    assert [(d.name, d.read_bps) for d in first.devices] == [("/dev/loop7", 60_000_000)]
    result = vnodectl(port, "nodes", "set", "dn1", "--device", "/dev/loop7:120MB/s:45MB/s")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("set dn1: /dev/loop7(120.0/45.0 MB/s)")
    second = next(stream)
    assert second.generation > first.generation
    assert [(d.name, d.read_bps, d.write_bps) for d in second.devices] == [("/dev/loop7", 120_000_000, 45_000_000)]
    alice = next(v for v in second.vnodes if v.user == "alice")
    assert alice.shares[0].read.ceiling_bps == 40_000_000, "Algorithm 1 on the new capacity: 120 x 4/(4+8)"
    stream.cancel()


def test_a_node_added_listed_and_removed_at_runtime(coordinator):
    cluster, channel, port = coordinator
    added = vnodectl(port, "nodes", "add", "dn2", "--device", "/dev/sdc:200MB/s:150MB/s",
                     "--device", "/dev/sdd:1.5GB/s:1GB/s", "--endpoint", "10.0.0.2:9866")
    assert added.returncode == 0, added.stderr
    assert nodes_json(port)["dn2"]["devices"][1]["read_bps"] == 1_500_000_000
    assert pb_grpc.AgentLinkStub(channel).Register(pb.RegisterRequest(node_id="dn2", backend="blkio-v1"),
                                                   timeout=10).generation == cluster.generation()
    stream = pb_grpc.AgentLinkStub(channel).WatchDesiredState(pb.WatchRequest(node_id="dn2"), timeout=30)
    assert next(stream).node_id == "dn2"
    removed = vnodectl(port, "nodes", "remove", "dn2")
    assert removed.returncode == 0, removed.stderr
    assert next(stream, None) is None, "its stream ends"
    with pytest.raises(grpc.RpcError) as refused:   # and its agent's next Register is refused
        pb_grpc.AgentLinkStub(channel).Register(pb.RegisterRequest(node_id="dn2", backend="blkio-v1"), timeout=10)
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND
    assert set(nodes_json(port)) == {"dn1"}
    again = vnodectl(port, "nodes", "remove", "dn2")
    assert (again.returncode, again.stderr) == (3, "vnodectl: error: unknown storage node 'dn2'\n")


@pytest.mark.parametrize("args,message,code", [
    (("nodes", "add", "dn 2", "--device", "/dev/sdc:1MB/s:1MB/s"), "invalid node id 'dn 2'", 2),
    (("nodes", "add", "dn2", "--device", "/dev/sdc:-5MB/s:1MB/s"), "invalid read capacity of /dev/sdc '-5MB/s'", 2),
    (("nodes", "add", "dn2", "--device", "/dev/sdc:1MB/s:0"), "invalid write capacity of /dev/sdc '0'", 2),
    (("nodes", "add", "dn2", "--device", "/dev/sdc:9000GB/s:1MB/s"), "at most 1TB/s", 2),
    (("nodes", "add", "dn2", "--device", "/dev/sdc"), "use DEVICE:READ:WRITE", 2),
    (("nodes", "add", "dn1", "--device", "/dev/sdc:1MB/s:1MB/s"), "storage node 'dn1' exists already", 2),
    (("nodes", "set", "dn9", "--device", "/dev/sdc:1MB/s:1MB/s"), "unknown storage node 'dn9'", 3),
    (("nodes", "set", "dn1", "--remove-device", "/dev/loop7"), "devices: got", 2),
    (("nodes", "set", "dn1"), "nothing to change", 2),
    (("nodes", "remove", "dn9"), "unknown storage node 'dn9'", 3),
])
def test_bad_node_input_is_one_line_a_nonzero_exit_and_changes_nothing(coordinator, args, message, code):
    cluster, _, port = coordinator
    generation, stored = cluster.generation(), cluster.store.storage_nodes()
    result = vnodectl(port, *args)
    assert result.returncode == code, result.stderr
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert cluster.generation() == generation and cluster.store.storage_nodes() == stored


def test_a_change_survives_a_restart_of_the_coordinator_process_and_the_file_only_seeded(tmp_path):
    from tests.conftest import write_coordinator_config
    from testbed.processes import start_coordinator, stop_process

    config = write_coordinator_config(tmp_path)
    process, port = start_coordinator(config, tmp_path / "first.log")
    try:
        assert vnodectl(port, "nodes", "set", "dn1", "--device", "/dev/loop7:90MB/s:80MB/s").returncode == 0
        assert vnodectl(port, "nodes", "add", "dn2", "--device", "/dev/sdc:1GB/s:1GB/s").returncode == 0
    finally:
        stop_process(process)
    process, port = start_coordinator(config, tmp_path / "second.log")
    try:
        nodes = nodes_json(port)
    finally:
        stop_process(process)
    assert nodes["dn1"]["devices"][0]["read_bps"] == 90_000_000 and set(nodes) == {"dn1", "dn2"}
    assert "the store's are used" in (tmp_path / "second.log").read_text()


def test_a_node_whose_java_agent_is_of_another_release_is_listed_enforcing_and_degraded_in_one_line(coordinator):
    cluster, channel, port = coordinator
    agent = pb_grpc.AgentLinkStub(channel)
    agent.Register(pb.RegisterRequest(node_id="dn1", backend="datanode-throttle"), timeout=10)
    stream = agent.WatchDesiredState(pb.WatchRequest(node_id="dn1"), timeout=30)
    next(stream)
    line = ("DataNode throttle: the Java agent is version 0.2.0, this storage agent 0.3.0: install the jar of "
            "release 0.3.0 and restart the DataNode")
    agent.StreamUsage(iter([pb.UsageReport(node_id="dn1", applied_generation=cluster.generation(), degraded=[line],
                                           demand=pb.DemandSummary(full=True))]), timeout=10)
    listed = vnodectl(port, "nodes")
    assert listed.returncode == 0, listed.stderr
    assert [row.split()[:4] for row in listed.stdout.splitlines() if row.startswith("dn1 ")] == \
        [["dn1", "yes", "datanode-throttle", "yes"]], listed.stdout
    assert [row for row in listed.stdout.splitlines() if "degraded" in row] == [f"dn1: degraded: {line}"]
    assert nodes_json(port)["dn1"]["degraded"] == [line] and nodes_json(port)["dn1"]["enforcing"]
    stream.cancel()
