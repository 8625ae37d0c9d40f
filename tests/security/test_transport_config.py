"""The tls:/insecure: settings every component shares, and vnodectl's choice of transport."""

import subprocess
import sys

import pytest

from vnode_sync.errors import ConfigError
from vnode_sync.security.tls import is_loopback, parse_transport


def test_tls_or_insecure_or_neither():
    assert parse_transport("config", {"ca": "a", "cert": "b", "key": "c"}, None).tls.server_name == "coordinator"
    assert parse_transport("config", None, True).insecure
    assert parse_transport("config", None, None).unset


@pytest.mark.parametrize("tls,insecure,message", [
    ({"ca": "a", "cert": "b", "key": "c"}, True, "has both tls and insecure: true"),
    ({"ca": "a", "cert": "b"}, None, "config.tls needs key"),
    ({"ca": "a", "cert": "b", "key": "c", "pin": "x"}, None, "unknown key(s) 'pin' in config.tls"),
    ("/etc/pki", None, "config.tls must be a mapping"),
    (None, "yes", "config.insecure must be bool"),
])
def test_bad_transport_settings_fail_in_one_line(tls, insecure, message):
    with pytest.raises(ConfigError) as e:
        parse_transport("config", tls, insecure)
    assert message in str(e.value) and "\n" not in str(e.value)


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
