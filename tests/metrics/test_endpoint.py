"""The metrics endpoint: what it serves, who may read it over mutual TLS, and its settings."""

import shutil
import ssl
import subprocess
import urllib.error
import urllib.request

import grpc
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import COORDINATOR_CONFIG
from vnode_sync.config_loading import parse
from vnode_sync.coordinator.cluster import Cluster
from vnode_sync.coordinator.config import parse_config
from vnode_sync.coordinator.api.metrics import CoordinatorCollector, RpcMetrics
from vnode_sync.coordinator.api.server import create_server
from vnode_sync.coordinator.state.store import StateStore
from vnode_sync.errors import ConfigError, Unavailable
from vnode_sync.metrics.endpoint import MetricsEndpoint
from vnode_sync.metrics.settings import MetricsSettings, endpoint_tls
from vnode_sync.security import certs
from vnode_sync.security.tls import TlsFiles, TransportSecurity
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc


@pytest.fixture
def scraped(tmp_path):
    """A coordinator served on loopback with its metrics on a plaintext loopback endpoint."""
    registry = CollectorRegistry()
    config = parse_config(dict(COORDINATOR_CONFIG))
    cluster = Cluster(config, StateStore(str(tmp_path / "state.sqlite"), seed_users=config.users))
    server, port = create_server(cluster, "127.0.0.1:0", interceptors=(RpcMetrics(registry),))
    server.start()
    registry.register(CoordinatorCollector(cluster))
    endpoint = MetricsEndpoint("127.0.0.1:0", registry).start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield cluster, channel, f"http://127.0.0.1:{endpoint.port}/metrics"
    finally:
        channel.close()
        endpoint.stop()
        server.stop(0)


def samples(text: str) -> dict:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_the_coordinator_serves_its_state_and_counts_rpc_latency_and_errors(scraped):
    cluster, channel, url = scraped
    admin = pb_grpc.AdminStub(channel)
    admin.Status(pb.StatusRequest(), timeout=5)
    with pytest.raises(grpc.RpcError):
        admin.SetPriority(pb.SetPriorityRequest(user="mallory", priority=5), timeout=5)
    got = samples(urllib.request.urlopen(url, timeout=5).read().decode())
    assert got[("vnode_sync_coordinator_generation", ())] == cluster.generation()
    assert got[("vnode_sync_coordinator_agents_configured", ())] == 1
    assert got[("vnode_sync_coordinator_node_connected", (("node", "dn1"),))] == 0
    assert got[("vnode_sync_coordinator_user_priority", (("user", "bob"),))] == 8
    assert got[("vnode_sync_coordinator_rpc_duration_seconds_count", (("method", "Status"), ("service", "Admin")))] == 1
    assert got[("vnode_sync_coordinator_rpc_errors_total",
                (("code", "NOT_FOUND"), ("method", "SetPriority"), ("service", "Admin")))] == 1
    assert not [k for k in got if k[0] == "vnode_sync_coordinator_rpc_errors_total" and ("method", "Status") in k[1]]


def test_the_coordinator_serves_one_series_per_user_and_direction_with_its_rate_over_the_cluster(scraped):
    cluster, _, url = scraped
    cluster.ledger.observe(pb.UsageReport(node_id="dn1", sampled_at_unix=cluster.ledger.now(), demand=pb.DemandSummary(
        full=True, users=["alice"], devices=["/dev/loop7"], user_index=[0], device_index=[0], read_bps=[7e6],
        write_bps=[2e6], read_held=[True], write_held=[False], read_demand_bps=[9e6], write_demand_bps=[2e6])),
        {"alice", "bob"})
    got = samples(urllib.request.urlopen(url, timeout=5).read().decode())
    rates = {labels: v for (name, labels), v in got.items() if name == "vnode_sync_coordinator_user_rate_bytes_per_second"}
    assert rates == {(("direction", "read"), ("user", "alice")): 7e6, (("direction", "write"), ("user", "alice")): 2e6,
                     (("direction", "read"), ("user", "bob")): 0, (("direction", "write"), ("user", "bob")): 0}
    assert not [k for k in got if "node" in dict(k[1]) and "user" in dict(k[1])]   # never per user and node


def test_groups_are_one_series_each_their_subtrees_users_summed_and_promtool_finds_no_problem(scraped):
    from vnode_sync.coordinator.state.groups import GroupRecord
    cluster, _, url = scraped
    for group in (GroupRecord("physics", 2), GroupRecord("theory", 1, "physics")):
        cluster.store.add_group(group)
    cluster.store.move_user("alice", "theory")
    cluster.publishing.published(cluster.store.move_user("bob", "physics")[0])
    cluster.publishing.refresh_snapshot()
    cluster.ledger.observe(pb.UsageReport(node_id="dn1", sampled_at_unix=cluster.ledger.now(), demand=pb.DemandSummary(
        full=True, users=["alice", "bob"], devices=["/dev/loop7"], user_index=[0, 1], device_index=[0, 0],
        read_bps=[7e6, 3e6], write_bps=[2e6, 0], read_held=[True, False], write_held=[False, False],
        read_demand_bps=[9e6, 3e6], write_demand_bps=[2e6, 0])), {"alice", "bob"})
    text = urllib.request.urlopen(url, timeout=5).read()
    got = samples(text.decode())
    rates = {labels: v for (name, labels), v in got.items() if name == "vnode_sync_coordinator_group_rate_bytes_per_second"}
    assert rates == {(("direction", "read"), ("group", "physics")): 10e6, (("direction", "write"), ("group", "physics")): 2e6,
                     (("direction", "read"), ("group", "theory")): 7e6, (("direction", "write"), ("group", "theory")): 2e6}
    assert got[("vnode_sync_coordinator_group_weight", (("group", "physics"),))] == 2
    lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, timeout=30)
    assert lint.returncode == 0, lint.stdout.decode() + lint.stderr.decode()


def test_only_the_metrics_path_is_served(scraped):
    url = scraped[2].replace("/metrics", "/")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url, timeout=5)
    assert e.value.code == 404


@pytest.mark.skipif(shutil.which("promtool") is None, reason="needs promtool (Debian's prometheus package; "
                    "scripts/setup.d/prometheus.sh installs it)")
def test_promtool_finds_no_naming_problem_in_the_coordinators_metrics(scraped):
    text = urllib.request.urlopen(scraped[2], timeout=5).read()
    lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, timeout=30)
    assert lint.returncode == 0, lint.stdout.decode() + lint.stderr.decode()


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("pki"))
    ca = certs.create_ca(directory)
    certs.issue(directory, "node", "dn1", hosts=("127.0.0.1",))
    for role, name in (("monitor", "prometheus"), ("admin", "root"), ("user", "alice"), ("node", "dn2")):
        certs.issue(directory, role, name)
    return directory, ca.cert


def _client(directory: str, ca: str, who: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca)
    if who:
        context.load_cert_chain(f"{directory}/{who}.crt", f"{directory}/{who}.key")
    return context


@pytest.mark.parametrize("who,code", [("monitor-prometheus", 200), ("admin-root", 200), ("user-alice", 403),
                                      ("node-dn2", 403)])
def test_over_tls_only_admin_and_monitor_certificates_may_read(pki, who, code):
    directory, ca = pki
    registry = CollectorRegistry()
    endpoint = MetricsEndpoint("127.0.0.1:0", registry, TlsFiles(ca=ca, cert=f"{directory}/node-dn1.crt",
                                                                 key=f"{directory}/node-dn1.key")).start()
    try:
        url = f"https://127.0.0.1:{endpoint.port}/metrics"
        try:
            answer = urllib.request.urlopen(url, timeout=5, context=_client(directory, ca, who))
            status, body = answer.status, answer.read().decode()
        except urllib.error.HTTPError as e:
            status, body = e.code, e.read().decode()
        assert status == code
        if code == 403:
            assert "only admin: and monitor: certificates may read metrics" in body
        with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):   # no certificate: refused
            urllib.request.urlopen(url, timeout=5, context=_client(directory, ca, None))
    finally:
        endpoint.stop()


def test_a_taken_address_is_refused_in_one_line():
    first = MetricsEndpoint("127.0.0.1:0", CollectorRegistry())
    try:
        with pytest.raises(Unavailable, match="cannot listen on '127.0.0.1:"):
            MetricsEndpoint(f"127.0.0.1:{first.port}", CollectorRegistry())
    finally:
        first.stop()


TLS = TlsFiles(ca="/pki/ca.crt", cert="/pki/node.crt", key="/pki/node.key")


def metrics(raw) -> MetricsSettings:
    return parse(raw, MetricsSettings, "agent.yaml", "metrics")


@pytest.mark.parametrize("raw,component,expected", [
    ({"listen": "127.0.0.1:9810"}, TransportSecurity(), None),                 # loopback: plaintext is fine
    ({"listen": "0.0.0.0:9810"}, TransportSecurity(TLS), TLS),                 # the component's certificate
    ({"listen": "0.0.0.0:9810", "plaintext": True}, TransportSecurity(TLS), None),
    ({"listen": "0.0.0.0:9810"}, TransportSecurity(None, insecure=True), None),
])
def test_the_endpoint_serves_tls_whenever_the_component_has_it(raw, component, expected):
    assert endpoint_tls(metrics(raw), component) == expected


@pytest.mark.parametrize("raw,error", [
    ({"listen": "9810"}, "metrics.listen: got '9810'; allowed: host:port"),
    ({"listen": "0.0.0.0:http"}, "metrics.listen: got '0.0.0.0:http'"),
    ({"listen": "0.0.0.0:70000"}, "metrics.listen"),
    ({"listen": "0.0.0.0:9810", "port": 9810}, "metrics.port"),
    ({"listen": "0.0.0.0:1", "plaintext": True, "tls": {"ca": "a", "cert": "b", "key": "c"}}, "keep one"),
])
def test_bad_metrics_settings_are_one_line_errors(raw, error):
    with pytest.raises(ConfigError) as e:
        metrics(raw)
    assert error in str(e.value) and "\n" not in str(e.value)


def test_plaintext_off_this_host_must_be_asked_for_in_the_config():
    from vnode_sync.agents.config import parse_agent_config
    with pytest.raises(ConfigError, match="metrics.plaintext: got False; allowed: true to serve metrics in plaintext"):
        parse_agent_config({"node_id": "dn1", "metrics": {"listen": "0.0.0.0:9811"}})
    assert parse_agent_config({"node_id": "dn1", "metrics": {"listen": "0.0.0.0:9811", "plaintext": True}}).metrics
    assert parse_agent_config({"node_id": "dn1"}).metrics is None
    with pytest.raises(ConfigError, match="plaintext off this host"):
        endpoint_tls(metrics({"listen": "0.0.0.0:9810"}), TransportSecurity())
