"""The coordinator over a real gRPC channel: validation, status codes, the desired-state stream."""

import socket
import threading
import time

import grpc
import pytest

from tests.fakes.reports import usage_report
from vnode_sync.coordinator.api.status_encoding import StatusAnswer
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc

MB = 1_000_000


def admin(channel):
    return pb_grpc.AdminStub(channel)


@pytest.mark.parametrize("request_,code,text", [
    (pb.SetPriorityRequest(user="alice", priority=0), grpc.StatusCode.INVALID_ARGUMENT, "invalid priority 0"),
    (pb.SetPriorityRequest(user="alice", priority=101), grpc.StatusCode.INVALID_ARGUMENT, "invalid priority 101"),
    (pb.SetPriorityRequest(user="../x", priority=5), grpc.StatusCode.INVALID_ARGUMENT, "invalid user name"),
    (pb.SetPriorityRequest(user="a b", priority=5), grpc.StatusCode.INVALID_ARGUMENT, "invalid user name"),
    (pb.SetPriorityRequest(user="x" * 300, priority=5), grpc.StatusCode.INVALID_ARGUMENT, "invalid user name"),
    (pb.SetPriorityRequest(user="mallory", priority=5), grpc.StatusCode.NOT_FOUND, "unknown user 'mallory'"),
])
def test_bad_admin_requests_are_refused_and_change_nothing(coordinator, request_, code, text):
    cluster, channel, _ = coordinator
    generation = cluster.generation()
    with pytest.raises(grpc.RpcError) as e:
        admin(channel).SetPriority(request_, timeout=5)
    assert e.value.code() == code and text in e.value.details()
    assert cluster.generation() == generation
    assert {u.name: u.priority for u in cluster.users()} == {"alice": 4, "bob": 8}


def test_status_shows_algorithm_1_targets(coordinator):
    _, channel, _ = coordinator
    status = admin(channel).Status(pb.StatusRequest(), timeout=5)
    targets = {u.user.name: (u.nodes[0].target_read_bps, u.nodes[0].target_write_bps) for u in status.users}
    assert targets == {"alice": (20 * MB, 10 * MB), "bob": (40 * MB, 20 * MB)}


def test_a_set_priority_does_not_wait_behind_a_status_being_encoded(coordinator, monkeypatch):
    """Status is read on the store thread and encoded off it: while one is encoding (held here
    until released), an admin change is answered."""
    _, channel, _ = coordinator
    encoding, release = threading.Event(), threading.Event()
    real_encode = StatusAnswer.encode

    def held_encode(self):
        encoding.set()
        release.wait(30)
        return real_encode(self)
    monkeypatch.setattr(StatusAnswer, "encode", held_encode)
    status = admin(channel).Status.future(pb.StatusRequest(), timeout=30)
    try:
        assert encoding.wait(10)
        assert admin(channel).SetPriority(pb.SetPriorityRequest(user="alice", priority=7), timeout=5).priority == 7
        assert not status.done()
    finally:
        release.set()
    assert {u.user.name: u.user.priority for u in status.result().users} == {"alice": 4, "bob": 8}  # as read


def test_the_stream_sends_the_whole_state_then_every_new_generation(coordinator):
    cluster, channel, _ = coordinator
    link = pb_grpc.AgentLinkStub(channel)
    link.Register(pb.RegisterRequest(node_id="dn1", backend="blkio-v1",
                                     devices=[pb.Device(name="/dev/loop7", major=7, minor=7)]), timeout=5)
    stream = link.WatchDesiredState(pb.WatchRequest(node_id="dn1"), timeout=10)
    first = next(stream)
    assert {v.user: v.shares[0].read.ceiling_bps for v in first.vnodes} == {"alice": 20 * MB, "bob": 40 * MB}
    assert first.default_vnode.shares[0].read.ceiling_bps == 6 * MB
    admin(channel).SetActive(pb.SetActiveRequest(user="alice", active=False), timeout=5)
    second = next(stream)
    assert second.generation > first.generation
    assert {v.user: v.shares[0].read.ceiling_bps for v in second.vnodes} == {"bob": 60 * MB}
    stream.cancel()


def test_a_cancelled_stream_leaves_the_other_stream_of_its_node_waiting(coordinator):
    """A node's streams share one future per change: one cancelled while waiting (an agent gone)
    does not end the other (its restarted agent), which gets the next generation."""
    cluster, channel, _ = coordinator
    link = pb_grpc.AgentLinkStub(channel)
    link.Register(pb.RegisterRequest(node_id="dn1", backend="blkio-v1",
                                     devices=[pb.Device(name="/dev/loop7", major=7, minor=7)]), timeout=5)
    old, new = (link.WatchDesiredState(pb.WatchRequest(node_id="dn1"), timeout=10) for _ in range(2))
    first, _ = next(old), next(new)
    old.cancel()
    assert wait_until(lambda: cluster.runtime.node_runtime("dn1").streams == 1)
    admin(channel).SetPriority(pb.SetPriorityRequest(user="alice", priority=7), timeout=5)
    assert next(new).generation > first.generation
    new.cancel()


def wait_until(predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_an_unconfigured_node_or_device_is_refused(coordinator):
    _, channel, _ = coordinator
    link = pb_grpc.AgentLinkStub(channel)
    with pytest.raises(grpc.RpcError) as e:
        link.Register(pb.RegisterRequest(node_id="dn9"), timeout=5)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND and "dn9" in e.value.details()
    with pytest.raises(grpc.RpcError) as e:
        link.Register(pb.RegisterRequest(node_id="dn1", devices=[pb.Device(name="/dev/sdz")]), timeout=5)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "/dev/sdz" in e.value.details()


def test_usage_reports_become_measured_rates(coordinator):
    cluster, channel, _ = coordinator
    link = pb_grpc.AgentLinkStub(channel)
    link.StreamUsage(iter([usage_report("dn1", time.time(), {("bob", "/dev/loop7"): (40 * MB, 0.0)},
                                        applied_generation=cluster.generation())]), timeout=5)
    status = admin(channel).Status(pb.StatusRequest(), timeout=5)
    bob = next(u for u in status.users if u.user.name == "bob")
    assert bob.nodes[0].measured_read_bps == pytest.approx(40 * MB)
    assert bob.nodes[0].applied_generation == cluster.generation()


def test_garbage_on_the_wire_is_refused_and_the_server_keeps_serving(coordinator):
    cluster, channel, _ = coordinator
    raw = channel.unary_unary("/vnode_sync.v1.Admin/SetPriority",
                              request_serializer=lambda b: b, response_deserializer=lambda b: b)
    with pytest.raises(grpc.RpcError) as e:
        raw(b"\xff\xff\xff\xff garbage \x00\x01", timeout=5)
    assert e.value.code() in (grpc.StatusCode.INTERNAL, grpc.StatusCode.INVALID_ARGUMENT)
    assert {u.name: u.priority for u in cluster.users()} == {"alice": 4, "bob": 8}
    assert admin(channel).ListUsers(pb.ListUsersRequest(), timeout=5).users


def test_usage_reports_on_one_stream_are_each_taken_and_a_bad_one_ends_the_call(coordinator):
    cluster, channel, _ = coordinator
    link = pb_grpc.AgentLinkStub(channel)
    generation = cluster.generation()
    reports = [usage_report("dn1", float(t), {("alice", "/dev/loop7"): (MB, 0.0)}, applied_generation=generation)
               for t in range(1, 4)]
    assert link.StreamUsage(iter(reports), timeout=5).generation == generation
    assert cluster.runtime.node_runtime("dn1").applied_generation == generation
    for bad, code in ((pb.UsageReport(node_id="dn9"), grpc.StatusCode.NOT_FOUND),):
        with pytest.raises(grpc.RpcError) as e:
            link.StreamUsage(iter([reports[0], bad]), timeout=5)
        assert e.value.code() == code
    garbage = channel.stream_unary("/vnode_sync.v1.AgentLink/StreamUsage", request_serializer=lambda b: b,
                                   response_deserializer=pb.ReportAck.FromString)
    with pytest.raises(grpc.RpcError) as e:
        garbage(iter([b"\xff\xff\xff"]), timeout=5)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_a_taken_address_is_refused_in_the_same_words_whoever_wins_the_race_to_bind(monkeypatch):
    """Two coordinators started at once: the loser's first check may still find the address free and
    gRPC's bind then fails. Both paths give the one wording (they gave two, picked by the race)."""
    from vnode_sync.coordinator.api import server
    from vnode_sync.errors import Unavailable

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    address = f"127.0.0.1:{holder.getsockname()[1]}"
    words = f"cannot listen on '{address}': in use by another process (is another coordinator running?)"
    try:
        with pytest.raises(Unavailable) as checked:
            server.CoordinatorServer(address, None)
        assert str(checked.value) == words

        real_check, checks = server._refuse_if_taken, []

        def free_at_first_check(address_):   # the other coordinator binds right after this check
            checks.append(address_)
            if len(checks) > 1:
                real_check(address_)

        monkeypatch.setattr(server, "_refuse_if_taken", free_at_first_check)
        with pytest.raises(Unavailable) as raced:
            server.CoordinatorServer(address, None)
        assert len(checks) == 2, "gRPC's bind failed after the first check passed"
        assert str(raced.value) == words
    finally:
        holder.close()


def test_a_node_streamed_by_two_agents_at_once_is_flagged_in_the_log_and_in_vnodectl_nodes(coordinator, caplog):
    import subprocess
    import sys
    import time

    _, channel, port = coordinator

    def flags() -> list[str]:
        nodes = admin(channel).ListNodes(pb.ListNodesRequest(), timeout=5).nodes
        return [e for n in nodes if n.node_id == "dn1" for e in n.errors if "agents hold a desired-state stream" in e]

    with grpc.insecure_channel(f"127.0.0.1:{port}") as second_channel:
        first = pb_grpc.AgentLinkStub(channel).WatchDesiredState(pb.WatchRequest(node_id="dn1"), timeout=30)
        next(first)
        assert flags() == [], "one agent: nothing to flag"
        second = pb_grpc.AgentLinkStub(second_channel).WatchDesiredState(pb.WatchRequest(node_id="dn1"), timeout=30)
        next(second)
        assert flags() == ["2 agents hold a desired-state stream as this node: is a second vnode-agent running with "
                           "this node id? (one per host is enforced by a lock; another host is not)"]
        assert "node dn1: 2 agents hold a desired-state stream" in caplog.text
        listed = subprocess.run([sys.executable, "-m", "vnode_sync.ctl.main", "--coordinator", f"127.0.0.1:{port}",
                                 "nodes"], capture_output=True, text=True, timeout=30)
        assert "dn1: error: 2 agents hold a desired-state stream as this node" in listed.stdout, listed.stdout
        second.cancel()
        deadline = time.monotonic() + 10
        while flags() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert flags() == [], "the second agent gone: the flag goes too"
        first.cancel()
