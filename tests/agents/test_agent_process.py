"""vnode-agent as a process: bad configs refused in one line; a dead coordinator is survived."""

import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from tests.conftest import needs_kernel, unique_name
from vnode_sync.kernel.backend import HostCgroups
from testbed.loopdev import loop_device
from vnode_sync.agents.storage.state_cache import encode_state_cache
from vnode_sync.wire import vnode_pb2 as pb


def run_agent(config_path, *extra, timeout=20):
    return subprocess.run([sys.executable, "-m", "vnode_sync.agents.main", "--config", str(config_path), *extra],
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("config,message", [
    ("node_id: n1\ndevices: [/dev/does-not-exist]\n", ": devices[0]: got '/dev/does-not-exist'; allowed: a block "
                                                      "device on this host (device '/dev/does-not-exist' does not "
                                                      "exist: No such file or directory)"),
    ("node_id: n1\ndevices: [/etc/hostname]\n", ": devices[0]: got '/etc/hostname'; allowed: a block device on this "
                                                "host (device '/etc/hostname' is not a block device)"),
    ("node_id: n1\nbackend: lustre-tbf\nlustre: {experimental: true, targets: {lustre-OST0000: /dev/nope}}\n",
     ": lustre.targets.lustre-OST0000: got '/dev/nope'; allowed: a block device on this host"),
    ("node_id: n1\nbackend: lustre-tbf\n", ": lustre.experimental: got False; allowed: true with backend lustre-tbf: "
                                           "it has not yet run on a real Lustre OSS"),
    ("node_id: [n1\n", ": (whole file): got invalid YAML at line 2, column 1"),
    ("node_id: '../etc'\n", ": node_id: got '../etc'; allowed: 1-63 characters"),
    ("node_id: n1\nbackend: zfs\n", ": backend: got 'zfs'; allowed: one of auto, blkio-v1, io-v2, lustre-tbf, "
                                    "datanode-throttle"),
    ("node_id: n1\ndiscovery: {kind: nfs}\n", ": discovery.kind: got 'nfs'; allowed: one of generic, hdfs"),
    ("node_id: n1\ndiscovery: {kind: generic, colour: red}\n", ": discovery.colour: got an unknown key (value 'red')"),
    ("node_id: n1\ndiscovery: {kind: hdfs, poll_seconds: fast}\n",
     ": discovery.poll_seconds: got 'fast'; allowed: a number above 0 (seconds)"),
    ("node_id: n1\nresync_seconds: 0\n", ": resync_seconds: got 0; allowed: a number above 0 (seconds)"),
    ("node_id: n1\nbackend: datanode-throttle\n", ": datanode_throttle: got nothing; allowed: a section {socket:"),
    ("node_id: n1\ndatanode_throttle: {socket: /run/x, colour: red}\n",
     ": datanode_throttle.colour: got an unknown key (value 'red'); allowed: keys socket"),
])
def test_bad_agent_configs_fail_in_one_line_and_make_no_cgroups(tmp_path, config, message):
    path = tmp_path / "agent.yaml"
    path.write_text(config + f"cgroup_name: {unique_name('badcfg')}\n")
    result = run_agent(path)
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr
    assert not any("badcfg" in d for d in os.listdir(HostCgroups().blkio_v1)) if HostCgroups().has_blkio_v1() else True


@needs_kernel
def test_with_the_coordinator_down_the_agent_enforces_its_cached_state(tmp_path):
    name = unique_name("cached")
    with loop_device(name) as (device, dev):
        state = pb.DesiredState(generation=9, node_id="n1",
                                vnodes=[pb.VNodeSpec(user="alice", uid=64_401, priority=4,
                                                     shares=[pb.ResourceShare(device=device, read=pb.Share(ceiling_bps=12_345_678))])],
                                default_vnode=pb.VNodeSpec(shares=[pb.ResourceShare(device=device, read=pb.Share(ceiling_bps=1_000_000))]))
        cache = tmp_path / "agent.state"
        cache.write_bytes(encode_state_cache(state))
        config = tmp_path / "agent.yaml"
        config.write_text(yaml.safe_dump({"node_id": "n1", "coordinator": "127.0.0.1:1", "cgroup_name": name,
                                          "devices": [device], "state_cache": str(cache),
                                          "teardown_on_exit": True}))
        agent = subprocess.Popen([sys.executable, "-m", "vnode_sync.agents.main", "--config", str(config)],
                                 stderr=subprocess.PIPE, text=True)
        limit_file = os.path.join(HostCgroups().blkio_v1, name, "vnode.alice", "blkio.throttle.read_bps_device")
        try:
            # The VNode's directory appears before its limits are written: wait for the limit itself.
            deadline, limit = time.monotonic() + 15, []
            while time.monotonic() < deadline and limit != [str(dev), "12345678"]:
                time.sleep(0.1)
                try:
                    with open(limit_file) as f:
                        limit = f.read().split()
                except FileNotFoundError:
                    pass
            assert limit == [str(dev), "12345678"]
            time.sleep(1.0)
            assert agent.poll() is None, "the agent keeps running while the coordinator is down"
        finally:
            agent.send_signal(signal.SIGTERM)
            _, err = agent.communicate(timeout=20)
        assert "unreachable" in err and "enforcing the last state" in err
        assert not os.path.exists(os.path.join(HostCgroups().blkio_v1, name))


@needs_kernel
def test_a_second_agent_for_the_same_node_refuses_in_one_line_and_the_first_runs_on(tmp_path):
    name = unique_name("twice")
    lock = f"/run/vnode-sync/{name}.agent.lock"
    with loop_device(name) as (device, _):
        config = tmp_path / "agent.yaml"
        config.write_text(yaml.safe_dump({"node_id": "n1", "coordinator": "127.0.0.1:1", "cgroup_name": name,
                                          "devices": [device], "teardown_on_exit": True}))
        first = subprocess.Popen([sys.executable, "-m", "vnode_sync.agents.main", "--config", str(config)],
                                 stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and not (os.path.exists(lock) and open(lock).read().strip()):
                time.sleep(0.05)
            second = run_agent(config)
            assert second.returncode == 2
            assert second.stderr.strip().splitlines() == [
                f"vnode-agent: error: node n1 (cgroup subtree {name}) is already served by another vnode-agent on this "
                f"host (pid {first.pid}, lock {lock}); stop it first"]
            teardown = run_agent(config, "--teardown")
            assert teardown.returncode == 2 and "already served" in teardown.stderr, "nor is its subtree torn down"
            time.sleep(0.5)
            assert first.poll() is None, "the first agent runs on"
        finally:
            first.send_signal(signal.SIGTERM)
            first.communicate(timeout=20)
        assert not os.path.exists(lock), "the agent removes its lock file at exit"
        assert run_agent(config, "--teardown").returncode == 0, "the node is free again"
