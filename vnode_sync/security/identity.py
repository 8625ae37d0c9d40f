"""Identities carried in certificate common names, and reading them from a gRPC call.

Convention (the CN of each certificate; `vnodectl certs issue` writes it):

    coordinator          the coordinator (its SAN also holds DNS:coordinator, which agents verify)
    node:<node_id>       a storage agent; must be a storage node configured on the coordinator
    compute:<host>       a compute agent or batch hook (prologue/epilogue) on compute node <host>
    admin:<name>         an administrator
    user:<name>          a cluster user; <name> is the user's name on the coordinator
    monitor:<name>       a monitoring system (Prometheus): reads metrics and status, changes nothing
"""

from dataclasses import dataclass

from vnode_sync import validation
from vnode_sync.errors import InvalidArgument

COORDINATOR = "coordinator"
ROLES = ("coordinator", "node", "compute", "admin", "user", "monitor")
# The name agents and vnodectl expect in the coordinator certificate's SAN, whatever address they dial.
COORDINATOR_SERVER_NAME = "coordinator"


@dataclass(frozen=True)
class CallerIdentity:
    role: str
    name: str = ""
    peer: str = ""  # the transport address, for the audit log

    @property
    def common_name(self) -> str:
        return f"{self.role}:{self.name}" if self.name else self.role

    @property
    def actor(self) -> str:
        """Who did it, as the audit log says it: admin:alice@ipv4:10.0.0.5:41234."""
        return f"{self.common_name}@{self.peer}" if self.peer else self.common_name


def _checked_name(role: str, name: str) -> str:
    if role in ("node", "compute"):
        return validation.node_id(name)
    return validation.user_name(name)


def identity(role: str, name: str = "", peer: str = "") -> CallerIdentity:
    if role not in ROLES:
        raise InvalidArgument(f"invalid role {role!r}: must be one of {', '.join(ROLES)}")
    if role == COORDINATOR:
        if name:
            raise InvalidArgument(f"invalid coordinator identity with name {name!r}: the CN is just 'coordinator'")
        return CallerIdentity(role, "", peer)
    return CallerIdentity(role, _checked_name(role, name), peer)


def parse_common_name(common_name: str, peer: str = "") -> CallerIdentity:
    """'admin:alice' -> CallerIdentity('admin', 'alice'); anything else outside the convention is refused."""
    role, _, name = common_name.partition(":")
    return identity(role, name, peer)


def caller_of(context) -> CallerIdentity | None:
    """The verified certificate identity of a gRPC caller; None if the call carried no certificate.

    gRPC fills x509_common_name only after the TLS handshake verified the chain against
    the configured CA, so the name can be trusted as far as the CA is.
    """
    names = context.auth_context().get("x509_common_name") or []
    if len(names) != 1:
        return None
    try:
        return parse_common_name(names[0].decode(), context.peer())
    except (InvalidArgument, UnicodeDecodeError):
        return None

