"""Validation gaps at the gRPC API: a uid held by another user, ReconcileJobs without a source,
and reports naming unknown users (ignored, no new generation)."""

import time

import grpc
import pytest

from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc


def test_a_uid_held_by_another_user_is_refused(coordinator):
    cluster, channel, _ = coordinator
    admin = pb_grpc.AdminStub(channel)
    before = cluster.generation()
    with pytest.raises(grpc.RpcError) as e:
        admin.AddUser(pb.AddUserRequest(user="mallory", uid=1001, priority=3), timeout=5)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "held by user 'alice'" in e.value.details()
    with pytest.raises(grpc.RpcError) as e:
        admin.StartJob(pb.JobRequest(job_id="j1", user="mallory", uid=1002, node="c1"), timeout=5)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "held by user 'bob'" in e.value.details()
    assert cluster.generation() == before
    assert "mallory" not in {u.name for u in cluster.users()}


def test_reconcile_jobs_with_an_empty_source_is_refused_and_drops_nothing(coordinator):
    cluster, channel, _ = coordinator
    admin = pb_grpc.AdminStub(channel)
    admin.StartJob(pb.JobRequest(job_id="j1", user="alice", uid=1001, node="c1"), timeout=5)
    with pytest.raises(grpc.RpcError) as e:
        admin.ReconcileJobs(pb.RunningJobsRequest(source="", job_ids=[]), timeout=5)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "needs a source" in e.value.details()
    assert cluster.store.jobs_of("alice") == [("j1", "c1")]


def test_reports_naming_unknown_users_are_ignored_and_bump_nothing(coordinator):
    cluster, channel, _ = coordinator
    link = pb_grpc.AgentLinkStub(channel)
    before = cluster.generation()
    link.ReportConnections(pb.ConnectionReport(reporter="c1", connections=[
        pb.ConnectionOwner(client_address="10.0.0.9", client_port=4000, user="nobody")]), timeout=5)
    link.ReportUsage(pb.UsageReport(node_id="dn1", sampled_at_unix=time.time(), usage=[
        pb.UserUsage(user="nobody", device="/dev/loop7", read_bytes=5)]), timeout=5)
    time.sleep(1.5)  # past any batching of connection reports into one generation
    assert cluster.generation() == before
    assert "nobody" not in cluster.measured_rates("dn1")
