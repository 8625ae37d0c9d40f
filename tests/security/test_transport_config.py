"""The tls:/insecure: settings every component shares, and vnodectl's choice of transport."""

import subprocess
import sys

import pytest

from vnode_sync.config_loading import parse
from vnode_sync.errors import InvalidSetting
from vnode_sync.security.tls import SecuredSettings, is_loopback


def transport(raw):
    return parse(raw, SecuredSettings, "c.yaml").security


def test_tls_or_insecure_or_neither():
    assert transport({"tls": {"ca": "a", "cert": "b", "key": "c"}}).tls.server_name == "coordinator"
    assert transport({"insecure": True}).insecure
    assert transport({}).unset


@pytest.mark.parametrize("raw,message", [
    ({"tls": {"ca": "a", "cert": "b", "key": "c"}, "insecure": True},
     "insecure: got True; allowed: false when a tls section is given (keep one of the two)"),
    ({"tls": {"ca": "a", "cert": "b"}}, "tls.key: got nothing; allowed: non-empty text (required)"),
    ({"tls": {"ca": "a", "cert": "b", "key": ""}}, "tls.key: got ''; allowed: non-empty text"),
    ({"tls": {"ca": "a", "cert": "b", "key": "c", "pin": "x"}},
     "tls.pin: got an unknown key (value 'x'); allowed: keys ca, cert, key, server_name"),
    ({"tls": "/etc/pki"}, "tls: got '/etc/pki'; allowed: a mapping with keys ca, cert, key, server_name"),
    ({"insecure": "yes"}, "insecure: got 'yes'; allowed: true or false"),
])
def test_bad_transport_settings_fail_in_one_line(raw, message):
    with pytest.raises(InvalidSetting) as e:
        transport(raw)
    assert str(e.value) == f"config c.yaml: {message}"


@pytest.mark.parametrize("address,loopback", [
    ("127.0.0.1:7070", True), ("127.8.0.1:7070", True), ("localhost:7070", True), ("[::1]:7070", True),
    ("10.0.0.1:7070", False), ("coord.example.org:7070", False), ("[2001:db8::1]:7070", False),
])
def test_loopback_addresses(address, loopback):
    assert is_loopback(address) is loopback


def test_vnodectl_refuses_plaintext_off_this_host_unless_insecure():
    def vnodectl(*args):
        return subprocess.run([sys.executable, "-m", "vnode_sync.ctl.main", "--coordinator", "192.0.2.1:7070",
                               *args, "status"], capture_output=True, text=True, timeout=30)
    refused = vnodectl()
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "no client certificate for coordinator 192.0.2.1:7070" in refused.stderr
    assert vnodectl("--cert", "x.crt").stderr.strip() == \
        "vnodectl: error: mutual TLS needs --ca, --cert and --key; missing --ca, --key"
