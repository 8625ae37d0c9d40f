"""`vnodectl status` with jobs as VNodes: each running job of a user is listed with the VNode it is
charged to, or as falling back to its user, with why: no compute agent has reported from its node,
or none has reported a connection of it yet; the desired state every storage node gets carries the
VNode of a job whose connection was reported, with the connection charged to it, and no other job's.
Real coordinator over gRPC."""

import json

import pytest

from tests.conftest import COORDINATOR_CONFIG, served_coordinator
from vnode_sync.ctl import main as vnodectl
from vnode_sync.wire import vnode_pb2 as pb, vnode_pb2_grpc as pb_grpc

CONFIG = {**COORDINATOR_CONFIG, "policy": {"sharing": "work-conserving"}}


@pytest.fixture
def site(tmp_path):
    with served_coordinator(CONFIG, tmp_path) as (cluster, channel, port):
        admin = pb_grpc.AdminStub(channel)
        for job, node, priority in (("77", "cn1", 30), ("78", "cn2", 0), ("79", "cn1", 0)):
            admin.StartJob(pb.JobRequest(job_id=job, user="alice", uid=1001, node=node, requested_priority=priority),
                           timeout=5)
        cluster.publishing.refresh_snapshot()
        # cn1 runs a compute agent: its report names job 77 behind alice's connection; cn2 has none.
        cluster.runtime.report_connections("cn1", [pb.ConnectionOwner(
            client_address="10.0.0.5", client_port=40001, user="alice", server_address="10.0.0.9", server_port=9866,
            job="77")])
        cluster.publishing.publish_connections(cluster.runtime.connections()[1])   # as the fan-out does
        yield cluster, admin, port


def test_a_job_on_a_compute_agents_node_is_its_own_vnode_and_one_elsewhere_falls_back(site, capsys):
    cluster, admin, port = site
    alice = next(us.user for us in admin.Status(pb.StatusRequest(), timeout=5).users if us.user.name == "alice")
    assert [(j.job_id, j.vnode, j.fallback) for j in alice.jobs] == [
        ("77", "alice.77", ""), ("78", "alice.78", "no compute agent on cn2: charged to user alice"),
        ("79", "alice.79", "no connection of it reported yet: charged to user alice")]
    assert vnodectl.main(["--coordinator", f"127.0.0.1:{port}", "status"]) == 0
    out = capsys.readouterr().out
    assert "  alice: job 77 on cn1: VNode alice.77" in out
    assert "  alice: job 78 on cn2: falls back to its user (no compute agent on cn2: charged to user alice)" in out
    assert "  alice: job 79 on cn1: falls back to its user (no connection of it reported yet: charged to user alice)" in out
    assert vnodectl.main(["--coordinator", f"127.0.0.1:{port}", "status", "--json"]) == 0
    users = {u["name"]: u for u in json.loads(capsys.readouterr().out)["users"]}
    assert users["alice"]["jobs"][0] == {"job_id": "77", "node": "cn1", "vnode": "alice.77", "fallback": ""}
    assert "alice.77" in users, "a job's VNode is a row of its own (rates, share)"
    assert not {"alice.78", "alice.79"} & set(users), "a job without a VNode is its user's"


def test_the_storage_node_gets_the_jobs_vnode_and_the_connection_charged_to_it(site):
    cluster, _, _ = site
    state = cluster.publishing.desired_state("dn1")
    spec = {v.user: v for v in state.vnodes}["alice.77"]
    assert (spec.job, spec.job_user, spec.priority) == ("77", "alice", 30)
    assert [v.user for v in state.vnodes if v.job] == ["alice.77"], "no connection of 78 or 79 reported: no VNode"
    connection, = state.connections
    assert (connection.user, connection.job, connection.vnode) == ("alice", "77", "alice.77")


def test_a_malformed_job_id_in_a_connection_report_is_refused_whole(site):
    cluster, _, _ = site
    with pytest.raises(Exception, match="invalid job id"):
        cluster.runtime.report_connections("cn1", [pb.ConnectionOwner(
            client_address="10.0.0.5", client_port=40002, user="alice", server_address="10.0.0.9",
            server_port=9866, job="../../x")])
    _, connections = cluster.runtime.connections()
    assert [c.client_port for c in connections] == [40001], "the earlier report stands"
