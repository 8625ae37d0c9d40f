"""Agent config, with its plug-ins' sections (discovery kinds, lustre, datanode_throttle, compute):
each bad value refused in one line naming the file, the key path, the value and what is allowed."""

import pytest

from vnode_sync.agents.config import load_agent_config
from vnode_sync.agents.handlers.hdfs import HdfsDiscovery
from vnode_sync.agents.plugins import make_discovery
from vnode_sync.errors import InvalidSetting

HDFS_KEYS = ("keys kind, pid, pid_file, cmdline_contains, data_port, events, poll_seconds, settle_seconds, "
             "spawner_in_default")
LUSTRE_KEYS = ("keys experimental, lctl, service, policy, targets, rpc_bytes, rule_prefix, jobid_rule, jobid_job_rule, jobid_uid, ledger")


def write(tmp_path, text):
    path = tmp_path / "agent.yaml"
    path.write_text("node_id: n1\n" + text)
    return str(path)


def test_a_full_config_loads_and_each_plugin_gets_its_own_settings(tmp_path):
    config = load_agent_config(write(tmp_path, """
role: storage
backend: lustre-tbf
devices: [/dev/sdb]
discovery: {kind: hdfs, pid: 4242, data_port: 9866, events: poll, poll_seconds: 0.01}
lustre: {experimental: true, lctl: /opt/lustre/lctl, policy: jobid, targets: {lustre-OST0000: /dev/sdb}, ledger: ''}
datanode_throttle: {socket: /run/vnode-sync/dn.sock}
compute: {storage_endpoints: [':9866', 'dn1:9866']}
insecure: true
"""))
    assert config.discovery.data_port == 9866 and config.lustre.policy == "jobid"
    assert config.compute.endpoints == ((None, 9866), ("dn1", 9866)) and config.security.insecure
    discovery = make_discovery(config)
    try:
        assert isinstance(discovery, HdfsDiscovery) and discovery.fixed_port == 9866 and discovery.poll_seconds == 0.01
    finally:
        discovery.close()


def test_without_a_discovery_section_or_kind_the_generic_plugin_is_used(tmp_path):
    assert load_agent_config(write(tmp_path, "")).discovery.kind == "generic"
    config = load_agent_config(write(tmp_path, "discovery: {pids: [1], uid_map: {1001: alice}}"))
    assert (config.discovery.kind, config.discovery.pids, config.discovery.uid_map) == ("generic", (1,), {1001: "alice"})


@pytest.mark.parametrize("text,message", [
    # unknown keys, at the top and in each section
    ("colour: red", "colour: got an unknown key (value 'red'); allowed: keys tls, insecure, node_id, role, "
                    "coordinator, backend, cgroup_root, cgroup_name, proc_root, devices, required_disk_settings, discovery, resync_seconds, "
                    "report_seconds, probe_seconds, capture_seconds, fast_thread_moves, state_cache, run_dir, teardown_on_exit, log_format, "
                    "lustre, datanode_throttle, compute, metrics"),
    ("discovery: {kind: hdfs, colour: red}", f"discovery.colour: got an unknown key (value 'red'); allowed: {HDFS_KEYS}"),
    ("discovery: {poll_seconds: 1}",
     "discovery.poll_seconds: got an unknown key (value 1); allowed: keys kind, comm_pattern, pids, uid_map"),
    ("lustre: {rate_mbps: 5}", f"lustre.rate_mbps: got an unknown key (value 5); allowed: {LUSTRE_KEYS}"),
    ("datanode_throttle: {socket: /run/x, colour: red}",
     "datanode_throttle.colour: got an unknown key (value 'red'); allowed: keys socket, sharing, cpu_shares"),
    ("compute: {storage_endpoints: [':9866'], colour: red}",
     "compute.colour: got an unknown key (value 'red'); allowed: keys storage_endpoints, min_uid, "
     "connection_seconds, placement_seconds"),
    ("tls: {ca: a, cert: b, key: c, pin: x}",
     "tls.pin: got an unknown key (value 'x'); allowed: keys ca, cert, key, server_name"),
    # wrong types
    ("discovery: {kind: hdfs, poll_seconds: fast}", "discovery.poll_seconds: got 'fast'; allowed: a number above 0 "
                                                    "(seconds)"),
    ("discovery: {kind: hdfs, spawner_in_default: 'no'}", "discovery.spawner_in_default: got 'no'; allowed: true or false"),
    ("discovery: hdfs", "discovery: got 'hdfs'; allowed: a mapping with kind: one of generic, hdfs"),
    ("discovery: {pids: 4242}", "discovery.pids: got 4242; allowed: a list, each item a whole number above 0"),
    ("devices: /dev/sdb", "devices: got '/dev/sdb'; allowed: a list, each item non-empty text"),
    ("report_seconds: '1'", "report_seconds: got '1'; allowed: a number above 0 (seconds)"),
    ("teardown_on_exit: 1", "teardown_on_exit: got 1; allowed: true or false"),
    ("lustre: [lctl]", f"lustre: got ['lctl']; allowed: a mapping with {LUSTRE_KEYS}"),
    ("lustre: {rpc_bytes: 4MiB}", "lustre.rpc_bytes: got '4MiB'; allowed: a whole number above 0, at most 1073741824 "
                                  "(bytes)"),
    ("compute: {storage_endpoints: [':9866'], min_uid: '1000'}",
     "compute.min_uid: got '1000'; allowed: a whole number from 1 to 4294967294"),
    # out of range
    ("capture_seconds: -1", "capture_seconds: got -1; allowed: a number above 0 (seconds)"),
    ("discovery: {kind: hdfs, data_port: 70000}", "discovery.data_port: got 70000; allowed: a whole number from 1 to "
                                                  "65535"),
    ("discovery: {uid_map: {1001: Alice}}", "discovery.uid_map.1001: got 'Alice'; allowed: 1-32 characters from a-z, "
                                            "0-9, '_', '-', starting with a letter or '_' (a POSIX user name)"),
    ("discovery: {comm_pattern: 'DataXceiver(['}",
     "discovery.comm_pattern: got 'DataXceiver(['; allowed: a regular expression matching whole thread names"),
    ("lustre: {rule_prefix: vnode_sync_}", "lustre.rule_prefix: got 'vnode_sync_'; allowed: 1-8 characters from "
                                           "A-Z, a-z, 0-9, '_' (it leaves room in a 15-character TBF rule name)"),
    ("lustre: {targets: {OST0: /dev/sdb}}", "lustre.targets.OST0: got 'OST0'; allowed: an OST name like lustre-OST0000"),
    ("lustre: {jobid_uid: '(\\d+)'}", "lustre.jobid_uid: got '(\\\\d+)'; allowed: a regular expression with a "
                                      "(?P<uid>...) group"),
    ("lustre: {jobid_rule: '*.x'}", "lustre.jobid_rule: got '*.x'; allowed: text containing {uid}, e.g. '*.{uid}'"),
    *((f"lustre: {{jobid_job_rule: '{bad}'}}",
       f"lustre.jobid_job_rule: got '{bad}'; allowed: text containing {{job}} and optionally {{uid}}, otherwise "
       "A-Z, a-z, 0-9 and . _ - : @ *, e.g. '{job}.{uid}'")
      for bad in ("{uid}.x",            # no job: every job of the uid would be one rule
                  "{job} {uid}",        # TBF splits a job id list on spaces
                  "{job}.{gid}",        # a placeholder there is nothing to fill in with
                  "{job!r}.{uid}",      # a conversion would put quotes into lctl's argument
                  "{job}.{uid}}")),     # not a template
    ("datanode_throttle: {socket: dn.sock}", "datanode_throttle.socket: got 'dn.sock'; allowed: an absolute path"),
    ("compute: {storage_endpoints: ['dn1']}",
     "compute.storage_endpoints[0]: got 'dn1'; allowed: host:port or :port (any host), port 1-65535"),
    ("compute: {storage_endpoints: []}",
     "compute.storage_endpoints: got []; allowed: a list, each item host:port or :port (any host), port 1-65535"),
    ("compute: {storage_endpoints: [':9866'], placement_seconds: 0}",
     "compute.placement_seconds: got 0; allowed: a number above 0 (seconds)"),
    ("required_disk_settings: [mount_option=no delalloc]",
     "required_disk_settings[0]: got 'mount_option=no delalloc'; allowed: KEY=VALUE, KEY one of scheduler, "
     "max_sectors_kb, read_ahead_kb, nr_requests, iosched/<tunable>; or mount_option=NAME"),
    ("cgroup_name: ../escape", "cgroup_name: got '../escape'; allowed: a single directory name, not starting with '.' "
                               "('' for vnode-sync.<node_id>)"),
    # bad choices
    ("role: oss", "role: got 'oss'; allowed: one of storage, compute"),
    ("backend: zfs", "backend: got 'zfs'; allowed: one of auto, blkio-v1, io-v2, lustre-tbf, datanode-throttle"),
    ("discovery: {kind: nfs}", "discovery.kind: got 'nfs'; allowed: one of generic, hdfs"),
    ("discovery: {kind: hdfs, events: inotify}", "discovery.events: got 'inotify'; allowed: one of auto, netlink, poll"),
    ("lustre: {policy: nid}", "lustre.policy: got 'nid'; allowed: one of uid, jobid, generic"),
    ("log_format: xml", "log_format: got 'xml'; allowed: one of plain, json"),
    # sections a choice needs
    ("backend: datanode-throttle", "datanode_throttle: got nothing; allowed: a section {socket: /absolute/path} "
                                   "(the DataNode's -javaagent socket= argument) with backend datanode-throttle"),
    ("role: compute", "compute: got nothing; allowed: a section {storage_endpoints: [':9866']} with role compute"),
])
def test_bad_agent_configs_fail_with_a_one_line_error(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(InvalidSetting) as e:
        load_agent_config(path)
    assert str(e.value) == f"config {path}: {message}"
