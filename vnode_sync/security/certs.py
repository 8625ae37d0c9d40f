"""A small site's PKI: one CA, then a certificate per coordinator, agent, admin and user.

Keys are ECDSA P-256 (gRPC's BoringSSL takes them, and they are quick to make); private
keys are written 0600. Sites with their own PKI skip this and point the configs at
their files, following the naming convention of `vnode_sync.security.identity`.
"""

import datetime
import ipaddress
import os
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from vnode_sync.durable import write_atomically
from vnode_sync.errors import ConfigError, InvalidArgument
from vnode_sync.security.identity import COORDINATOR, COORDINATOR_SERVER_NAME, identity

CA_CERT, CA_KEY = "ca.crt", "ca.key"
CA_DAYS = 3650
LEAF_DAYS = 825  # the CA/Browser Forum ceiling of 2018-2020; rotate by issuing again
SERVING_ROLES = ("node", "compute")   # with host names, their certificates also serve metrics


@dataclass(frozen=True)
class IssuedFiles:
    cert: str
    key: str


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def create_ca(directory: str, common_name: str = "vnode-sync CA", days: int = CA_DAYS) -> IssuedFiles:
    """Make ca.crt and ca.key in `directory`; refuses to replace an existing CA."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    files = IssuedFiles(os.path.join(directory, CA_CERT), os.path.join(directory, CA_KEY))
    if os.path.exists(files.key) or os.path.exists(files.cert):
        raise InvalidArgument(f"a CA already exists in {directory!r}; remove ca.crt and ca.key to make a new one "
                              "(every certificate it issued then stops working)")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = _now()
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    write_atomically(files.key, _key_pem(key), 0o600)
    write_atomically(files.cert, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return files


def _load_ca(directory: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert_path, key_path = os.path.join(directory, CA_CERT), os.path.join(directory, CA_KEY)
    if not os.path.exists(key_path):
        raise ConfigError(f"no CA in {directory!r} (missing {CA_KEY}); run `vnodectl certs init --dir {directory}`")
    with open(cert_path, "rb") as f:
        cert = x509.load_pem_x509_certificate(f.read())
    with open(key_path, "rb") as f:
        key = serialization.load_pem_private_key(f.read(), password=None)
    return cert, key


def _alternative_names(hosts: tuple[str, ...]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def issue(directory: str, role: str, name: str = "", hosts: tuple[str, ...] = (), days: int = LEAF_DAYS,
          valid_from: datetime.datetime | None = None, valid_until: datetime.datetime | None = None,
          out_dir: str | None = None) -> IssuedFiles:
    """Sign a certificate for `role:name` with the CA in `directory`; writes <role>[-<name>].crt/.key.

    The coordinator's certificate names DNS:coordinator (what clients verify) plus `hosts`.
    valid_from/valid_until override the validity window (tests make expired certificates).
    """
    who = identity(role, name)
    ca_cert, ca_key = _load_ca(directory)
    key = ec.generate_private_key(ec.SECP256R1())
    start = valid_from or _now() - datetime.timedelta(minutes=5)
    end = valid_until or start + datetime.timedelta(days=days)
    if end <= start:
        raise InvalidArgument(f"certificate validity ends ({end:%Y-%m-%d}) before it starts ({start:%Y-%m-%d})")
    # A node or compute certificate with host names also serves (its metrics endpoint, scraped by name).
    serves = role == COORDINATOR or (role in SERVING_ROLES and hosts)
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if role == COORDINATOR else
              [ExtendedKeyUsageOID.CLIENT_AUTH, ExtendedKeyUsageOID.SERVER_AUTH] if serves else
              [ExtendedKeyUsageOID.CLIENT_AUTH])
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, who.common_name)]))
               .issuer_name(ca_cert.subject).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                              critical=False))
    if role == COORDINATOR:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(COORDINATOR_SERVER_NAME), *_alternative_names(hosts)]),
            critical=False)
    elif serves:
        builder = builder.add_extension(x509.SubjectAlternativeName(_alternative_names(hosts)), critical=False)
    elif hosts:
        raise InvalidArgument(f"--host is for certificates that serve (coordinator, node, compute), not {role}")
    cert = builder.sign(ca_key, hashes.SHA256())
    target = out_dir or directory
    os.makedirs(target, mode=0o700, exist_ok=True)
    stem = role if role == COORDINATOR else f"{role}-{name}"
    files = IssuedFiles(os.path.join(target, f"{stem}.crt"), os.path.join(target, f"{stem}.key"))
    write_atomically(files.key, _key_pem(key), 0o600)
    write_atomically(files.cert, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return files


def check_certificate(ca_path: str, cert_path: str, key_path: str) -> x509.Certificate:
    """Fail early, in one line, on what the TLS handshake would only reject with a vague error."""
    for what, path in (("CA certificate", ca_path), ("certificate", cert_path), ("private key", key_path)):
        if not os.path.isfile(path):
            raise ConfigError(f"tls: {what} {path!r} does not exist")
    try:
        with open(ca_path, "rb") as f:
            authorities = x509.load_pem_x509_certificates(f.read())
        with open(cert_path, "rb") as f:
            cert, *chain = x509.load_pem_x509_certificates(f.read())
        with open(key_path, "rb") as f:
            key = serialization.load_pem_private_key(f.read(), password=None)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"tls: cannot read {cert_path!r}, {key_path!r} or {ca_path!r} as PEM: {e}") from e
    if key.public_key().public_numbers() != cert.public_key().public_numbers():
        raise ConfigError(f"tls: private key {key_path!r} does not belong to certificate {cert_path!r}")
    now = _now()
    if cert.not_valid_after_utc <= now:
        raise ConfigError(f"tls: certificate {cert_path!r} expired on {cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC")
    if cert.not_valid_before_utc > now:
        raise ConfigError(f"tls: certificate {cert_path!r} is not valid before "
                          f"{cert.not_valid_before_utc:%Y-%m-%d %H:%M} UTC")
    # A sanity check for a clear message, not path validation (the TLS handshake does that):
    # the issuer must be in the CA file or in the chain that follows the certificate.
    if not any(_issued_by(cert, issuer) for issuer in authorities + chain):
        raise ConfigError(f"tls: certificate {cert_path!r} was not issued by the CA in {ca_path!r}")
    return cert


def _issued_by(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(issuer)
        return True
    except (ValueError, TypeError, InvalidSignature):
        return False


def common_name(cert: x509.Certificate) -> str:
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else ""
