"""The storage agent's collector: what a scrape serves from the agent's memory, here the node-wide
shared level a DataNode's scheduler keeps (R and the rule that set it) and its absence elsewhere."""

import shutil
import subprocess

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.datanode.test_backend import RecordingChannel
from tests.fakes.cgroupfs import FakeCgroupFS, FakeKernel
from vnode_sync.agents.storage.agent import StorageAgent
from vnode_sync.agents.storage.config import parse_agent_config
from vnode_sync.agents.storage.metrics import OTHER_STEP, StorageAgentCollector
from vnode_sync.datanode.backend import DataNodeThrottleBackend
from vnode_sync.datanode.channel import STEPS
from vnode_sync.errors import Unavailable
from vnode_sync.kernel.backend import StepTally
from vnode_sync.kernel.blkio_v1 import BlkioV1Backend
from vnode_sync.kernel.types import DeviceNumber
from vnode_sync.wire import vnode_pb2 as pb

SDB = DeviceNumber(8, 16)
LEVEL = "vnode_sync_node_shared_level_bytes_per_second"
STEP = "vnode_sync_node_shared_level_step"
STEP_SECONDS = "vnode_sync_node_shared_level_step_seconds_total"
MOVES = "vnode_sync_node_shared_level_moves_total"


class NoThreads:
    name, shared_process = "none", False

    def scan(self, users):
        return []


@pytest.fixture
def agent_of():
    """A storage agent on BACKEND, its state applied and one usage report taken; its coordinator
    link is never dialled."""
    agents = []

    def make(backend) -> StorageAgent:
        agent = StorageAgent(parse_agent_config({"node_id": "dn1", "insecure": True}), backend, NoThreads(),
                             {"/dev/sdb": SDB})
        agents.append(agent)
        agent.reconciler.apply(pb.DesiredState(generation=1, node_id="dn1"))
        agent.reconciler.usage_report("dn1")
        return agent

    yield make
    for agent in agents:
        agent.link.channel.close()


def scrape(agent: StorageAgent) -> dict:
    registry = CollectorRegistry()
    registry.register(StorageAgentCollector(agent))
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def datanode(read_step: str = "lowered-skewed") -> DataNodeThrottleBackend:
    channel = RecordingChannel()
    channel.node = {"read_rate_bps": 52e6, "write_rate_bps": 40e6, "read_held": 0.4, "disk_busy": 0.9}
    channel.steps = {"read_step": read_step, "write_step": "held"}
    return DataNodeThrottleBackend(channel, [SDB])


def steps(got: dict, direction: str) -> dict[str, float]:
    return {dict(labels)["step"]: value for (name, labels), value in got.items()
            if name == STEP and dict(labels)["direction"] == direction}


def test_the_datanodes_shared_level_is_served_per_direction_with_the_step_that_set_it(agent_of):
    got = scrape(agent_of(datanode()))
    assert got[(LEVEL, (("direction", "read"), ("node", "dn1")))] == 52_000_000
    assert got[(LEVEL, (("direction", "write"), ("node", "dn1")))] == 40_000_000
    read, write = steps(got, "read"), steps(got, "write")
    assert set(read) == set(write) == set(STEPS) | {OTHER_STEP}   # every step, so a change shows as 1 -> 0
    assert {s for s, v in read.items() if v} == {"lowered-skewed"} and read["lowered-skewed"] == 1
    assert {s for s, v in write.items() if v} == {"held"}


def test_a_step_this_agent_does_not_know_is_other_and_makes_no_new_series(agent_of):
    got = scrape(agent_of(datanode(read_step="warp-drive")))
    read = steps(got, "read")
    assert "warp-drive" not in read and set(read) == set(STEPS) | {OTHER_STEP}
    assert {s for s, v in read.items() if v} == {OTHER_STEP}


def test_how_long_each_rule_held_r_and_how_often_it_moved_it_are_counters_per_direction(agent_of):
    backend = datanode(read_step="held")
    backend.channel.tallies = {"read": (StepTally("held", 120.5, 0), StepTally("lowered-skewed", 0.3, 3),
                                        StepTally("warp-drive", 1.0, 1), StepTally("time-travel", 2.0, 2))}
    got = scrape(agent_of(backend))
    read = (("direction", "read"), ("node", "dn1"))
    assert got[(STEP_SECONDS, read + (("step", "held"),))] == 120.5
    assert got[(MOVES, read + (("step", "lowered-skewed"),))] == 3      # the lowering a gauge scrape misses
    assert got[(MOVES, read + (("step", "held"),))] == 0
    # steps this agent does not know add up under one label, not a series each
    assert got[(STEP_SECONDS, read + (("step", OTHER_STEP),))] == 3.0
    assert got[(MOVES, read + (("step", OTHER_STEP),))] == 3
    assert not [labels for (name, labels), _ in got.items() if name == MOVES and dict(labels)["direction"] == "write"]


def test_a_scrape_reads_the_last_stats_and_never_the_socket(agent_of):
    agent = agent_of(datanode())
    read = agent.backend.channel.stats_read
    agent.backend.channel.node["read_rate_bps"] = 30e6     # the DataNode lowered R since the last report
    got = [scrape(agent) for _ in range(3)]
    assert agent.backend.channel.stats_read == read
    assert {g[(LEVEL, (("direction", "read"), ("node", "dn1")))] for g in got} == {52_000_000}


def no_shared_level(got: dict) -> bool:
    return not [name for name, _ in got if name in (LEVEL, STEP, STEP_SECONDS, MOVES)]


def test_backends_without_a_shared_level_serve_neither_gauge(agent_of, tmp_path):
    fs = FakeCgroupFS(str(tmp_path / "blkio"), FakeKernel())
    blkio = agent_of(BlkioV1Backend(fs.hierarchy, "vnode-sync.dn1", fs))
    assert blkio.reconciler.last_sample is not None and no_shared_level(scrape(blkio))
    by_rates = datanode()
    by_rates.sharing = "rates"                              # the Java agent only caps: R divides nothing
    assert no_shared_level(scrape(agent_of(by_rates)))


def test_a_datanode_not_read_yet_or_not_answering_serves_no_shared_level(agent_of):
    agent = StorageAgent(parse_agent_config({"node_id": "dn1", "insecure": True}), datanode(), NoThreads(),
                         {"/dev/sdb": SDB})
    try:
        assert no_shared_level(scrape(agent))                # before the first usage report
    finally:
        agent.link.channel.close()
    agent = agent_of(datanode())
    assert not no_shared_level(scrape(agent))
    agent.backend.channel.fail = Unavailable("DataNode throttle socket /s: connection refused")
    agent.reconciler.usage_report("dn1")
    assert no_shared_level(scrape(agent))


@pytest.mark.skipif(shutil.which("promtool") is None, reason="needs promtool (Debian's prometheus package; "
                    "scripts/setup.d/prometheus.sh installs it)")
def test_promtool_finds_no_naming_problem_in_the_shared_level(agent_of):
    registry = CollectorRegistry()
    registry.register(StorageAgentCollector(agent_of(datanode())))
    lint = subprocess.run(["promtool", "check", "metrics"], input=generate_latest(registry), capture_output=True,
                          timeout=30)
    assert lint.returncode == 0, lint.stdout.decode() + lint.stderr.decode()
