"""The coordinator's background loops are supervised, and a node's desired state is built once per generation."""

import asyncio
import logging

import grpc

from tests.conftest import COORDINATOR_CONFIG
from vnode_sync import supervision
from vnode_sync.coordinator import main as coordinator_main
from vnode_sync.coordinator.control import publishing as publishing_module
from vnode_sync.coordinator.cluster import Cluster
from vnode_sync.coordinator.config import parse_config
from vnode_sync.coordinator.api.server import create_server
from vnode_sync.coordinator.state.store import StateStore
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc


async def _direct(one_pass):
    one_pass()


def test_a_failing_pass_is_logged_and_retried_and_the_loop_goes_on(monkeypatch, caplog):
    monkeypatch.setattr(supervision, "FIRST_RETRY_SECONDS", 0.01)
    passes = []

    def one_pass():
        passes.append(1)
        if len(passes) <= 2:
            raise OSError("disk I/O error")

    async def run():
        loop = asyncio.create_task(coordinator_main.supervised("job-expiry", one_pass, 0.01, _direct)())
        while len(passes) < 5:
            await asyncio.sleep(0.01)
        assert not loop.done()
        loop.cancel()
    with caplog.at_level(logging.ERROR):
        asyncio.run(run())
    failures = [r.getMessage() for r in caplog.records if "job-expiry pass failed" in r.getMessage()]
    assert len(failures) == 2 and "disk I/O error" in failures[0] and "1 in a row" in failures[0]


def test_a_loop_that_cannot_continue_fails_the_server(monkeypatch, tmp_path):
    monkeypatch.setattr(supervision, "FIRST_RETRY_SECONDS", 0.01)
    monkeypatch.setattr(supervision, "FAILURES_BEFORE_GIVING_UP", 3)

    def one_pass():
        raise OSError("database disk image is malformed")

    config = parse_config(dict(COORDINATOR_CONFIG))
    cluster = Cluster(config, StateStore(str(tmp_path / "state.sqlite"), seed_users=config.users))
    server, _ = create_server(cluster, "127.0.0.1:0",
                              background=(coordinator_main.supervised("job-expiry", one_pass, 0.01, _direct),))
    server.start()
    try:
        assert server.failed.wait(10)
        assert "job-expiry" in server.failure and "3 passes failed in a row" in server.failure
    finally:
        server.stop(0)


def test_each_nodes_desired_state_is_built_once_per_generation_for_every_stream(coordinator, monkeypatch):
    cluster, channel, _ = coordinator
    builds = []
    real_build = publishing_module.build_desired_state
    monkeypatch.setattr(publishing_module, "build_desired_state", lambda *a, **k: builds.append(a[0]) or real_build(*a, **k))
    link, admin = pb_grpc.AgentLinkStub(channel), pb_grpc.AdminStub(channel)
    streams = [link.WatchDesiredState(pb.WatchRequest(node_id="dn1")) for _ in range(10)]
    first = [next(s) for s in streams]
    admin.SetPriority(pb.SetPriorityRequest(user="alice", priority=9), timeout=5)
    second = [next(s) for s in streams]
    for s in streams:
        s.cancel()
    assert len({m.SerializeToString() for m in second}) == 1 and second[0].generation > first[0].generation
    assert {v.user: v.priority for v in second[0].vnodes}["alice"] == 9 and second[0].node_id == "dn1"
    assert builds.count(second[0].generation) == 1, builds


def test_a_stop_that_gRPC_or_a_task_never_finishes_still_returns_and_says_which(monkeypatch, tmp_path, caplog):
    from vnode_sync.coordinator.api import server as server_module
    monkeypatch.setattr(server_module, "STOP_STEP_SECONDS", 0.2)

    async def deaf_to_cancel():
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                pass

    config = parse_config(dict(COORDINATOR_CONFIG))
    cluster = Cluster(config, StateStore(str(tmp_path / "state.sqlite"), seed_users=config.users))
    server, _ = create_server(cluster, "127.0.0.1:0", background=(deaf_to_cancel,))
    server.start()
    real_stop = server._server.stop

    async def unconfirmed_stop(grace):
        await real_stop(grace)
        await asyncio.Event().wait()
    monkeypatch.setattr(server._server, "stop", unconfirmed_stop)
    with caplog.at_level(logging.WARNING):
        assert server.stop(0).is_set()
    warnings = " | ".join(r.getMessage() for r in caplog.records)
    assert "background tasks ['deaf_to_cancel'] did not end" in warnings
    assert "gRPC did not confirm the server's shutdown" in warnings


def test_a_control_loop_wait_cancelled_as_it_is_poked_ends_the_loop():
    """The allocation loop waits for a poke or its period; cancelled in the very step a poke comes
    (an admin change as the server stops), it must end (asyncio.wait_for on 3.11 went on)."""
    outcomes = []

    async def loop(poke):
        while True:
            outcomes.append(await supervision.set_within(poke, 3600))
            poke.clear()

    async def main():
        poke = asyncio.Event()
        task = asyncio.create_task(loop(poke))
        await asyncio.sleep(0)
        poke.set()
        task.cancel()
        done, _ = await asyncio.wait([task], timeout=1)
        assert task in done and task.cancelled()
    asyncio.run(main())
    assert outcomes == []
    assert asyncio.run(supervision.set_within(asyncio.Event(), 0.01)) is False



def _failing_twice(real, error: str):
    failures = [2]

    def flaky(*args):
        if failures[0]:
            failures[0] -= 1
            raise OSError(error)
        return real(*args)
    return flaky, failures


def test_a_publisher_pass_that_fails_is_retried_and_the_streams_get_the_change(coordinator, monkeypatch, caplog):
    cluster, channel, _ = coordinator
    monkeypatch.setattr(supervision, "FIRST_RETRY_SECONDS", 0.01)
    stream = pb_grpc.AgentLinkStub(channel).WatchDesiredState(pb.WatchRequest(node_id="dn1"), timeout=20)
    first = next(stream)
    flaky, failures = _failing_twice(cluster.publishing.refresh_snapshot, "database is locked (injected)")
    monkeypatch.setattr(cluster.publishing, "refresh_snapshot", flaky)
    with caplog.at_level(logging.ERROR):
        pb_grpc.AdminStub(channel).SetPriority(pb.SetPriorityRequest(user="alice", priority=9), timeout=5)
        second = next(stream)
    stream.cancel()
    assert failures == [0] and second.generation > first.generation
    assert {v.user: v.priority for v in second.vnodes}["alice"] == 9
    assert "publisher pass failed (desired-state fan-out, 1 in a row)" in caplog.text


def test_a_control_loop_tick_that_fails_is_retried(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(supervision, "FIRST_RETRY_SECONDS", 0.01)
    raw = dict(COORDINATOR_CONFIG, policy={"sharing": "work-conserving", "control_seconds": 0.05})
    config = parse_config(raw)
    cluster = Cluster(config, StateStore(str(tmp_path / "state.sqlite"), seed_users=config.users))
    flaky, failures = _failing_twice(cluster.weights.tick, "injected tick failure")
    monkeypatch.setattr(cluster.weights, "tick", flaky)
    server, port = create_server(cluster, "127.0.0.1:0")
    server.start()
    try:
        with caplog.at_level(logging.ERROR), grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            link = pb_grpc.AgentLinkStub(channel)
            link.Register(pb.RegisterRequest(node_id="dn1", backend="blkio-v1"), timeout=5)   # a node in the step
            stream = link.WatchDesiredState(pb.WatchRequest(node_id="dn1"), timeout=20)
            state = next(stream)
            while not state.allocation.shares.users:      # the first tick that does not fail sends caps
                state = next(stream)
            stream.cancel()
    finally:
        server.stop(0)
    assert failures == [0] and not server.failed.is_set()
    assert "allocation pass failed (work-conserving control loop, 1 in a row)" in caplog.text
