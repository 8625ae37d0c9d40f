"""Users see their own status and may only lower their own priority; every change is audited."""

import grpc
import pytest

from vnode_sync.errors import InvalidArgument
from vnode_sync.security.authorization import AccessPolicy, PermissionDenied, Unauthenticated
from vnode_sync.security.identity import CallerIdentity, parse_common_name
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc


def admin_call(tls_coordinator, role, name, method, request):
    with tls_coordinator.channel(role, name) as channel:
        return getattr(pb_grpc.AdminStub(channel), method)(request, timeout=5)


def test_a_user_lowers_their_own_priority_and_the_audit_log_has_old_and_new(tls_coordinator, audit_lines):
    user = admin_call(tls_coordinator, "user", "bob", "SetPriority", pb.SetPriorityRequest(user="bob", priority=3))
    assert user.priority == 3
    assert [line for line in audit_lines() if "action=set-priority" in line] == [
        next(line for line in audit_lines() if line.startswith("actor=user:bob@ipv4:127.0.0.1:")
             and "action=set-priority user=bob old=8 new=3 generation=" in line)]


@pytest.mark.parametrize("target,priority,reason", [
    ("bob", 9, "a user may only lower their priority: 8 -> 9 is a raise; ask an admin"),
    ("bob", 100, "a user may only lower their priority: 8 -> 100 is a raise"),
    ("alice", 1, "a user may change only their own priority, not 'alice''s"),
    ("alice", 50, "a user may change only their own priority"),
])
def test_a_user_cannot_raise_their_priority_or_touch_another_users(tls_coordinator, audit_lines, target, priority,
                                                                   reason):
    before = tls_coordinator.snapshot()
    with pytest.raises(grpc.RpcError) as e:
        admin_call(tls_coordinator, "user", "bob", "SetPriority", pb.SetPriorityRequest(user=target, priority=priority))
    assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert reason in e.value.details()
    assert tls_coordinator.snapshot() == before
    assert [line for line in audit_lines() if "refused" in line and "actor=user:bob@" in line]
    assert not [line for line in audit_lines() if "action=set-priority" in line]


@pytest.mark.parametrize("method,request_", [
    ("AddUser", pb.AddUserRequest(user="bob2", uid=2002, priority=5)),
    ("SetActive", pb.SetActiveRequest(user="bob", active=False)),
    ("RemoveUser", pb.UserRequest(user="alice")),
    ("ListNodes", pb.ListNodesRequest()),
    ("StartJob", pb.JobRequest(job_id="1", user="bob", uid=1002, node="c1")),
])
def test_users_may_not_make_admin_changes(tls_coordinator, method, request_):
    before = tls_coordinator.snapshot()
    with pytest.raises(grpc.RpcError) as e:
        admin_call(tls_coordinator, "user", "bob", method, request_)
    assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert tls_coordinator.snapshot() == before


def test_a_user_sees_only_their_own_status(tls_coordinator):
    status = admin_call(tls_coordinator, "user", "alice", "Status", pb.StatusRequest())
    assert [u.user.name for u in status.users] == ["alice"]
    assert [u.name for u in admin_call(tls_coordinator, "user", "alice", "ListUsers", pb.ListUsersRequest()).users] \
        == ["alice"]
    assert [u.user.name for u in admin_call(tls_coordinator, "admin", "root", "Status", pb.StatusRequest()).users] \
        == ["alice", "bob"]


def test_admins_set_any_priority_and_each_change_is_audited(tls_coordinator, audit_lines):
    admin_call(tls_coordinator, "admin", "root", "SetPriority", pb.SetPriorityRequest(user="bob", priority=100))
    admin_call(tls_coordinator, "admin", "root", "SetActive", pb.SetActiveRequest(user="alice", active=False))
    admin_call(tls_coordinator, "admin", "root", "AddUser", pb.AddUserRequest(user="carol", uid=1003, priority=7))
    admin_call(tls_coordinator, "admin", "root", "RemoveUser", pb.UserRequest(user="carol"))
    changes = [line.split("@", 1)[1].split(" ", 1)[1].split(" generation=")[0] for line in audit_lines()
               if line.startswith("actor=admin:root@")]
    assert changes == ["action=set-priority user=bob old=8 new=100",
                       "action=deactivate user=alice old=True new=False",
                       "action=add-user user=carol uid=1003 priority=7 active=False",
                       "action=remove-user user=carol old_priority=7"]


# ---- the policy itself, without the wire ----------------------------------------

POLICY = AccessPolicy(["dn1"], {"alice": 4, "bob": 8}.__getitem__)


def test_a_call_without_a_certificate_is_unauthenticated():
    with pytest.raises(Unauthenticated, match="no verified client certificate from ipv4:10.0.0.9:1234"):
        POLICY.authorize("Status", None, pb.StatusRequest(), "ipv4:10.0.0.9:1234")


@pytest.mark.parametrize("caller,method,request_", [
    ("coordinator", "Status", pb.StatusRequest()),
    ("admin:root", "Register", pb.RegisterRequest(node_id="dn1")),
    ("node:dn1", "ReportConnections", pb.ConnectionReport(reporter="dn1")),
    ("compute:c1", "ReportConnections", pb.ConnectionReport(reporter="c2")),
    ("compute:c1", "ReconcileJobs", pb.RunningJobsRequest(source="c2")),
    ("compute:c1", "Register", pb.RegisterRequest(node_id="c1")),
    ("user:alice", "Register", pb.RegisterRequest(node_id="dn1")),
])
def test_roles_outside_their_rules_are_denied(caller, method, request_):
    with pytest.raises(PermissionDenied, match=f"{method} refused for {caller}: "):
        POLICY.authorize(method, parse_common_name(caller), request_, "peer")


def test_an_equal_priority_is_not_a_raise():
    caller = CallerIdentity("user", "alice")
    assert POLICY.authorize("SetPriority", caller, pb.SetPriorityRequest(user="alice", priority=4), "p") == caller


@pytest.mark.parametrize("name", ["admin", "admin:", "root:x", "node:../etc", "user:Alice", "coordinator:x", ""])
def test_common_names_outside_the_convention_are_refused(name):
    with pytest.raises(InvalidArgument, match="invalid"):
        parse_common_name(name)
