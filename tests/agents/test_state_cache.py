"""The agent's state cache is verified before use: a truncated or corrupted cache is refused
with a warning and the kernel's current limits stay in force (real agent process, real cgroups)."""

import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from tests.conftest import needs_kernel, unique_name
from testbed.leftovers import find, remove
from testbed.loopdev import loop_device
from vnode_sync.agents.storage.state_cache import BadCache, decode_state_cache, encode_state_cache
from vnode_sync.kernel.backend import HostCgroups
from vnode_sync.wire import vnode_pb2 as pb


def _state(device: str, read_bps: int) -> pb.DesiredState:
    return pb.DesiredState(generation=9, node_id="n1", store_id=77,
                           vnodes=[pb.VNodeSpec(user="alice", uid=64_401, priority=4,
                                                shares=[pb.ResourceShare(device=device, read=pb.Share(ceiling_bps=read_bps))])],
                           default_vnode=pb.VNodeSpec(shares=[pb.ResourceShare(device=device, read=pb.Share(ceiling_bps=1_000_000))]))


def _truncated(data: bytes) -> bytes:
    return data[:-7]


def _corrupted(data: bytes) -> bytes:
    flipped = bytearray(data)
    flipped[-5] ^= 0x40
    return bytes(flipped)


def test_cache_round_trip_and_refusals():
    state = _state("/dev/loop0", 5)
    data = encode_state_cache(state)
    assert decode_state_cache(data) == state
    for bad, why in [(_truncated(data), "length"), (_corrupted(data), "checksum"), (state.SerializeToString(), "header"),
                     (data[:12], "truncated header")]:
        with pytest.raises(BadCache, match=why):
            decode_state_cache(bad)


def _agent(config):
    return subprocess.Popen([sys.executable, "-m", "vnode_sync.agents.main", "--config", str(config)],
                            stderr=subprocess.PIPE, text=True)


def _read_limit(path):
    try:
        with open(path) as f:
            return f.read().split()
    except FileNotFoundError:
        return []


@pytest.fixture
def cgroup_name():
    """The test's own cgroup name; what a failing run leaves of it (its agent tears down only on a
    clean exit) is removed afterwards."""
    name = unique_name("badcache")
    yield name
    remove([item for item in find(name) if item.kind == "cgroup"])


@needs_kernel
@pytest.mark.parametrize("damage", [_truncated, _corrupted], ids=["truncated", "corrupted"])
def test_a_bad_cache_is_refused_and_the_kernel_keeps_its_limits(tmp_path, damage, cgroup_name):
    name = cgroup_name
    with loop_device(name) as (device, dev):
        cache = tmp_path / "agent.state"
        cache.write_bytes(encode_state_cache(_state(device, 12_345_678)))
        config = tmp_path / "agent.yaml"
        settings = {"node_id": "n1", "coordinator": "127.0.0.1:1", "cgroup_name": name, "devices": [device],
                    "state_cache": str(cache), "teardown_on_exit": False}
        config.write_text(yaml.safe_dump(settings))
        limit_file = os.path.join(HostCgroups().blkio_v1, name, "vnode.alice", "blkio.throttle.read_bps_device")
        agent = _agent(config)
        try:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and _read_limit(limit_file) != [str(dev), "12345678"]:
                time.sleep(0.1)
            assert _read_limit(limit_file) == [str(dev), "12345678"]
        finally:
            agent.send_signal(signal.SIGTERM)
            agent.communicate(timeout=20)
        # A cache whose limit differs (so applying it would show) is then damaged.
        cache.write_bytes(damage(encode_state_cache(_state(device, 99_000_000))))
        config.write_text(yaml.safe_dump({**settings, "teardown_on_exit": True}))
        agent = _agent(config)
        try:
            time.sleep(3.0)
            assert agent.poll() is None
            assert _read_limit(limit_file) == [str(dev), "12345678"], "the kernel's limit stays in force"
        finally:
            agent.send_signal(signal.SIGTERM)
            _, err = agent.communicate(timeout=20)
        assert "ignoring state cache" in err and "keeping the kernel's current limits" in err
        assert agent.returncode == 0 and "Traceback" not in err
        assert not os.path.exists(os.path.join(HostCgroups().blkio_v1, name))
