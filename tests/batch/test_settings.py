import pytest

from vnode_sync.batch.settings import DEFAULT_COORDINATOR, load_settings, parse_settings
from vnode_sync.errors import InvalidSetting


def test_defaults_without_a_file():
    settings = load_settings(None, env={})
    assert settings.coordinator == DEFAULT_COORDINATOR
    assert (settings.timeout_seconds, settings.fail_closed, settings.placement.enabled) == (5.0, False, False)


def test_environment_overrides_the_file():
    settings = parse_settings({"coordinator": "coord:7070"}, {"VNODE_COORDINATOR": "10.0.0.9:7171"})
    assert settings.coordinator == "10.0.0.9:7171"


def test_file_values(tmp_path):
    path = tmp_path / "batch.yaml"
    path.write_text("coordinator: coord:7070\ntimeout_seconds: 2\nfail_closed: true\ninsecure: true\n"
                    "placement: {enabled: true, watch_seconds: 10}\n")
    settings = load_settings(str(path), env={})
    assert (settings.coordinator, settings.timeout_seconds, settings.fail_closed) == ("coord:7070", 2.0, True)
    assert settings.security.insecure and settings.placement.watch_seconds == 10.0


@pytest.mark.parametrize("raw, message", [
    ({"timeout": 3}, "timeout: got an unknown key (value 3); allowed: keys tls, insecure, coordinator, "
                     "timeout_seconds, fail_closed, spool_dir, log_file, node, placement"),
    ({"placement": {"enable": True}}, "placement.enable: got an unknown key (value True); allowed: keys enabled, "
                                      "cgroup_root, cgroup_name, watch_seconds"),
    ({"timeout_seconds": 0}, "timeout_seconds: got 0; allowed: a number above 0, at most 120 (seconds)"),
    ({"timeout_seconds": 300}, "timeout_seconds: got 300; allowed: a number above 0, at most 120 (seconds)"),
    ({"fail_closed": "yes"}, "fail_closed: got 'yes'; allowed: true or false"),
    ({"coordinator": 7070}, "coordinator: got 7070; allowed: non-empty text"),
    ({"placement": "on"}, "placement: got 'on'; allowed: a mapping with keys enabled, cgroup_root, cgroup_name, "
                          "watch_seconds"),
    ({"placement": {"watch_seconds": -1}}, "placement.watch_seconds: got -1; allowed: a number from 0 to 3600 "
                                           "(seconds)"),
    ({"tls": {"ca": "/x"}}, "tls.cert: got nothing; allowed: non-empty text (required)"),
])
def test_bad_values_are_named(raw, message):
    with pytest.raises(InvalidSetting) as e:
        parse_settings(raw, {}, "batch.yaml")
    assert str(e.value) == f"config batch.yaml: {message}"
