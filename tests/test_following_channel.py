"""A client given several coordinators' addresses follows the leader: a standby's refusal names it,
an unreachable address is skipped, a stream's failure moves the channel; one address is a plain
channel. Real gRPC servers on loopback stand in for a leader and a standby (only their answers
matter here; the coordinator's own standby mode is tested in tests/coordinator/test_ha.py)."""

import time
from concurrent import futures

import grpc
import pytest

from testbed.ports import free_port
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc
from vnode_sync.wire.leader import LEADER_KEY, FollowingChannel, dial, split_addresses


class _Admin(pb_grpc.AdminServicer):
    def __init__(self, leader: str | None):
        self.leader = leader   # None: this one leads
        self.calls = 0

    def SetPriority(self, request, context):
        self.calls += 1
        if self.leader is not None:
            context.set_trailing_metadata(((LEADER_KEY, self.leader),))
            context.abort(grpc.StatusCode.UNAVAILABLE, f"standby; the leader is at {self.leader or 'unknown'}")
        return pb.User(name=request.user, priority=request.priority)


class _Link(pb_grpc.AgentLinkServicer):
    def __init__(self, leader: str | None):
        self.leader = leader

    def WatchDesiredState(self, request, context):
        if self.leader is not None:
            context.set_trailing_metadata(((LEADER_KEY, self.leader),))
            context.abort(grpc.StatusCode.UNAVAILABLE, "standby")
        yield pb.DesiredState(generation=7)


@pytest.fixture
def servers():
    started = []

    def serve(leader: str | None) -> tuple[str, _Admin]:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        admin = _Admin(leader)
        pb_grpc.add_AdminServicer_to_server(admin, server)
        pb_grpc.add_AgentLinkServicer_to_server(_Link(leader), server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        started.append(server)
        return f"127.0.0.1:{port}", admin
    yield serve
    for server in started:
        server.stop(0)


def _unused_address() -> str:
    return f"127.0.0.1:{free_port()}"


def test_addresses_are_split_once_each():
    assert split_addresses(" a:1, b:2,a:1 ,") == ["a:1", "b:2"]


def test_one_address_is_a_plain_channel():
    channel = dial("127.0.0.1:1", grpc.insecure_channel)
    assert not isinstance(channel, FollowingChannel)
    channel.close()


def test_a_call_goes_from_a_dead_address_and_a_standby_to_the_leader_it_names(servers):
    leader, leading = servers(None)
    standby, standing = servers(leader)
    with dial(f"{_unused_address()},{standby}", grpc.insecure_channel) as channel:
        answer = pb_grpc.AdminStub(channel).SetPriority(pb.SetPriorityRequest(user="alice", priority=7), timeout=10)
        assert (answer.name, answer.priority) == ("alice", 7)
        assert channel.current == leader and standing.calls == 1 and leading.calls == 1
        pb_grpc.AdminStub(channel).SetPriority(pb.SetPriorityRequest(user="alice", priority=8), timeout=10)
        assert standing.calls == 1, "later calls go straight to the leader"


def test_a_call_with_no_leader_anywhere_fails_at_its_deadline(servers):
    standby, standing = servers("")
    started = time.monotonic()
    with dial(f"{standby},{_unused_address()}", grpc.insecure_channel) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            pb_grpc.AdminStub(channel).SetPriority(pb.SetPriorityRequest(user="a", priority=1), timeout=1.5)
    assert refused.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    assert 1.4 < time.monotonic() - started < 5 and standing.calls >= 2


def test_a_refusal_that_is_not_about_leadership_is_not_sent_elsewhere(servers):
    leader, _ = servers(None)
    with dial(f"{leader},{_unused_address()}", grpc.insecure_channel) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            pb_grpc.AdminStub(channel).ListUsers(pb.ListUsersRequest(), timeout=5)   # not implemented there
        assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED and channel.current == leader


def test_a_stream_refused_by_a_standby_moves_the_channel_to_the_leader(servers):
    leader, _ = servers(None)
    standby, _ = servers(leader)
    with dial(f"{standby},{leader}", grpc.insecure_channel) as channel:
        stub = pb_grpc.AgentLinkStub(channel)
        with pytest.raises(grpc.RpcError):
            list(stub.WatchDesiredState(pb.WatchRequest(node_id="dn1")))
        assert channel.current == leader
        assert [s.generation for s in stub.WatchDesiredState(pb.WatchRequest(node_id="dn1"))] == [7]


def test_a_standby_naming_a_dead_leader_is_not_asked_in_a_tight_loop(servers):
    """Until ZooKeeper expires a killed leader's session, standbys still name it."""
    dead = _unused_address()
    standby, standing = servers(dead)
    with dial(f"{dead},{standby}", grpc.insecure_channel) as channel:
        with pytest.raises(grpc.RpcError):
            pb_grpc.AdminStub(channel).SetPriority(pb.SetPriorityRequest(user="a", priority=1), timeout=1.5)
    assert 2 <= standing.calls <= 10, f"the standby was asked {standing.calls} times in 1.5 s"
