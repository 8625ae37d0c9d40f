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
from vnode_sync.agents.storage.metrics import StorageAgentCollector
from vnode_sync.datanode.backend import DataNodeThrottleBackend
from vnode_sync.errors import Unavailable
from vnode_sync.kernel.backend import VolumeQueue
from vnode_sync.kernel.blkio_v1 import BlkioV1Backend
from vnode_sync.kernel.types import DeviceNumber
from vnode_sync.wire import vnode_pb2 as pb

SDB = DeviceNumber(8, 16)
DEPTH = "vnode_sync_volume_depth"
WAITING = "vnode_sync_volume_waiting_packets"


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


def datanode() -> DataNodeThrottleBackend:
    channel = RecordingChannel()
    channel.volumes = (VolumeQueue("DS-1", 1, 52e6, 2), VolumeQueue("DS-2", 3, 40e6, 0))
    return DataNodeThrottleBackend(channel, [SDB])


def test_each_data_volumes_dispatcher_is_served_with_its_depth_and_waiting_packets(agent_of):
    got = scrape(agent_of(datanode()))
    assert got[(DEPTH, (("node", "dn1"), ("volume", "DS-1")))] == 1
    assert got[(DEPTH, (("node", "dn1"), ("volume", "DS-2")))] == 3
    assert got[(WAITING, (("node", "dn1"), ("volume", "DS-1")))] == 2
    assert got[("vnode_sync_volume_moved_bytes_per_second", (("node", "dn1"), ("volume", "DS-1")))] == 52e6


def test_a_scrape_reads_the_last_stats_and_never_the_socket(agent_of):
    agent = agent_of(datanode())
    read = agent.backend.channel.stats_read
    agent.backend.channel.volumes = (VolumeQueue("DS-1", 4, 1e6, 0),)   # the DataNode moved on since
    got = [scrape(agent) for _ in range(3)]
    assert agent.backend.channel.stats_read == read
    assert {g[(DEPTH, (("node", "dn1"), ("volume", "DS-1")))] for g in got} == {1}


def no_volume_series(got: dict) -> bool:
    return not [name for name, _ in got if name in (DEPTH, WAITING)]


def test_backends_without_a_dispatcher_of_their_own_serve_no_volume_series(agent_of, tmp_path):
    fs = FakeCgroupFS(str(tmp_path / "blkio"), FakeKernel())
    blkio = agent_of(BlkioV1Backend(fs.hierarchy, "vnode-sync.dn1", fs))
    assert blkio.reconciler.last_sample is not None and no_volume_series(scrape(blkio))


def test_a_datanode_not_read_yet_or_not_answering_serves_no_volume_series(agent_of):
    agent = StorageAgent(parse_agent_config({"node_id": "dn1", "insecure": True}), datanode(), NoThreads(),
                         {"/dev/sdb": SDB})
    try:
        assert no_volume_series(scrape(agent))                # before the first usage report
    finally:
        agent.link.channel.close()
    agent = agent_of(datanode())
    assert not no_volume_series(scrape(agent))
    agent.backend.channel.fail = Unavailable("DataNode throttle socket /s: connection refused")
    agent.reconciler.usage_report("dn1")
    assert no_volume_series(scrape(agent))


@pytest.mark.skipif(shutil.which("promtool") is None, reason="needs promtool (Debian's prometheus package; "
                    "scripts/setup.d/prometheus.sh installs it)")
def test_promtool_finds_no_naming_problem_in_the_volume_series(agent_of):
    registry = CollectorRegistry()
    registry.register(StorageAgentCollector(agent_of(datanode())))
    lint = subprocess.run(["promtool", "check", "metrics"], input=generate_latest(registry), capture_output=True,
                          timeout=30)
    assert lint.returncode == 0, lint.stdout.decode() + lint.stderr.decode()
