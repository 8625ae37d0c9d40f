"""The agent's configuration (`vnode-agent --config`), read by the one typed loader.

One Settings class per concern; each field says its unit and why its default. The sections
that belong to a plug-in are that plug-in's own class: `discovery:` by its `kind`, `lustre:`
for the lustre-tbf backend, `datanode_throttle:` for datanode-throttle, `compute:` for the
compute role.
"""

from typing import Annotated, Literal

import annotated_types as at
from pydantic import AfterValidator, Field, model_validator

from vnode_sync.agents.handlers.generic import GenericDiscoverySettings
from vnode_sync.agents.handlers.hdfs import HdfsDiscoverySettings
from vnode_sync.config_loading import (MEASURED, TEST_SEAM, Allowed, Group, ListOf, LogFormat, NodeId, Refused,
                                       Seconds, Settings, load, parse, plugin_section)
from vnode_sync.datanode.backend import DataNodeThrottleSettings
from vnode_sync.errors import InvalidArgument
from vnode_sync.kernel.lustre_settings import LustreSettings
from vnode_sync.kernel.required_disk_settings import parse as parse_required_disk_setting
from vnode_sync.metrics.settings import AgentMetricsSettings, refuse_unasked_plaintext
from vnode_sync.security.tls import SecuredSettings

PROBE_SECONDS = 0.25
ENDPOINT_ALLOWED = "host:port or :port (any host), port 1-65535"
REQUIRED_DISK_SETTING_ALLOWED = ("KEY=VALUE, KEY one of scheduler, max_sectors_kb, read_ahead_kb, nr_requests, "
                                 "iosched/<tunable>; or mount_option=NAME")


def _required_disk_setting(text: str) -> str:
    try:
        parse_required_disk_setting(text)
    except InvalidArgument as e:
        raise ValueError(str(e)) from e
    return text


def _endpoint(text: str) -> str:
    host, _, port = text.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536 or (not host and not text.startswith(":")):
        raise ValueError(ENDPOINT_ALLOWED)
    return text


class ComputeSettings(Settings):
    """What the compute agent watches and how often."""

    storage_endpoints: Annotated[ListOf[Annotated[str, AfterValidator(_endpoint), Allowed(ENDPOINT_ALLOWED)]],
                                 at.MinLen(1)]
    """Storage endpoints whose connections are reported (the DataNodes' data port, e.g. ':9866')."""
    min_uid: Annotated[int, at.Ge(1), at.Le(2**32 - 2)] = 1000
    """Lowest uid that is a user: system accounts and root are never reported or placed (Debian's 1000)."""
    connection_seconds: Annotated[Seconds, MEASURED] = 0.1
    """How often connections are looked at: a new connection's bytes go to the storage node's
    default VNode until its owner arrives there, so this is short."""
    placement_seconds: Annotated[Seconds, MEASURED] = 1.0
    """How often job processes are placed."""

    @property
    def endpoints(self) -> tuple[tuple[str | None, int], ...]:
        """(host or None for any, port) of each storage endpoint."""
        return tuple((text.rpartition(":")[0].strip("[]") or None, int(text.rpartition(":")[2]))
                     for text in self.storage_endpoints)


BACKENDS = ("auto", "blkio-v1", "io-v2", "lustre-tbf", "datanode-throttle")
ROLES = ("storage", "compute")
# kind -> the plug-in's settings; agents/plugins.py maps the same kinds to the plug-ins.
DISCOVERY_KINDS = {"generic": GenericDiscoverySettings, "hdfs": HdfsDiscoverySettings}
DiscoverySection = plugin_section(DISCOVERY_KINDS, default="generic")

CgroupName = Annotated[str, Field(pattern=r"^([^/.][^/]*)?$"),
                       Allowed("a single directory name, not starting with '.' ('' for vnode-sync.<node_id>)")]


NODE, ENFORCEMENT, RESTARTS = Group("This node and its coordinator"), Group("Enforcement"), Group("Across restarts")


class AgentConfig(SecuredSettings):
    """A storage or compute agent's file."""

    node_id: Annotated[NodeId, NODE]
    """This node's id, as the coordinator's storage_nodes list it (and its certificate's CN node:<id>)."""
    role: Annotated[Literal[ROLES], NODE] = "storage"
    """storage: enforce shares on this node; compute: report connections and place jobs."""
    coordinator: Annotated[str, at.MinLen(1), NODE] = "127.0.0.1:7070"
    """host:port of the coordinator; several coordinators (docs/ha.md): comma-separated, the leader is followed."""
    backend: Annotated[Literal[BACKENDS], ENFORCEMENT] = "auto"
    """How limits are enforced; auto: cgroup v1 blkio if mounted, else cgroup v2 io."""
    cgroup_root: Annotated[str, at.MinLen(1), TEST_SEAM] = "/sys/fs/cgroup"
    """Where the cgroup hierarchies are mounted (tests point it at a fake tree)."""
    cgroup_name: Annotated[CgroupName, ENFORCEMENT] = ""
    """The agent's own subtree; VNodes live below it, nothing outside it is touched."""
    proc_root: Annotated[str, at.MinLen(1), TEST_SEAM] = "/proc"
    """/proc, or a fake tree in tests."""
    devices: Annotated[ListOf[Annotated[str, at.MinLen(1)]], ENFORCEMENT] = ()
    """Block device paths whose I/O is shared (as the coordinator's storage_nodes devices)."""
    required_disk_settings: Annotated[ListOf[Annotated[str, AfterValidator(_required_disk_setting),
                                                       Allowed(REQUIRED_DISK_SETTING_ALLOWED)]], ENFORCEMENT] = ()
    """What the site requires of each of those disks, read back at every full reconcile; each one missing
    is reported in the node's degraded list (vnodectl nodes): queue files as the storage role sets them
    (read_ahead_kb=512) and mount options of their file systems (mount_option=nodelalloc). Nothing is
    changed. The storage role writes its vnode_storage_agent_disk_queue here (docs/deploy-hdfs.md)."""
    discovery: DiscoverySection = GenericDiscoverySettings()
    """How handler threads are found; the keys beside `kind` are the plug-in's own."""
    resync_seconds: Annotated[Seconds, MEASURED] = 5.0
    """Full reconcile (limits, membership drift, stale VNodes) at least this often."""
    report_seconds: Annotated[Seconds, Group("Usage reports")] = 1.0
    """Usage reports to the coordinator this often; measured MB/s comes from them."""
    probe_seconds: Annotated[Seconds, MEASURED] = PROBE_SECONDS
    """Between reports, demand is looked at this often (agents/storage/report_interval.py), and a
    user's that moved sharply (stopped, came back, halved or doubled) is reported at once;
    report_seconds or more: only at reports. Less often where looks would take more than 5 % of a
    core (thousands of VNodes)."""
    capture_seconds: Annotated[Seconds, MEASURED] = 0.5
    """Longest wait between capture passes when the discovery plug-in has no event."""
    fast_thread_moves: Annotated[bool, ENFORCEMENT] = True
    """Mount an empty cgroup hierarchy with favordynmods while running, so moving a handler
    thread does not wait for an RCU grace period (vnode_sync/kernel/fast_moves.py)."""
    state_cache: Annotated[str, RESTARTS] = ""
    """Last desired state, so a restart enforces it even while the coordinator is down; "": none."""
    run_dir: Annotated[str, at.MinLen(1), RESTARTS] = "/run/vnode-sync"
    """Where a storage agent holds its lock: one agent per cgroup subtree (so per node id) on a host."""
    teardown_on_exit: Annotated[bool, RESTARTS] = False
    """Remove every VNode on exit (demos, tests). Production keeps enforcing across restarts."""
    log_format: Annotated[LogFormat, Group("Logs")] = "plain"
    """plain for people, json for a log collector."""
    lustre: LustreSettings = Field(default_factory=LustreSettings)
    """Settings of the lustre-tbf backend (lctl path, OSS service, RPC size)."""
    datanode_throttle: DataNodeThrottleSettings | None = None
    """The datanode-throttle backend's control socket; needed with that backend."""
    compute: ComputeSettings | None = None
    """What the compute role reports and places; needed with role compute."""
    metrics: AgentMetricsSettings | None = None
    """The Prometheus endpoint (docs/metrics.md); none: off."""

    @model_validator(mode="after")
    def _metrics_transport(self):
        refuse_unasked_plaintext(self.metrics, self.security)
        return self

    @model_validator(mode="after")
    def _sections_for_choices(self):
        if self.backend == "datanode-throttle" and self.datanode_throttle is None:
            raise Refused("datanode_throttle", None, "a section {socket: /absolute/path} (the DataNode's "
                          "-javaagent socket= argument) with backend datanode-throttle")
        if self.backend == "lustre-tbf" and not self.lustre.experimental:
            raise Refused("lustre.experimental", self.lustre.experimental,
                          "true with backend lustre-tbf: it has not yet run on a real Lustre OSS, only against "
                          "a stand-in lctl (docs/lustre.md); set it to run it anyway")
        if self.role == "compute" and self.compute is None:
            raise Refused("compute", None, "a section {storage_endpoints: [':9866']} with role compute")
        return self

    @property
    def cgroup_subtree(self) -> str:
        return self.cgroup_name or f"vnode-sync.{self.node_id}"

    @property
    def fast_moves_mountpoint(self) -> str:
        return f"/run/vnode-sync/{self.cgroup_subtree}.fast-moves"


def parse_agent_config(raw: dict, source: str = "(agent config)") -> AgentConfig:
    return parse(raw, AgentConfig, source)


def load_agent_config(path: str) -> AgentConfig:
    return load(path, AgentConfig)
