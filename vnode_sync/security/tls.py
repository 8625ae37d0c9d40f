"""Transport security settings shared by the coordinator, agents and vnodectl.

Each component's config has either a `tls:` section (ca, cert, key: PEM paths) or
`insecure: true` (plaintext, lab only, warned about on every start). Every TLS
connection is mutual: the coordinator requires a client certificate from the CA,
and clients require the coordinator's certificate (SAN DNS:coordinator) from the CA.
"""

import ipaddress
import logging
import ssl
from dataclasses import dataclass
from typing import Annotated

import annotated_types as at
import grpc
from pydantic import model_validator

from vnode_sync.config_loading import Group, Refused, Settings
from vnode_sync.errors import ConfigError
from vnode_sync.security.identity import COORDINATOR_SERVER_NAME

INSECURE_WARNING = ("insecure: true: plaintext gRPC, no authentication and no authorization; "
                    "anyone who can reach %s can change priorities. Lab use only")


class TlsFiles(Settings):
    """The `tls:` section: this component's certificate and key, and the CA its peers must chain to."""

    ca: Annotated[str, at.MinLen(1)]
    """PEM CA certificate(s) trusted for the peer."""
    cert: Annotated[str, at.MinLen(1)]
    """PEM certificate of this component."""
    key: Annotated[str, at.MinLen(1)]
    """PEM private key of this component (mode 0600)."""
    server_name: Annotated[str, at.MinLen(1)] = COORDINATOR_SERVER_NAME
    """Name the coordinator's certificate must carry, whatever address is dialled."""

    def read(self) -> tuple[bytes, bytes, bytes]:
        _check(self)
        with open(self.ca, "rb") as ca, open(self.cert, "rb") as cert, open(self.key, "rb") as key:
            return ca.read(), cert.read(), key.read()


@dataclass(frozen=True)
class TransportSecurity:
    tls: TlsFiles | None = None
    insecure: bool = False

    @property
    def unset(self) -> bool:
        return self.tls is None and not self.insecure


class SecuredSettings(Settings):
    """Base of every config that talks gRPC: a `tls:` section, or `insecure: true`, or neither."""

    tls: TlsFiles | None = None
    """Mutual TLS (PEM paths), made with `vnodectl certs`; the README says how."""
    insecure: Annotated[bool, Group("Transport (with the `tls:` section)")] = False
    """Plaintext, no authentication: lab use only, warned about on every start. Off, so that
    forgetting `tls:` never opens the cluster to anyone on the network."""

    @model_validator(mode="after")
    def _tls_or_insecure(self):
        if self.tls is not None and self.insecure:
            raise Refused("insecure", True, "false when a tls section is given (keep one of the two)")
        return self

    @property
    def security(self) -> TransportSecurity:
        return TransportSecurity(self.tls, self.insecure)


def _check(files: TlsFiles) -> None:
    """vnode_sync.security.certs.check_certificate on the files. Imported here, not above: cryptography
    takes seconds to load on a slow CPU, and only a process that uses TLS needs it."""
    from vnode_sync.security.certs import check_certificate
    check_certificate(files.ca, files.cert, files.key)


def server_credentials(files: TlsFiles) -> grpc.ServerCredentials:
    ca, cert, key = files.read()
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=True)


def server_ssl_context(files: TlsFiles) -> ssl.SSLContext:
    """A TLS server context (the metrics endpoint) that requires a client certificate from the CA."""
    _check(files)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(files.cert, files.key)
    context.load_verify_locations(files.ca)
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def secure_channel(address: str, files: TlsFiles, options: list[tuple] = ()) -> grpc.Channel:
    """A mutual-TLS channel that accepts only a peer certified as `files.server_name` by the CA."""
    ca, cert, key = files.read()
    credentials = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
    return grpc.secure_channel(address, credentials,
                               options=[("grpc.ssl_target_name_override", files.server_name), *options])


def is_loopback(address: str) -> bool:
    """True for 127.0.0.0/8, [::1] and localhost addresses (host:port or unix:); of several
    (comma-separated, HA coordinators), True if every one is."""
    if "," in address:
        return all(is_loopback(part.strip()) for part in address.split(",") if part.strip())
    if address.startswith("unix:"):
        return True
    host = address.rsplit(":", 1)[0].strip("[]") if ":" in address else address
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def tls_for_coordinator(security: TransportSecurity, address: str, component: str,
                        log: logging.Logger) -> TlsFiles | None:
    """The TLS files to dial the coordinator with, checked; None means plaintext, allowed only if
    insecure: true or the coordinator is on this host (loopback), and warned about either way.
    """
    if security.tls is not None:
        _check(security.tls)
        return security.tls
    if security.insecure:
        log.warning("%s: insecure: true: plaintext to coordinator %s; anyone on the path can read and forge "
                    "what it says. Lab use only", component, address)
    elif is_loopback(address):
        log.warning("%s: no tls configured: plaintext to coordinator %s on this host", component, address)
    else:
        raise ConfigError(f"{component}: no tls section: refusing plaintext to coordinator {address}; "
                          "set tls: {ca, cert, key} or insecure: true (lab only)")
    return None

