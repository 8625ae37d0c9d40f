"""Mutual TLS on the coordinator: who is refused, with what status, and that nothing changed."""

import grpc
import pytest

from tests.fakes.reports import usage_report
from tests.security.conftest import unchecked_channel
from vnode_sync.agents.storage.link import CoordinatorLink
from vnode_sync.coordinator.api.server import create_server
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc

RAISE_ALICE = pb.SetPriorityRequest(user="alice", priority=90)


def set_priority(channel, request=RAISE_ALICE):
    with channel:
        return pb_grpc.AdminStub(channel).SetPriority(request, timeout=5)


def test_an_admin_certificate_changes_a_priority_and_is_named_in_the_audit_log(tls_coordinator, audit_lines):
    user = set_priority(tls_coordinator.channel("admin", "root"))
    assert user.priority == 90
    assert any(line.startswith("actor=admin:root@ipv4:127.0.0.1:") and "action=set-priority user=alice old=4 new=90"
               in line for line in audit_lines())


def _refused_at_handshake(tls_coordinator, channel) -> grpc.RpcError:
    before = tls_coordinator.snapshot()
    with pytest.raises(grpc.RpcError) as e:
        set_priority(channel)
    assert tls_coordinator.snapshot() == before, "a refused call changed nothing"
    return e.value


def test_a_plaintext_client_is_refused(tls_coordinator):
    error = _refused_at_handshake(tls_coordinator, grpc.insecure_channel(tls_coordinator.address))
    assert error.code() == grpc.StatusCode.UNAVAILABLE


def test_a_client_without_a_certificate_is_refused(tls_coordinator, pki):
    channel = unchecked_channel(tls_coordinator.address, pki.ca)
    error = _refused_at_handshake(tls_coordinator, channel)
    assert error.code() == grpc.StatusCode.UNAVAILABLE


def test_a_certificate_from_another_ca_is_refused(tls_coordinator, pki, foreign_pki):
    foreign = foreign_pki.files("admin", "root")
    # It trusts our CA for the server, so only its own certificate can be the reason.
    channel = unchecked_channel(tls_coordinator.address, pki.ca, foreign)
    error = _refused_at_handshake(tls_coordinator, channel)
    assert error.code() == grpc.StatusCode.UNAVAILABLE


def test_an_expired_certificate_is_refused(tls_coordinator, pki):
    channel = unchecked_channel(tls_coordinator.address, pki.ca, pki.files("admin", "expired"))
    error = _refused_at_handshake(tls_coordinator, channel)
    assert error.code() == grpc.StatusCode.UNAVAILABLE


@pytest.mark.parametrize("role,name", [("node", "dn1"), ("compute", "c1"), ("user", "bob")])
def test_a_non_admin_certificate_calling_an_admin_rpc_is_permission_denied(tls_coordinator, audit_lines, role, name):
    before = tls_coordinator.snapshot()
    with pytest.raises(grpc.RpcError) as e:
        set_priority(tls_coordinator.channel(role, name))
    assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert e.value.details().startswith(f"SetPriority refused for {role}:{name}: ")
    assert tls_coordinator.snapshot() == before
    assert any(f"actor={role}:{name}@" in line and "action=SetPriority refused" in line for line in audit_lines())


def test_a_storage_node_registers_only_as_itself_and_only_if_configured(tls_coordinator):
    with tls_coordinator.channel("node", "dn1") as channel:
        link = pb_grpc.AgentLinkStub(channel)
        assert link.Register(pb.RegisterRequest(node_id="dn1", backend="blkio-v1"), timeout=5)
        # On the report stream each report is checked: one for another node ends the call.
        with pytest.raises(grpc.RpcError) as e:
            link.StreamUsage(iter([pb.UsageReport(node_id="dn1"), pb.UsageReport(node_id="dn2")]), timeout=5)
        assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "the certificate names node 'dn1', the request node 'dn2'" in e.value.details()
    with tls_coordinator.channel("node", "dn9") as channel:
        with pytest.raises(grpc.RpcError) as e:
            pb_grpc.AgentLinkStub(channel).Register(pb.RegisterRequest(node_id="dn9"), timeout=5)
        assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "'dn9' is not a storage node configured" in e.value.details()


def test_the_desired_state_stream_needs_the_nodes_own_certificate(tls_coordinator):
    with tls_coordinator.channel("node", "dn1") as channel:
        first = next(pb_grpc.AgentLinkStub(channel).WatchDesiredState(pb.WatchRequest(node_id="dn1"), timeout=5))
        assert first.node_id == "dn1"
    with tls_coordinator.channel("admin", "root") as channel:
        with pytest.raises(grpc.RpcError) as e:
            next(pb_grpc.AgentLinkStub(channel).WatchDesiredState(pb.WatchRequest(node_id="dn1"), timeout=5))
        assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_a_compute_node_reports_jobs_only_for_its_own_host(tls_coordinator):
    job = pb.JobRequest(job_id="7", user="carol", uid=1003, node="c1")
    with tls_coordinator.channel("compute", "c1") as channel:
        admin = pb_grpc.AdminStub(channel)
        assert admin.StartJob(job, timeout=5).user.name == "carol"
        before = tls_coordinator.snapshot()
        with pytest.raises(grpc.RpcError) as e:
            admin.EndJob(pb.JobRequest(job_id="7", node="c2"), timeout=5)
        assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert tls_coordinator.snapshot() == before


def test_an_agent_believes_only_the_coordinators_certificate(tls_coordinator, pki, foreign_pki):
    """A server holding a certificate of our CA that is not the coordinator's, or another CA's
    coordinator certificate, cannot hand the agent desired state."""
    for server_files in (pki.files("node", "dn9"), foreign_pki.files("coordinator")):
        impostor, port = create_server(tls_coordinator.cluster, "127.0.0.1:0",
                                       credentials=_server_credentials_without_client_check(server_files))
        impostor.start()
        received = []
        link = CoordinatorLink(f"127.0.0.1:{port}", lambda: pb.RegisterRequest(node_id="dn1"), received.append,
                               pki.files("node", "dn1"))
        try:
            with pytest.raises(grpc.RpcError) as e:
                link.stub.Register(pb.RegisterRequest(node_id="dn1"), timeout=5)
            assert e.value.code() == grpc.StatusCode.UNAVAILABLE
            assert received == []
        finally:
            link.stop()
            impostor.stop(0)


def _server_credentials_without_client_check(files):
    with open(files.cert, "rb") as cert, open(files.key, "rb") as key:
        return grpc.ssl_server_credentials([(key.read(), cert.read())])


def _report_both_users_reading(tls_coordinator):
    with tls_coordinator.channel("node", "dn1") as channel:
        link = pb_grpc.AgentLinkStub(channel)
        link.Register(pb.RegisterRequest(node_id="dn1", backend="blkio-v1",
                                         devices=[pb.Device(name="/dev/loop7", major=7, minor=7)]), timeout=5)
        now = tls_coordinator.cluster.ledger.now()
        link.StreamUsage(iter([usage_report("dn1", now, {(u, "/dev/loop7"): (10_000_000, 0.0)
                                                         for u in ("alice", "bob")})]), timeout=5)


def test_a_user_sees_only_their_own_pressure_row_and_a_monitor_sees_all_but_changes_nothing(tls_coordinator):
    _report_both_users_reading(tls_coordinator)
    with tls_coordinator.channel("user", "alice") as channel:
        rows = pb_grpc.AdminStub(channel).Pressure(pb.PressureRequest(), timeout=5).users
    assert [r.user for r in rows] == ["alice"]
    with tls_coordinator.channel("monitor", "prometheus") as channel:
        admin = pb_grpc.AdminStub(channel)
        assert {r.user for r in admin.Pressure(pb.PressureRequest(), timeout=5).users} == {"alice", "bob"}
        assert len(admin.Status(pb.StatusRequest(), timeout=5).users) == 2
        before = tls_coordinator.snapshot()
        with pytest.raises(grpc.RpcError) as e:
            admin.SetPriority(pb.SetPriorityRequest(user="alice", priority=1), timeout=5)
        assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED and "may only read" in e.value.details()
        assert tls_coordinator.snapshot() == before
