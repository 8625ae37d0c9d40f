"""The coordinator's background loops are supervised, and a node's desired state is built once per generation."""

import asyncio
import logging

from tests.conftest import COORDINATOR_CONFIG
from vnode_sync import supervision
from vnode_sync.coordinator import cluster as cluster_module
from vnode_sync.coordinator import main as coordinator_main
from vnode_sync.coordinator.cluster import Cluster
from vnode_sync.coordinator.config import parse_config
from vnode_sync.coordinator.service import create_server
from vnode_sync.coordinator.store import StateStore
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

    cluster = Cluster(parse_config(dict(COORDINATOR_CONFIG)), StateStore(str(tmp_path / "state.sqlite")))
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
    real_build = cluster_module.build_desired_state
    monkeypatch.setattr(cluster_module, "build_desired_state", lambda *a, **k: builds.append(a[0]) or real_build(*a, **k))
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
