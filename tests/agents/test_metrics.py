"""The storage agent's collector: what a scrape serves from the agent's memory: the DataNode's volumes
and their absence elsewhere, and per-user series bounded by top_users with (other) and the node's
totals adding up."""

import shutil
import subprocess

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.datanode.test_backend import RecordingChannel
from tests.fakes.cgroupfs import FakeCgroupFS, FakeKernel
from vnode_sync.agents.config import parse_agent_config
from vnode_sync.agents.storage.agent import StorageAgent
from vnode_sync.agents.storage.demand import Flow as DemandFlow
from vnode_sync.agents.storage.demand import VNodeDemand
from vnode_sync.agents.storage.metrics import StorageAgentCollector
from vnode_sync.agents.storage.reconciler import UsageSample
from vnode_sync.datanode.backend import DataNodeThrottleBackend
from vnode_sync.errors import ConfigError, Unavailable
from vnode_sync.kernel.backend import HELD_MEASURED, VNodeUsage, VolumeQueue, vnode_name
from vnode_sync.kernel.blkio_v1 import BlkioV1Backend
from vnode_sync.kernel.types import DeviceLimits, DeviceNumber, IoCounters, Share, Shares
from vnode_sync.wire import vnode_pb2 as pb

SDB = DeviceNumber(8, 16)
MB = 1_000_000
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


THOUSAND = 1000
# The collector's series on a node with D devices and V volumes, K = top_users (docs/metrics.md):
# 12 per named user, the default VNode and (other) 12 + 9, per device 4, per volume 3, 27 for the agent.
def series_bound(top_users: int, devices: int = 1, volumes: int = 0) -> int:
    return 12 * top_users + 12 + 9 + 4 * devices + 3 * volumes + 27


def busy_sample(users: int, held: set[int] = frozenset(), scale: int = 1) -> UsageSample:
    """A usage sample of `users` users on SDB: user i moved i MB/s, has read (i + 1) * scale MB in all."""
    usage, demand, limits, threads = {}, {}, {}, {}
    for i in range(users):
        vnode = vnode_name(f"u{i:04d}")
        usage[vnode] = VNodeUsage({SDB: IoCounters((i + 1) * scale * MB, i * scale, 3 * i, i)},
                                  read_wait_seconds=float(i), write_wait_seconds=0.0)
        demand[vnode] = VNodeDemand({SDB: (DemandFlow(float(i) * MB, i in held), DemandFlow(0.0))}, i in held,
                                    float(i) * scale, HELD_MEASURED)
        limits[vnode] = [DeviceLimits(SDB, read_bps=10 * MB, weight=100)]
        threads[vnode] = 1
    usage[vnode_name(None)] = VNodeUsage({SDB: IoCounters(7 * MB, 0, 7, 0)})
    return UsageSample(0.0, usage, demand, demand, limits, {}, threads)


def totals(got: dict, name: str) -> tuple[float, float]:
    """(the node's total of `name`, the sum of every user row's: named, (default) and (other))."""
    node = sum(v for (n, _), v in got.items() if n == f"vnode_sync_node_{name}_total")
    users = sum(v for (n, _), v in got.items() if n == f"vnode_sync_user_{name}_total")
    return node, users


def test_an_agent_with_a_thousand_users_serves_at_most_the_documented_series(agent_of):
    agent = agent_of(datanode())
    agent.reconciler.last_sample = busy_sample(THOUSAND)
    for top_users in (0, 20, 100):
        registry = CollectorRegistry()
        registry.register(StorageAgentCollector(agent, top_users))
        served = [s for f in text_string_to_metric_families(generate_latest(registry).decode()) for s in f.samples]
        assert len(served) <= series_bound(top_users, devices=1, volumes=2), (top_users, len(served))
        named = {s.labels["user"] for s in served if s.name == "vnode_sync_user_read_bytes_total"}
        assert len(named) == top_users + 2 and {"(default)", "(other)"} <= named


def test_the_busiest_and_held_users_are_named_and_the_rest_folded_into_other(agent_of):
    agent = agent_of(datanode())
    agent.reconciler.last_sample = busy_sample(THOUSAND, held={3, 5})
    got = scrape_top(agent, 4)
    named = {dict(labels)["user"] for name, labels in got if name == "vnode_sync_user_read_bytes_total"}
    assert named == {"u0003", "u0005", "u0999", "u0998", "(default)", "(other)"}
    assert got[("vnode_sync_user_held", (("node", "dn1"), ("source", "measured"), ("user", "(other)")))] == 0
    assert got[("vnode_sync_node_users", (("node", "dn1"),))] == THOUSAND
    assert got[("vnode_sync_node_users_held", (("node", "dn1"),))] == 2


def test_other_sums_what_it_hides_and_the_node_totals_add_up_across_samples(agent_of):
    agent = agent_of(datanode())
    collector = StorageAgentCollector(agent, 20)
    agent.reconciler.last_sample = busy_sample(THOUSAND)
    first = scrape_with(collector)
    for name in ("read_bytes", "written_bytes", "reads", "writes"):
        node, users = totals(first, name)
        assert node == users and node > 0, name
    hidden = sum((i + 1) * MB for i in range(THOUSAND - 20))
    assert first[("vnode_sync_user_read_bytes_total", (("node", "dn1"), ("user", "(other)")))] == hidden
    # Every user reads as much again, and the busiest are now others: (other) and the node grow by what
    # was read, never fall, and the node's increase is the named users' plus (other)'s.
    later = busy_sample(THOUSAND, scale=2)
    later.demand.update({v: VNodeDemand({SDB: (DemandFlow(float(THOUSAND - i) * MB), DemandFlow(0.0))}, False, 0.0,
                                        HELD_MEASURED) for i, v in enumerate(sorted(later.demand))})
    agent.reconciler.last_sample = later
    second = scrape_with(collector)
    node_before = totals(first, "read_bytes")[0]
    node_after = totals(second, "read_bytes")[0]
    assert node_after - node_before == sum((i + 1) * MB for i in range(THOUSAND))
    other = ("vnode_sync_user_read_bytes_total", (("node", "dn1"), ("user", "(other)")))
    assert second[other] > first[other]
    named_now = {k for k in second if k[0] == "vnode_sync_user_read_bytes_total" and k != other}
    assert node_after - node_before == pytest.approx(second[other] - first[other] + sum(
        second[k] - first.get(k, 0) if k in first else second[k] / 2 for k in named_now))
    assert second == scrape_with(collector)   # a sample is folded once, whatever the scrapes


def test_top_users_is_a_setting_of_the_agents_metrics_section():
    config = parse_agent_config({"node_id": "dn1", "insecure": True,
                                 "metrics": {"listen": "127.0.0.1:0", "top_users": 5}})
    assert config.metrics.top_users == 5
    with pytest.raises(ConfigError):
        parse_agent_config({"node_id": "dn1", "insecure": True, "metrics": {"listen": "127.0.0.1:0", "top_users": -1}})


def scrape_with(collector: StorageAgentCollector) -> dict:
    registry = CollectorRegistry()
    registry.register(collector)
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(generate_latest(registry).decode()) for s in family.samples}


def scrape_top(agent: StorageAgent, top_users: int) -> dict:
    return scrape_with(StorageAgentCollector(agent, top_users))


def test_a_backend_that_shares_the_node_shows_its_node_ceiling_as_the_limit_not_its_devices_sum(agent_of):
    agent = agent_of(datanode())
    sample = busy_sample(3)
    alice = vnode_name("u0001")
    sample.limits[alice] = [DeviceLimits(SDB, read_bps=10 * MB), DeviceLimits(SDB, read_bps=10 * MB)]
    sample.node_limits[alice] = Shares(Share(ceiling_bps=7 * MB), Share())
    agent.reconciler.last_sample = sample
    got = scrape_top(agent, 3)
    assert got[("vnode_sync_user_limit_bytes_per_second",
                (("direction", "read"), ("node", "dn1"), ("user", "u0001")))] == 7 * MB
    assert ("vnode_sync_user_limit_bytes_per_second",
            (("direction", "write"), ("node", "dn1"), ("user", "u0001"))) not in got
