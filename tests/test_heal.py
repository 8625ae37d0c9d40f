"""Heal fast: after a coordinator outage long enough that every agent's reconnect backoff sits at its
cap, every agent (three real vnode-agent processes on real cgroups) re-applies within 5 s of the
coordinator answering again. Prints the heal times."""

import math
import os
import subprocess
import sys
import time

import pytest
import yaml

from tests.conftest import COORDINATOR_CONFIG, needs_kernel, unique_name
from testbed.loopdev import loop_device
from testbed.ports import free_port
from testbed.processes import start_coordinator, stop_process
from vnode_sync.agents.storage.link import RECONNECT_CAP_SECONDS
from vnode_sync.coordinator.state.store import StateStore
from vnode_sync.kernel.backend import HostCgroups

AGENTS = 3
# What an outage's length changes in an agent is its reconnect backoff (its own and gRPC's channel
# backoff alike): from RECONNECT_FIRST_SECONDS doubling, under 2 x RECONNECT_CAP_SECONDS in all, to the
# cap, then flat at it; each delay +-20 %. An outage that then holds the cap for CAPPED_RETRIES retries
# tests the heal any longer outage gets (60 s did the same in four times the time): past the first capped
# retry every further one is the same; a second leaves room for gRPC's channel backoff, jittered on its own.
CAPPED_RETRIES = 2
OUTAGE_SECONDS = math.ceil(1.2 * (2 + CAPPED_RETRIES) * RECONNECT_CAP_SECONDS)
HEAL_LIMIT_SECONDS = 5.0


def _limit(path: str) -> list[str]:
    try:
        with open(path) as f:
            return f.read().split()
    except FileNotFoundError:
        return []


def _wait(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@pytest.mark.slow
@needs_kernel
def test_every_agent_reapplies_within_5_s_after_a_coordinator_outage_past_its_backoff_cap(tmp_path):
    name = unique_name("heal")
    port = free_port()
    with loop_device(name) as (device, _):
        nodes = [f"n{i}" for i in range(AGENTS)]
        state = str(tmp_path / "state.sqlite")
        config = tmp_path / "coordinator.yaml"
        config.write_text(yaml.safe_dump({
            **COORDINATOR_CONFIG, "listen": f"127.0.0.1:{port}", "insecure": True, "state_path": state,
            "storage_nodes": [{"id": n, "devices": [{"name": device, "read_bps": 60_000_000,
                                                     "write_bps": 30_000_000}]} for n in nodes]}))
        coordinator, _ = start_coordinator(str(config), tmp_path / "c1.log")
        agents, limit_files = [], []
        try:
            for node in nodes:
                agent_config = tmp_path / f"{node}.yaml"
                agent_config.write_text(yaml.safe_dump({
                    "node_id": node, "coordinator": f"127.0.0.1:{port}", "insecure": True,
                    "cgroup_name": f"{name}-{node}", "devices": [device], "teardown_on_exit": True,
                    "state_cache": str(tmp_path / f"{node}.state")}))
                agents.append(subprocess.Popen([sys.executable, "-m", "vnode_sync.agents.main", "--config",
                                                str(agent_config)], stderr=open(tmp_path / f"{node}.log", "wb")))
                limit_files.append(os.path.join(HostCgroups().blkio_v1, f"{name}-{node}", "vnode.alice",
                                                "blkio.throttle.read_bps_device"))
            assert _wait(lambda: all(_limit(f) for f in limit_files), 20), "agents applied the first state"
            before = [_limit(f) for f in limit_files]
            stop_process(coordinator)
            # While the coordinator is down the admin changes alice's priority in its store.
            store = StateStore(state, create=False)
            store.set_priority("alice", 40)
            store.close()
            time.sleep(OUTAGE_SECONDS)
            assert all(a.poll() is None for a in agents), "agents keep running through the outage"
            coordinator, _ = start_coordinator(str(config), tmp_path / "c2.log")
            answering = time.monotonic()
            healed = {}
            deadline = answering + 15
            while len(healed) < AGENTS and time.monotonic() < deadline:
                for i, f in enumerate(limit_files):
                    if i not in healed and _limit(f) and _limit(f) != before[i]:
                        healed[i] = time.monotonic() - answering
                time.sleep(0.02)
            print(f"\nheal after a {OUTAGE_SECONDS} s outage: " +
                  ", ".join(f"{nodes[i]} {t:.2f} s" for i, t in sorted(healed.items())))
            assert len(healed) == AGENTS, f"only {sorted(healed)} re-applied"
            assert max(healed.values()) < HEAL_LIMIT_SECONDS
        finally:
            for agent in agents:
                stop_process(agent)
            stop_process(coordinator)
        for agent in agents:
            assert agent.returncode == 0
        assert not any(os.path.exists(os.path.join(HostCgroups().blkio_v1, f"{name}-{n}")) for n in nodes)
