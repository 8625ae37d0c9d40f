"""Coordinator config: good files load; bad ones fail with a one-line error naming the value."""

import pytest

from vnode_sync.coordinator.config import load_config
from vnode_sync.errors import ConfigError

GOOD = """
listen: 127.0.0.1:7070
state_path: /tmp/x.sqlite
policy: {mode: throttle, default_vnode_fraction: 0.05}
users:
  - {name: alice, uid: 1001, priority: 4, active: true}
storage_nodes:
  - id: dn1
    devices: [{name: /dev/sdb, read_bps: 60000000, write_bps: 50000000}]
"""


def write(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return str(path)


def test_a_good_config_loads(tmp_path):
    config = load_config(write(tmp_path, GOOD))
    assert config.users[0].priority == 4 and config.node("dn1").devices[0].read_bps == 60_000_000
    assert config.policy.default_vnode_fraction == 0.05


@pytest.mark.parametrize("text,message", [
    ("users: [{name: alice, uid: 1, priority: 0}]", "invalid priority 0"),
    ("users: [{name: alice, uid: 1, priority: 101}]", "invalid priority 101"),
    ("users: [{name: '../x', uid: 1, priority: 5}]", "invalid user name '../x'"),
    ("users: [{name: alice, uid: 1}\n  - oops", "not valid YAML"),
    ("listen: [1, 2", "not valid YAML"),
    ("- just a list", "must hold a mapping"),
    ("policy: {mode: fastest}", "policy.mode 'fastest'"),
    ("policy: {default_vnode_fraction: 0}", "default_vnode_fraction"),
    ("storage_nodes: [{id: dn1, devices: [{name: /dev/sdb, read_bps: -5, write_bps: 1}]}]", "read_bps -5"),
    ("storage_nodes: [{id: dn1, devices: []}]", "needs a list of devices"),
    ("colour: blue", "unknown key(s) 'colour'"),
])
def test_bad_configs_fail_with_a_one_line_error(tmp_path, text, message):
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, text))
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_missing_file_says_so(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(str(tmp_path / "nope.yaml"))


def test_root_cannot_be_a_user(tmp_path):
    with pytest.raises(ConfigError, match="invalid uid 0"):
        load_config(write(tmp_path, "users: [{name: rooty, uid: 0, priority: 5}]"))
