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

import grpc

from vnode_sync.config_loading import reject_unknown_keys, typed
from vnode_sync.errors import ConfigError
from vnode_sync.security.certs import check_certificate
from vnode_sync.security.identity import COORDINATOR_SERVER_NAME

INSECURE_WARNING = ("insecure: true: plaintext gRPC, no authentication and no authorization; "
                    "anyone who can reach %s can change priorities. Lab use only")


@dataclass(frozen=True)
class TlsFiles:
    ca: str     # PEM CA certificate(s) trusted for the peer
    cert: str   # PEM certificate of this component
    key: str    # PEM private key of this component (mode 0600)
    # Name the coordinator's certificate must carry, whatever address is dialled.
    server_name: str = COORDINATOR_SERVER_NAME

    def read(self) -> tuple[bytes, bytes, bytes]:
        check_certificate(self.ca, self.cert, self.key)
        with open(self.ca, "rb") as ca, open(self.cert, "rb") as cert, open(self.key, "rb") as key:
            return ca.read(), cert.read(), key.read()


@dataclass(frozen=True)
class TransportSecurity:
    tls: TlsFiles | None = None
    insecure: bool = False

    @property
    def unset(self) -> bool:
        return self.tls is None and not self.insecure


def parse_transport(section: str, raw_tls, raw_insecure) -> TransportSecurity:
    insecure = typed(section, "insecure", raw_insecure, bool, False)
    if raw_tls is None:
        return TransportSecurity(None, insecure)
    if insecure:
        raise ConfigError(f"{section}: has both tls and insecure: true; keep one")
    if not isinstance(raw_tls, dict):
        raise ConfigError(f"{section}.tls must be a mapping with ca, cert and key paths")
    reject_unknown_keys(f"{section}.tls", raw_tls, {"ca", "cert", "key", "server_name"})
    paths = {k: typed(f"{section}.tls", k, raw_tls.get(k), str, "") for k in ("ca", "cert", "key")}
    missing = [k for k, v in paths.items() if not v]
    if missing:
        raise ConfigError(f"{section}.tls needs {', '.join(missing)} (PEM file paths)")
    server_name = typed(f"{section}.tls", "server_name", raw_tls.get("server_name"), str, COORDINATOR_SERVER_NAME)
    return TransportSecurity(TlsFiles(**paths, server_name=server_name), False)


def server_credentials(files: TlsFiles) -> grpc.ServerCredentials:
    ca, cert, key = files.read()
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=True)


def server_ssl_context(files: TlsFiles) -> ssl.SSLContext:
    """A TLS server context (the metrics endpoint) that requires a client certificate from the CA."""
    check_certificate(files.ca, files.cert, files.key)
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
    """True for 127.0.0.0/8, [::1] and localhost addresses (host:port or unix:)."""
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
        check_certificate(security.tls.ca, security.tls.cert, security.tls.key)
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


def client_channel(address: str, security: TransportSecurity, component: str,
                   log: logging.Logger) -> grpc.Channel:
    """A channel to the coordinator for compute agents and batch hooks, as `security` says."""
    files = tls_for_coordinator(security, address, component, log)
    return secure_channel(address, files) if files else grpc.insecure_channel(address)
