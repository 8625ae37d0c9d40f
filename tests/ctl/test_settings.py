"""vnodectl's config file: read by the one loader, bad values refused in one line."""

import pytest

from vnode_sync.ctl.settings import load_ctl_settings
from vnode_sync.errors import InvalidSetting


def test_the_file_names_the_coordinator_and_the_certificate(tmp_path):
    path = tmp_path / "vnodectl.yaml"
    path.write_text("coordinator: coord:7070\ntls: {ca: ca.crt, cert: admin.crt, key: admin.key}\n")
    settings = load_ctl_settings(str(path))
    assert settings.coordinator == "coord:7070" and settings.security.tls.cert == "admin.crt"


@pytest.mark.parametrize("text,message", [
    ("coordinatr: coord:7070", "coordinatr: got an unknown key (value 'coord:7070'); allowed: keys tls, insecure, "
                               "coordinator"),
    ("coordinator: 7070", "coordinator: got 7070; allowed: text"),
    ("tls: {ca: a, cert: b, key: c, pin: x}",
     "tls.pin: got an unknown key (value 'x'); allowed: keys ca, cert, key, server_name"),
    ("insecure: maybe", "insecure: got 'maybe'; allowed: true or false"),
])
def test_bad_values_are_refused_in_one_line(tmp_path, text, message):
    path = tmp_path / "vnodectl.yaml"
    path.write_text(text)
    with pytest.raises(InvalidSetting) as e:
        load_ctl_settings(str(path))
    assert str(e.value) == f"config {path}: {message}"
