"""Coordinator config: a good file loads; each bad value is refused in one line naming the file,
the key path, the value and what is allowed (file-level faults: tests/test_config_loading.py)."""

import pytest

from vnode_sync.coordinator.config import load_config
from vnode_sync.errors import InvalidSetting

GOOD = """
listen: 127.0.0.1:7070
state_path: /tmp/x.sqlite
policy: {sharing: static, default_vnode_fraction: 0.05}
users:
  - {name: alice, uid: 1001, priority: 4, active: true}
storage_nodes:
  - id: dn1
    devices: [{name: /dev/sdb, read_bps: 60000000, write_bps: 50000000}]
"""
NODE = "storage_nodes:\n  - {id: dn1, devices: [{name: /dev/sdb, read_bps: 1, write_bps: 1}]}\n"
KEYS = ("keys tls, insecure, listen, state_path, policy, users, storage_nodes, log_format, audit_log, metrics, "
        "zookeeper, nss_groups, slurm_accounts, fan_out_processes")


def write(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return str(path)


def test_a_good_config_loads(tmp_path):
    config = load_config(write(tmp_path, GOOD))
    assert config.users[0].priority == 4 and config.node("dn1").devices[0].read_bps == 60_000_000
    assert config.policy.default_vnode_fraction == 0.05 and config.security.unset


@pytest.mark.parametrize("text,message", [
    # unknown keys, at the top and in each section
    ("colour: blue", f"colour: got an unknown key (value 'blue'); allowed: {KEYS}"),
    ("policy: {speed: 3}", "policy.speed: got an unknown key (value 3); allowed: keys sharing, default_vnode_fraction, "
                           "default_priority, account_priorities, queue_priorities, job_priority_min, "
                           "job_priority_max, job_expiry_seconds, control_seconds, probe_fraction, "
                           "fallback_seconds"),
    ("users: [{name: alice, uid: 1001, colour: red}]",
     "users[0].colour: got an unknown key (value 'red'); allowed: keys name, uid, priority, active"),
    ("storage_nodes: [{id: dn1, disks: []}]",
     "storage_nodes[0].devices: got nothing; allowed: a list, each item a mapping with keys name, read_bps, "
     "write_bps, read_iops, write_iops (required)"),
    ("storage_nodes: [{id: dn1, devices: [{name: /dev/sdb, read_bps: 1, write_bps: 1, seek: 2}]}]",
     "storage_nodes[0].devices[0].seek: got an unknown key (value 2); allowed: keys name, read_bps, write_bps, "
     "read_iops, write_iops"),
    ("tls: {ca: a, cert: b, key: c, pin: x}",
     "tls.pin: got an unknown key (value 'x'); allowed: keys ca, cert, key, server_name"),
    # wrong types
    ("listen: 7070", "listen: got 7070; allowed: non-empty text"),
    ("policy: fair", "policy: got 'fair'; allowed: a mapping with keys sharing, default_vnode_fraction, "
                     "default_priority, account_priorities, queue_priorities, job_priority_min, job_priority_max, "
                     "job_expiry_seconds, control_seconds, probe_fraction, fallback_seconds"),
    ("policy: {default_vnode_fraction: '0.1'}",
     "policy.default_vnode_fraction: got '0.1'; allowed: a number above 0, at most 1"),
    ("users: {alice: 4}", "users: got {'alice': 4}; allowed: a list, each item a mapping with keys name, uid, "
                          "priority, active"),
    ("users: [{name: alice, uid: '1001'}]",
     "users[0].uid: got '1001'; allowed: a whole number from 1 to 4294967294 (not root)"),
    ("users: [{name: alice, uid: 1001, active: 'yes please'}]",
     "users[0].active: got 'yes please'; allowed: true or false"),
    ("users: [{name: alice, uid: 1001, priority: 4.5}]",
     "users[0].priority: got 4.5; allowed: a whole number from 1 to 100"),
    ("storage_nodes: [{id: dn1, devices: [{name: /dev/sdb, read_bps: 60MB, write_bps: 1}]}]",
     "storage_nodes[0].devices[0].read_bps: got '60MB'; allowed: a whole number above 0, at most 1000000000000 "
     "(bytes/s)"),
    ("insecure: 1", "insecure: got 1; allowed: true or false"),
    # out of range
    ("users: [{name: alice, uid: 1, priority: 0}]", "users[0].priority: got 0; allowed: a whole number from 1 to 100"),
    ("users: [{name: alice, uid: 1, priority: 101}]",
     "users[0].priority: got 101; allowed: a whole number from 1 to 100"),
    ("users: [{name: rooty, uid: 0, priority: 5}]",
     "users[0].uid: got 0; allowed: a whole number from 1 to 4294967294 (not root)"),
    ("users: [{name: '../x', uid: 1, priority: 5}]",
     "users[0].name: got '../x'; allowed: 1-32 characters from a-z, 0-9, '_', '-', starting with a letter or '_' "
     "(a POSIX user name)"),
    ("users: [{name: " + "a" * 33 + ", uid: 1}]",
     "users[0].name: got '" + "a" * 33 + "'; allowed: 1-32 characters from a-z, 0-9, '_', '-', starting with a "
     "letter or '_' (a POSIX user name)"),
    ("policy: {default_vnode_fraction: 0}", "policy.default_vnode_fraction: got 0; allowed: a number above 0, at most 1"),
    ("policy: {account_priorities: {physics: 500}}",
     "policy.account_priorities.physics: got 500; allowed: a whole number from 1 to 100"),
    ("policy: {job_expiry_seconds: -1}", "policy.job_expiry_seconds: got -1; allowed: a number above 0 (seconds)"),
    ("storage_nodes: [{id: dn1, devices: [{name: /dev/sdb, read_bps: -5, write_bps: 1}]}]",
     "storage_nodes[0].devices[0].read_bps: got -5; allowed: a whole number above 0, at most 1000000000000 "
     "(bytes/s)"),
    ("storage_nodes: [{id: dn1, devices: [{name: /dev/sdb, read_bps: 1, write_bps: 1, read_iops: -1}]}]",
     "storage_nodes[0].devices[0].read_iops: got -1; allowed: a whole number from 0 to 1000000000 "
     "(I/Os per second, 0: not split)"),
    ("storage_nodes: [{id: dn1, devices: []}]",
     "storage_nodes[0].devices: got []; allowed: a list, each item a mapping with keys name, read_bps, write_bps, "
     "read_iops, write_iops"),
    ("storage_nodes: [{id: 'dn 1', devices: [{name: /dev/sdb, read_bps: 1, write_bps: 1}]}]",
     "storage_nodes[0].id: got 'dn 1'; allowed: 1-63 characters from A-Z, a-z, 0-9, '.', '_', '-'"),
    # bad choices
    ("policy: {sharing: fair}", "policy.sharing: got 'fair'; allowed: one of static, work-conserving"),
    ("policy: {allocation: work-conserving}", "policy.allocation: got 'work-conserving'; allowed: no longer a key: "
                                              "policy.sharing replaces allocation and mode (sharing: static or "
                                              "work-conserving)"),
    ("log_format: xml", "log_format: got 'xml'; allowed: one of plain, json"),
    # rules across keys
    ("policy: {job_priority_min: 60}", "policy.job_priority_min: got 60; allowed: at most job_priority_max (50)"),
    ("users: [{name: alice, uid: 1001}, {name: bob, uid: 1001}]",
     "users[1].uid: got 1001; allowed: a uid no user listed before has"),
    ("users: [{name: alice, uid: 1001}, {name: alice, uid: 1002}]",
     "users[1].name: got 'alice'; allowed: a user name not listed before"),
    (NODE + "  - {id: dn1, devices: [{name: /dev/sdc, read_bps: 1, write_bps: 1}]}",
     "storage_nodes[1].id: got 'dn1'; allowed: a node id not listed before"),
    ("storage_nodes: [{id: dn1, devices: [{name: /dev/sdb, read_bps: 1, write_bps: 1}, "
     "{name: /dev/sdb, read_bps: 2, write_bps: 2}]}]",
     "storage_nodes[0].devices[1].name: got '/dev/sdb'; allowed: a device not listed before on this node"),
    ("tls: {ca: a, cert: b, key: c}\ninsecure: true",
     "insecure: got True; allowed: false when a tls section is given (keep one of the two)"),
    ("tls: {ca: a, cert: b}", "tls.key: got nothing; allowed: non-empty text (required)"),
    ("fan_out_processes: 0", "fan_out_processes: got 0; allowed: a whole number from 1 to 64"),
])
def test_bad_configs_fail_with_a_one_line_error(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(InvalidSetting) as e:
        load_config(path)
    assert str(e.value) == f"config {path}: {message}"
