"""Validation gaps at the gRPC API: a uid held by another user, ReconcileJobs without a source,
and reports naming unknown users (ignored, no new generation)."""

import time

import grpc
import pytest

from tests.fakes.reports import usage_report
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc

STORAGE_END = {"server_address": "10.0.0.1", "server_port": 9866}   # as a compute agent sees the storage node


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
    stream = link.WatchDesiredState(pb.WatchRequest(node_id="dn1"), timeout=10)
    first = next(stream)
    link.ReportConnections(pb.ConnectionReport(reporter="c1", connections=[
        pb.ConnectionOwner(client_address="10.0.0.9", client_port=4000, user="nobody", **STORAGE_END),
        pb.ConnectionOwner(client_address="10.0.0.9", client_port=4001, user="alice", **STORAGE_END)]), timeout=5)
    with_connections = next(stream)            # the connection change, sent without a new generation
    stream.cancel()
    assert [(c.client_port, c.user) for c in with_connections.connections] == [(4001, "alice")]
    assert with_connections.generation == first.generation == cluster.generation()
    link.StreamUsage(iter([usage_report("dn1", time.time(), {(user, "/dev/loop7"): (5_000_000, 0.0)
                                                             for user in ("nobody", "alice")})]), timeout=5)
    rates = cluster.runtime.measured_rates("dn1")
    assert rates["alice"].read_bps == 5_000_000 and "nobody" not in rates
    assert cluster.generation() == first.generation


def _state(cluster):
    return (cluster.generation(),
            {u.name: (u.uid, u.priority, u.active, u.reservation_bps, u.limit_bps) for u in cluster.users()},
            {name: cluster.store.jobs_of(name) for name in ("alice", "bob")})


LONG = "a" * 33
GARBAGE = [
    # (service, method, request, code, what the message says)
    ("Admin", "AddUser", pb.AddUserRequest(user="carol", uid=1003, priority=0), "INVALID_ARGUMENT",
     "invalid priority 0: must be an integer from 1 to 100"),
    ("Admin", "AddUser", pb.AddUserRequest(user="carol", uid=1003, priority=1000), "INVALID_ARGUMENT",
     "invalid priority 1000"),
    ("Admin", "AddUser", pb.AddUserRequest(user=LONG, uid=1003, priority=5), "INVALID_ARGUMENT",
     f"invalid user name '{LONG}': use 1-32 characters"),
    ("Admin", "AddUser", pb.AddUserRequest(user="Carol Smith", uid=1003, priority=5), "INVALID_ARGUMENT",
     "invalid user name 'Carol Smith'"),
    ("Admin", "AddUser", pb.AddUserRequest(user="../etc", uid=1003, priority=5), "INVALID_ARGUMENT",
     "invalid user name '../etc'"),
    ("Admin", "AddUser", pb.AddUserRequest(user="carol", uid=0, priority=5), "INVALID_ARGUMENT", "invalid uid 0"),
    ("Admin", "AddUser", pb.AddUserRequest(user="carol", uid=1001, priority=5), "INVALID_ARGUMENT",
     "uid 1001 is already held by user 'alice'"),
    ("Admin", "AddUser", pb.AddUserRequest(user="alice", uid=1001, priority=5), "INVALID_ARGUMENT",
     "user 'alice' exists already"),
    ("Admin", "SetPriority", pb.SetPriorityRequest(user="alice", priority=101), "INVALID_ARGUMENT",
     "invalid priority 101"),
    ("Admin", "SetPriority", pb.SetPriorityRequest(user="alice", priority=2**32 - 1), "INVALID_ARGUMENT",
     "invalid priority 4294967295"),
    ("Admin", "SetPriority", pb.SetPriorityRequest(user="mallory", priority=5), "NOT_FOUND", "unknown user 'mallory'"),
    ("Admin", "SetPriority", pb.SetPriorityRequest(user="alice\nforged", priority=5), "INVALID_ARGUMENT",
     "invalid user name 'alice\\nforged'"),
    ("Admin", "SetReservation", pb.SetRateRequest(user="alice", bps=10**15), "INVALID_ARGUMENT",
     "invalid reservation 1000000000000000: must be a whole number of bytes/s from 0 to 1000000000000"),
    ("Admin", "SetReservation", pb.SetRateRequest(user="mallory", bps=5), "NOT_FOUND", "unknown user 'mallory'"),
    ("Admin", "SetLimit", pb.SetRateRequest(user="alice", bps=2**63), "INVALID_ARGUMENT", "invalid limit"),
    ("Admin", "SetLimit", pb.SetRateRequest(user="mallory", bps=5), "NOT_FOUND", "unknown user 'mallory'"),
    ("Admin", "SetActive", pb.SetActiveRequest(user=LONG, active=False), "INVALID_ARGUMENT", "invalid user name"),
    ("Admin", "SetActive", pb.SetActiveRequest(user="mallory", active=False), "NOT_FOUND", "unknown user 'mallory'"),
    ("Admin", "RemoveUser", pb.UserRequest(user="mallory"), "NOT_FOUND", "unknown user 'mallory'"),
    ("Admin", "StartJob", pb.JobRequest(job_id="j9", user="alice", uid=1001, node="c1", requested_priority=500),
     "INVALID_ARGUMENT", "invalid priority 500"),
    ("Admin", "StartJob", pb.JobRequest(job_id="j9", user="alice", uid=1001, node="c1", reservation_bps=10**13),
     "INVALID_ARGUMENT", "invalid job reservation 10000000000000"),
    ("Admin", "StartJob", pb.JobRequest(job_id="j9\nforged", user="alice", uid=1001, node="c1"), "INVALID_ARGUMENT",
     "invalid job id 'j9\\nforged': use 1-128 printable ASCII characters without spaces"),
    ("Admin", "StartJob", pb.JobRequest(job_id="", user="alice", uid=1001, node="c1"), "INVALID_ARGUMENT",
     "invalid job id ''"),
    ("Admin", "StartJob", pb.JobRequest(job_id="j9", user="alice", uid=1001, node=""), "INVALID_ARGUMENT",
     "invalid node id ''"),
    ("Admin", "StartJob", pb.JobRequest(job_id="j9", user="alice", uid=1001, node="c1", account="a" * 200),
     "INVALID_ARGUMENT", "invalid account"),
    ("Admin", "StartJob", pb.JobRequest(job_id="j9", user="dave", uid=1002, node="c1"), "INVALID_ARGUMENT",
     "uid 1002 is already held by user 'bob'"),
    ("Admin", "StartJob", pb.JobRequest(job_id="j9", user=LONG, uid=1009, node="c1"), "INVALID_ARGUMENT",
     "invalid user name"),
    ("Admin", "EndJob", pb.JobRequest(job_id="j1 ; drop", node="c1"), "INVALID_ARGUMENT", "invalid job id"),
    ("Admin", "EndJob", pb.JobRequest(job_id="j1", node="../c1"), "INVALID_ARGUMENT", "invalid node id '../c1'"),
    ("Admin", "ReconcileJobs", pb.RunningJobsRequest(source="", job_ids=[]), "INVALID_ARGUMENT", "needs a source"),
    ("Admin", "ReconcileJobs", pb.RunningJobsRequest(source="c1", job_ids=["j1", " "]), "INVALID_ARGUMENT",
     "invalid job id ' '"),
    ("AgentLink", "ReportConnections", pb.ConnectionReport(reporter="c1", connections=[
        pb.ConnectionOwner(client_address="10.0.0.9", client_port=4000, user="Bad User", **STORAGE_END)]),
     "INVALID_ARGUMENT",
     "invalid user name 'Bad User'"),
    ("AgentLink", "ReportConnections", pb.ConnectionReport(reporter="c1", connections=[
        pb.ConnectionOwner(client_address="10.0.0.9", client_port=70000, user="alice")]), "INVALID_ARGUMENT",
     "invalid connection '10.0.0.9':70000"),
    ("AgentLink", "ReportConnections", pb.ConnectionReport(reporter="c1", connections=[
        pb.ConnectionOwner(client_address="10.0.0.9", client_port=4000, user="alice")]), "INVALID_ARGUMENT",
     "invalid storage end '':0"),
    ("AgentLink", "Register", pb.RegisterRequest(node_id="dn1", devices=[pb.Device(name="/dev/sdz")]),
     "INVALID_ARGUMENT", "device '/dev/sdz' is not configured for node 'dn1'"),
    ("AgentLink", "Register", pb.RegisterRequest(node_id="a b"), "INVALID_ARGUMENT", "invalid node id 'a b'"),
]


@pytest.mark.parametrize("service,method,request_message,code,message", GARBAGE,
                         ids=[f"{m}-{i}" for i, (_, m, *_) in enumerate(GARBAGE)])
def test_garbage_is_refused_with_a_code_and_a_message_and_changes_nothing(coordinator, service, method,
                                                                          request_message, code, message):
    cluster, channel, _ = coordinator
    admin = pb_grpc.AdminStub(channel)
    admin.StartJob(pb.JobRequest(job_id="j1", user="alice", uid=1001, node="c1"), timeout=5)
    before = _state(cluster)
    stub = pb_grpc.AdminStub(channel) if service == "Admin" else pb_grpc.AgentLinkStub(channel)
    with pytest.raises(grpc.RpcError) as e:
        getattr(stub, method)(request_message, timeout=5)
    assert e.value.code() == getattr(grpc.StatusCode, code)
    assert message in e.value.details() and "\n" not in e.value.details()
    time.sleep(0.1)   # past the batching of connection reports
    assert _state(cluster) == before


def test_a_usage_stream_with_a_garbage_name_is_refused_and_changes_nothing(coordinator):
    cluster, channel, _ = coordinator
    before = _state(cluster)
    link = pb_grpc.AgentLinkStub(channel)
    reports = iter([usage_report("dn1", time.time(), {("alice", "/dev/loop7"): (5.0, 0.0)}),
                    usage_report("dn1", time.time(), {(LONG, "/dev/loop7"): (5.0, 0.0)})])
    with pytest.raises(grpc.RpcError) as e:
        link.StreamUsage(reports, timeout=5)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "invalid user name" in e.value.details()
    assert _state(cluster) == before
