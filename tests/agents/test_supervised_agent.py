"""Supervised agent loops, in real vnode-agent processes on real cgroups: a reconcile pass that
raises is logged with context and retried, and the agent keeps enforcing; a loop that cannot
continue makes the process exit non-zero (3) so its service manager restarts it.

The fault is injected into the real agent process (Reconciler.apply raises KernelError) because
no kernel state makes a whole pass raise on demand."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import yaml

from tests.conftest import needs_kernel, unique_name
from testbed.loopdev import loop_device
from vnode_sync.agents.storage.state_cache import encode_state_cache
from vnode_sync.kernel.backend import HostCgroups
from vnode_sync.wire import vnode_pb2 as pb

FAULTY_AGENT = textwrap.dedent("""
    import sys
    from vnode_sync import supervision
    from vnode_sync.agents import main
    from vnode_sync.agents.storage.reconciler import Reconciler
    from vnode_sync.errors import KernelError

    supervision.FIRST_RETRY_SECONDS = 0.1
    supervision.FAILURES_BEFORE_GIVING_UP = 4
    failures_left = int(sys.argv[1])
    real_apply = Reconciler.apply

    def apply(self, state):
        global failures_left
        if failures_left:
            failures_left -= 1
            raise KernelError("/sys/fs/cgroup/blkio/injected", "injected failure")
        return real_apply(self, state)

    Reconciler.apply = apply
    sys.exit(main.main(sys.argv[2:]))
""")


def _config(tmp_path, name, device):
    cache = tmp_path / "agent.state"
    cache.write_bytes(encode_state_cache(pb.DesiredState(
        generation=5, node_id="n1",
        vnodes=[pb.VNodeSpec(user="alice", uid=64_401, priority=4,
                             shares=[pb.ResourceShare(device=device, read=pb.Share(ceiling_bps=12_345_678))])],
        default_vnode=pb.VNodeSpec(shares=[pb.ResourceShare(device=device, read=pb.Share(ceiling_bps=1_000_000))]))))
    config = tmp_path / "agent.yaml"
    config.write_text(yaml.safe_dump({"node_id": "n1", "coordinator": "127.0.0.1:1", "cgroup_name": name,
                                      "devices": [device], "state_cache": str(cache), "teardown_on_exit": True,
                                      "resync_seconds": 0.5}))
    return config


def _faulty_agent(config, failures: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", FAULTY_AGENT, str(failures), "--config", str(config)],
                            stderr=subprocess.PIPE, text=True)


@needs_kernel
def test_a_reconcile_pass_that_raises_is_retried_and_the_agent_keeps_enforcing(tmp_path):
    name = unique_name("retry")
    with loop_device(name) as (device, dev):
        agent = _faulty_agent(_config(tmp_path, name, device), failures=2)
        limit_file = os.path.join(HostCgroups().blkio_v1, name, "vnode.alice", "blkio.throttle.read_bps_device")
        try:
            deadline, limit = time.monotonic() + 15, []
            while time.monotonic() < deadline and limit != [str(dev), "12345678"]:
                time.sleep(0.1)
                try:
                    limit = open(limit_file).read().split()
                except FileNotFoundError:
                    pass
            assert limit == [str(dev), "12345678"], "enforcing after the failed passes"
            assert agent.poll() is None
        finally:
            agent.send_signal(signal.SIGTERM)
            _, err = agent.communicate(timeout=20)
        assert "reconcile pass failed (node n1" in err and "injected failure" in err
        assert "recovered after 2 failed passes" in err
        assert agent.returncode == 0 and "Traceback" not in err


@needs_kernel
def test_a_loop_that_cannot_continue_exits_non_zero(tmp_path):
    name = unique_name("giveup")
    with loop_device(name) as (device, _):
        agent = _faulty_agent(_config(tmp_path, name, device), failures=1_000)
        try:
            _, err = agent.communicate(timeout=30)
        finally:
            if agent.poll() is None:
                agent.kill()
                agent.wait()
        assert agent.returncode == 3, err
        assert "reconcile (node n1" in err and "4 passes failed in a row" in err
        assert "exiting 3 so the service manager restarts" in err
        assert "Traceback" not in err
        assert not os.path.exists(os.path.join(HostCgroups().blkio_v1, name))


@needs_kernel
def test_sigterm_stops_the_agent_cleanly_within_2_s(tmp_path):
    name = unique_name("sigterm")
    with loop_device(name) as (device, _):
        agent = _faulty_agent(_config(tmp_path, name, device), failures=0)
        time.sleep(2.0)
        started = time.monotonic()
        agent.send_signal(signal.SIGTERM)
        _, err = agent.communicate(timeout=20)
        assert time.monotonic() - started < 2.0
        assert agent.returncode == 0 and "Traceback" not in err
