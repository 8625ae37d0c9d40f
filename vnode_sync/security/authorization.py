"""Who may call which coordinator RPC: the one place the coordinator decides it.

Rules (identities as in `vnode_sync.security.identity`):
- admin:<name>     every Admin RPC, any user, any priority; no AgentLink RPC.
- user:<name>      Status, ListUsers and Pressure, showing only their own user; SetPriority on
                   their own user, only to a value at or below their current priority.
- node:<id>        Register, WatchDesiredState, StreamUsage (each report on it)
                   for node_id == <id>, and
                   only if <id> is a storage node configured on the coordinator.
- compute:<host>   StartJob/EndJob with node == <host>, ReconcileJobs with
                   source == <host> (batch prologue/epilogue on that host), and
                   ReportConnections with reporter == <host>.
- monitor:<name>   the read-only Admin RPCs (ListUsers, ListNodes, Status, Pressure), every user's
                   row; and, with admin:, the metrics endpoints of the coordinator and agents.
- coordinator      nothing: its certificate serves, it does not call.
A call without a verified certificate is UNAUTHENTICATED; a known identity calling
outside its rules is PERMISSION_DENIED. Every refusal goes to the audit log.
"""

import logging
from collections.abc import Callable, Container, Iterable
from typing import TypeVar

from vnode_sync.errors import VNodeSyncError
from vnode_sync.security.audit import AUDIT_LOGGER
from vnode_sync.security.identity import CallerIdentity

audit = logging.getLogger(AUDIT_LOGGER)
Row = TypeVar("Row")

ADMIN_CALLS = frozenset({"AddUser", "SetPriority", "SetActive", "SetReservation", "SetLimit", "RemoveUser",
                         "ListUsers", "ListNodes", "Status", "StartJob", "EndJob", "ReconcileJobs", "Pressure",
                         "AddStorageNode", "SetStorageNode", "RemoveStorageNode",
                         "AddGroup", "SetGroup", "RemoveGroup", "MoveUser", "ListGroups"})
USER_READS = frozenset({"ListUsers", "Status", "Pressure"})
MONITOR_CALLS = frozenset({"ListUsers", "ListNodes", "Status", "Pressure", "ListGroups"})
METRICS_READERS = ("admin", "monitor")
NODE_CALLS = frozenset({"Register", "WatchDesiredState", "StreamUsage"})
# RPC -> the request field that must name the calling compute host.
COMPUTE_CALLS = {"StartJob": "node", "EndJob": "node", "ReconcileJobs": "source", "ReportConnections": "reporter"}


class Unauthenticated(VNodeSyncError):
    """The call carried no certificate this coordinator can verify."""


class PermissionDenied(VNodeSyncError):
    """The caller is known, but its role does not allow this call."""


class AccessPolicy:
    """Enforced whenever the coordinator serves mutual TLS."""

    def __init__(self, storage_nodes: Container[str], priority_of: Callable[[str], int]):
        """`storage_nodes`: the node ids allowed to call as storage nodes, asked at each call (the
        coordinator's set changes when nodes are added or removed at runtime)."""
        self.storage_nodes = storage_nodes
        self.priority_of = priority_of  # a user's current (admin-set) priority; raises NotFound

    def authorize(self, method: str, caller: CallerIdentity | None, request, peer: str) -> CallerIdentity:
        if caller is None:
            self._refuse(Unauthenticated(f"{method} refused: no verified client certificate from {peer}; "
                                         "connect with a certificate issued by this site's CA"), method, peer)
        reason = self._reason_to_refuse(method, caller, request)
        if reason:
            self._refuse(PermissionDenied(f"{method} refused for {caller.common_name}: {reason}"), method,
                         caller.actor)
        return caller

    def _reason_to_refuse(self, method: str, caller: CallerIdentity, request) -> str | None:
        if caller.role == "admin":
            return None if method in ADMIN_CALLS else "administrators do not speak for storage or compute nodes"
        if caller.role == "node":
            if method not in NODE_CALLS:
                return "a storage node certificate may only register, watch desired state and report usage"
            if caller.name not in self.storage_nodes:
                return f"node {caller.name!r} is not a storage node configured on this coordinator"
            if request.node_id != caller.name:
                return f"the certificate names node {caller.name!r}, the request node {request.node_id!r}"
            return None
        if caller.role == "compute":
            field = COMPUTE_CALLS.get(method)
            if field is None:
                return "a compute node certificate may only report jobs and connections of its own host"
            if getattr(request, field) != caller.name:
                return f"the certificate names host {caller.name!r}, the request {field} {getattr(request, field)!r}"
            return None
        if caller.role == "user":
            return self._user_reason(method, caller.name, request)
        if caller.role == "monitor":
            return None if method in MONITOR_CALLS else "a monitor certificate may only read (users, nodes, status)"
        return f"role {caller.role!r} makes no calls"

    def _user_reason(self, method: str, user: str, request) -> str | None:
        if method in USER_READS:
            return None
        if method != "SetPriority":
            return "users may only see their own status and lower their own priority"
        if request.user != user:
            return f"a user may change only their own priority, not {request.user!r}'s"
        current = self.priority_of(user)
        if request.priority > current:
            return f"a user may only lower their priority: {current} -> {request.priority} is a raise; ask an admin"
        return None

    @staticmethod
    def _refuse(error: VNodeSyncError, method: str, actor: str):
        _refuse(error, method, actor)


class OpenAccess:
    """insecure: true (lab): every caller may do everything; the audit log names its address."""

    def authorize(self, method: str, caller: CallerIdentity | None, request, peer: str) -> CallerIdentity:
        return caller or CallerIdentity("anonymous", "", peer)


def _refuse(error: VNodeSyncError, method: str, actor: str):
    audit.warning("actor=%s action=%s refused reason=%r", actor, method, str(error))
    raise error


def authorize_metrics_reader(caller: CallerIdentity) -> CallerIdentity:
    """Metrics name every user and its rates: only admin: and monitor: identities may read them."""
    if caller.role not in METRICS_READERS:
        _refuse(PermissionDenied(f"metrics refused for {caller.common_name}: only admin: and monitor: "
                                 "certificates may read metrics"), "metrics", caller.actor)
    return caller


def readable_by(caller: CallerIdentity, rows: Iterable[Row]) -> list[Row]:
    """The user rows (anything with a `name`) `caller` may read: a user only its own."""
    return [row for row in rows if caller.role != "user" or row.name == caller.name]
