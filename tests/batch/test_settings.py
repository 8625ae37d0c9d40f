import pytest

from vnode_sync.batch.settings import DEFAULT_COORDINATOR, load_settings, parse_settings
from vnode_sync.errors import ConfigError


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
    ({"timeout": 3}, "unknown key(s) 'timeout'"),
    ({"timeout_seconds": 0}, "timeout_seconds 0.0 must be in (0, 120]"),
    ({"fail_closed": "yes"}, "fail_closed must be bool"),
    ({"placement": {"watch_seconds": -1}}, "placement.watch_seconds -1.0 must be 0 or more"),
    ({"tls": {"ca": "/x"}}, "needs cert, key"),
])
def test_bad_values_are_named(raw, message):
    with pytest.raises(ConfigError) as e:
        parse_settings(raw, {})
    assert message in str(e.value)
