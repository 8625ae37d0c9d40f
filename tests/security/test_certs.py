"""vnodectl certs: a CA and certificates with the naming convention, keys 0600, one-line errors."""

import datetime
import os
import stat
import subprocess
import sys

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from vnode_sync.errors import ConfigError, InvalidArgument
from vnode_sync.security import certs


def vnodectl(*args):
    return subprocess.run([sys.executable, "-m", "vnode_sync.ctl.main", *args], capture_output=True, text=True,
                          timeout=30)


def test_init_and_issue_make_the_files_with_private_keys_0600(tmp_path):
    site = str(tmp_path / "pki")
    assert vnodectl("certs", "init", "--dir", site).returncode == 0
    result = vnodectl("certs", "issue", "--dir", site, "--role", "coordinator", "--host", "coord.example.org",
                      "--host", "10.0.0.1")
    assert result.returncode == 0, result.stderr
    assert vnodectl("certs", "issue", "--dir", site, "--role", "node", "--name", "dn1").returncode == 0
    assert vnodectl("certs", "issue", "--dir", site, "--role", "admin", "--name", "alice").returncode == 0
    for key in ("ca.key", "coordinator.key", "node-dn1.key", "admin-alice.key"):
        assert stat.S_IMODE(os.stat(os.path.join(site, key)).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(site).st_mode) == 0o700
    with open(os.path.join(site, "coordinator.crt"), "rb") as f:
        coordinator = x509.load_pem_x509_certificate(f.read())
    names = coordinator.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["coordinator", "coord.example.org"]
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["10.0.0.1"]
    shown = vnodectl("certs", "show", "--ca", f"{site}/ca.crt", "--cert", f"{site}/node-dn1.crt",
                     "--key", f"{site}/node-dn1.key")
    assert shown.stdout.startswith("node:dn1: valid until ")


def test_an_existing_ca_is_never_replaced(tmp_path):
    certs.create_ca(str(tmp_path))
    result = vnodectl("certs", "init", "--dir", str(tmp_path))
    assert result.returncode == 2 and "a CA already exists" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args,message", [
    (("--role", "user", "--name", "Alice"), "invalid user name 'Alice'"),
    (("--role", "node", "--name", "../x"), "invalid node id '../x'"),
    (("--role", "coordinator", "--name", "x"), "the CN is just 'coordinator'"),
])
def test_names_outside_the_convention_are_refused_in_one_line(tmp_path, args, message):
    certs.create_ca(str(tmp_path))
    result = vnodectl("certs", "issue", "--dir", str(tmp_path), *args)
    assert result.returncode == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_certificate_checks_name_expiry_foreign_ca_and_a_wrong_key(pki, foreign_pki):
    admin = pki.files("admin", "root")
    assert certs.common_name(certs.check_certificate(pki.ca, admin.cert, admin.key)) == "admin:root"
    expired = pki.files("admin", "expired")
    with pytest.raises(ConfigError, match=r"admin-expired.crt' expired on \d{4}-"):
        certs.check_certificate(pki.ca, expired.cert, expired.key)
    foreign = foreign_pki.files("admin", "root")
    with pytest.raises(ConfigError, match="was not issued by the CA"):
        certs.check_certificate(pki.ca, foreign.cert, foreign.key)
    with pytest.raises(ConfigError, match="does not belong to certificate"):
        certs.check_certificate(pki.ca, admin.cert, pki.files("user", "bob").key)


def test_a_validity_window_that_ends_before_it_starts_is_refused(tmp_path):
    certs.create_ca(str(tmp_path))
    now = datetime.datetime.now(datetime.timezone.utc)
    with pytest.raises(InvalidArgument, match="ends .* before it starts"):
        certs.issue(str(tmp_path), "admin", "a", valid_from=now, valid_until=now - datetime.timedelta(days=1))


def test_a_node_certificate_with_host_names_also_serves_its_metrics_endpoint(tmp_path):
    certs.create_ca(str(tmp_path))
    plain = certs.issue(str(tmp_path), "node", "dn1")
    serving = certs.issue(str(tmp_path), "node", "dn2", hosts=("dn2.example.org", "10.0.0.2"))
    with open(plain.cert, "rb") as f:
        usage = x509.load_pem_x509_certificate(f.read()).extensions.get_extension_for_class(x509.ExtendedKeyUsage)
    assert list(usage.value) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    with open(serving.cert, "rb") as f:
        cert = x509.load_pem_x509_certificate(f.read())
    assert set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == {
        ExtendedKeyUsageOID.CLIENT_AUTH, ExtendedKeyUsageOID.SERVER_AUTH}
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["dn2.example.org"]
    with pytest.raises(InvalidArgument, match="--host is for certificates that serve"):
        certs.issue(str(tmp_path), "user", "alice", hosts=("somewhere",))
