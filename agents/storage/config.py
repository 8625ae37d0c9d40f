"""The agent's configuration. One dataclass; each field says its unit and why its default."""

from dataclasses import dataclass, field

from vnode_sync import validation
from vnode_sync.config_loading import load_yaml_mapping, reject_unknown_keys, typed
from vnode_sync.errors import ConfigError, InvalidArgument
from vnode_sync.metrics.settings import MetricsSettings, endpoint_tls, parse_metrics
from vnode_sync.security.tls import TransportSecurity, parse_transport

BACKENDS = ("auto", "blkio-v1", "io-v2", "lustre-tbf", "datanode-throttle")
ROLES = ("storage", "compute")


@dataclass(frozen=True)
class AgentConfig:
    node_id: str
    role: str = "storage"
    coordinator: str = "127.0.0.1:7070"
    backend: str = "auto"
    cgroup_root: str = "/sys/fs/cgroup"
    # The agent's own subtree; VNodes live below it, nothing outside it is touched.
    cgroup_name: str = ""
    proc_root: str = "/proc"
    devices: tuple[str, ...] = ()
    discovery: dict = field(default_factory=lambda: {"kind": "generic"})
    # Full reconcile (limits, membership drift, stale VNodes) at least this often, seconds.
    resync_seconds: float = 5.0
    # Usage reports to the coordinator this often, seconds; measured MB/s comes from them.
    report_seconds: float = 1.0
    # Longest wait between capture passes when the discovery plug-in has no event, seconds.
    capture_seconds: float = 0.5
    # Mount an empty cgroup hierarchy with favordynmods while running, so moving a handler
    # thread does not wait for an RCU grace period (vnode_sync/kernel/fast_moves.py).
    fast_thread_moves: bool = True
    # Last desired state, so a restart enforces it even while the coordinator is down.
    state_cache: str = ""
    # Remove every VNode on exit (demos, tests). Production keeps enforcing across restarts.
    teardown_on_exit: bool = False
    log_format: str = "plain"
    # Extra settings for the lustre-tbf backend (lctl path, OSS target, RPC size).
    lustre: dict = field(default_factory=dict)
    # The datanode-throttle backend's control socket: the Java agent's socket= argument.
    datanode_throttle_socket: str = ""
    # Compute role: storage endpoints to report connections to, min_uid (agents/compute/main.py).
    compute: dict = field(default_factory=dict)
    # From the `tls:` section ({ca, cert, key}: this node's certificate, CN node:<node_id>)
    # or `insecure: true`. With neither, plaintext is allowed only to a loopback coordinator.
    security: TransportSecurity = field(default_factory=TransportSecurity)
    # The Prometheus endpoint (docs/metrics.md); off without a `metrics:` section.
    metrics: MetricsSettings = field(default_factory=MetricsSettings)

    @property
    def cgroup_subtree(self) -> str:
        return self.cgroup_name or f"vnode-sync.{self.node_id}"

    @property
    def fast_moves_mountpoint(self) -> str:
        return f"/run/vnode-sync/{self.cgroup_subtree}.fast-moves"


_FLOATS = ("resync_seconds", "report_seconds", "capture_seconds")


def parse_agent_config(raw: dict) -> AgentConfig:
    reject_unknown_keys("agent config", raw, set(AgentConfig.__dataclass_fields__) - {"security", "datanode_throttle_socket"}
                        | {"tls", "insecure", "datanode_throttle"})
    try:
        node_id = validation.node_id(raw.get("node_id"))
    except InvalidArgument as e:
        raise ConfigError(f"node_id: {e}") from e
    role = typed("config", "role", raw.get("role"), str, "storage")
    if role not in ROLES:
        raise ConfigError(f"role {role!r} is not one of {', '.join(ROLES)}")
    backend = typed("config", "backend", raw.get("backend"), str, "auto")
    if backend not in BACKENDS:
        raise ConfigError(f"backend {backend!r} is not one of {', '.join(BACKENDS)}")
    cgroup_name = typed("config", "cgroup_name", raw.get("cgroup_name"), str, "")
    if cgroup_name and ("/" in cgroup_name or cgroup_name.startswith(".")):
        raise ConfigError(f"cgroup_name {cgroup_name!r} must be a single directory name")
    devices = raw.get("devices") or []
    if not isinstance(devices, list) or not all(isinstance(d, str) and d for d in devices):
        raise ConfigError("devices must be a list of block device paths")
    discovery = raw.get("discovery") or {"kind": "generic"}
    if not isinstance(discovery, dict) or not isinstance(discovery.get("kind", "generic"), str):
        raise ConfigError("discovery must be a mapping with a 'kind' (generic or hdfs)")
    floats = {k: typed("config", k, raw.get(k), float, AgentConfig.__dataclass_fields__[k].default)
              for k in _FLOATS}
    for key, value in floats.items():
        if value <= 0:
            raise ConfigError(f"{key} {value} must be above 0 seconds")
    log_format = typed("config", "log_format", raw.get("log_format"), str, "plain")
    if log_format not in ("plain", "json"):
        raise ConfigError(f"log_format {log_format!r} is not one of plain, json")
    lustre = raw.get("lustre") or {}
    if not isinstance(lustre, dict):
        raise ConfigError("lustre must be a mapping")
    throttle = raw.get("datanode_throttle") or {}
    if not isinstance(throttle, dict):
        raise ConfigError("datanode_throttle must be a mapping with a 'socket'")
    reject_unknown_keys("datanode_throttle", throttle, {"socket"})
    throttle_socket = typed("datanode_throttle", "socket", throttle.get("socket"), str, "")
    if backend == "datanode-throttle" and not throttle_socket.startswith("/"):
        raise ConfigError("backend datanode-throttle needs datanode_throttle: {socket: /absolute/path} "
                          "(the DataNode's -javaagent socket= argument)")
    compute = raw.get("compute") or {}
    if not isinstance(compute, dict):
        raise ConfigError("compute must be a mapping")
    security = parse_transport("config", raw.get("tls"), raw.get("insecure"))
    metrics = parse_metrics("metrics", raw.get("metrics"))
    if metrics.enabled:
        endpoint_tls(metrics, security)   # plaintext off this host must be asked for
    return AgentConfig(
        node_id=node_id, role=role,
        coordinator=typed("config", "coordinator", raw.get("coordinator"), str, "127.0.0.1:7070"),
        backend=backend,
        cgroup_root=typed("config", "cgroup_root", raw.get("cgroup_root"), str, "/sys/fs/cgroup"),
        cgroup_name=cgroup_name,
        proc_root=typed("config", "proc_root", raw.get("proc_root"), str, "/proc"),
        devices=tuple(devices), discovery=dict(discovery), **floats,
        state_cache=typed("config", "state_cache", raw.get("state_cache"), str, ""),
        teardown_on_exit=typed("config", "teardown_on_exit", raw.get("teardown_on_exit"), bool, False),
        fast_thread_moves=typed("config", "fast_thread_moves", raw.get("fast_thread_moves"), bool, True),
        log_format=log_format, lustre=dict(lustre), compute=dict(compute),
        datanode_throttle_socket=throttle_socket, security=security, metrics=metrics)


def load_agent_config(path: str) -> AgentConfig:
    return parse_agent_config(load_yaml_mapping(path))
