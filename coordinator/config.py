"""The coordinator's configuration: where it listens, where state lives, policy, seed users and nodes.

Users listed here are created on first start; later changes made with vnodectl are kept
in the state database and win over this file. Storage nodes and their capacities are
read from this file on every start: capacity is a property of hardware, set by the admin.
"""

from dataclasses import dataclass, field

from vnode_sync import validation
from vnode_sync.config_loading import load_yaml_mapping, reject_unknown_keys, typed
from vnode_sync.errors import ConfigError, InvalidArgument
from vnode_sync.metrics.settings import MetricsSettings, endpoint_tls, parse_metrics
from vnode_sync.security.tls import TransportSecurity, parse_transport

MODES = ("throttle", "weight")
ALLOCATIONS = ("static", "work-conserving")


@dataclass(frozen=True)
class DeviceCapacity:
    name: str            # device path on the storage node, e.g. /dev/sdb
    read_bps: int        # BW of Algorithm 1 for reads, bytes/s
    write_bps: int
    read_iops: int = 0   # 0: do not split iops
    write_iops: int = 0


@dataclass(frozen=True)
class StorageNodeConfig:
    node_id: str
    devices: tuple[DeviceCapacity, ...]
    # Where clients reach this node's file system service, as compute nodes see it: (address,
    # port or None for every port). A reported connection goes only to the nodes whose endpoints
    # match its storage end; a node with none listed gets every connection (it cannot be told apart).
    endpoints: tuple[tuple[str, int | None], ...] = ()


@dataclass(frozen=True)
class SeedUser:
    name: str
    uid: int
    priority: int
    active: bool = False


@dataclass(frozen=True)
class Policy:
    mode: str = "throttle"
    # Share of each device's BW that the default VNode (unidentified handler threads,
    # inactive users) may use. Above 0 so that nothing is unthrottled by accident.
    default_vnode_fraction: float = 0.1
    # Priority a user gets when a batch job creates it and nothing else says.
    default_priority: int = 10
    account_priorities: dict = field(default_factory=dict)
    queue_priorities: dict = field(default_factory=dict)
    # Bounds a job's own requested priority is clamped into.
    job_priority_min: int = 1
    job_priority_max: int = 50
    # A job not confirmed (started again or listed as running) for this long is dropped,
    # so a lost epilogue cannot keep a user active forever. Seconds.
    job_expiry_seconds: float = 86400.0
    # "static": Algorithm 1 caps per node (the paper's). "work-conserving": cluster-wide weighted
    # max-min from measured demand, with reservations and limits (docs/fair-shares.md; throttle mode).
    allocation: str = "static"
    control_seconds: float = 1.0     # the allocation loop's period
    probe_fraction: float = 0.03     # of a node's BW every active user keeps, so its return is seen
    hysteresis: float = 0.05         # a new allocation is pushed only if it differs by more than this
    fallback_seconds: float = 30.0   # agents cut off this long go back to the static shares


@dataclass(frozen=True)
class CoordinatorConfig:
    listen: str = "127.0.0.1:7070"
    state_path: str = "/var/lib/vnode-sync/coordinator.sqlite"
    policy: Policy = field(default_factory=Policy)
    users: tuple[SeedUser, ...] = ()
    storage_nodes: tuple[StorageNodeConfig, ...] = ()
    log_format: str = "plain"
    # tls: {ca, cert, key} for mutual TLS, or insecure: true; vnode-coordinator refuses neither.
    security: TransportSecurity = field(default_factory=TransportSecurity)
    # Audit lines (who changed what, old and new value) also go to this file; "" = the log only.
    audit_log: str = ""
    # The Prometheus endpoint (docs/metrics.md); off without a `metrics:` section.
    metrics: MetricsSettings = field(default_factory=MetricsSettings)

    def node(self, node_id: str) -> StorageNodeConfig | None:
        return next((n for n in self.storage_nodes if n.node_id == node_id), None)


def _priority_map(section: str, raw) -> dict:
    raw = raw or {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{section} must be a mapping of name to priority")
    try:
        return {str(k): validation.priority(v) for k, v in raw.items()}
    except InvalidArgument as e:
        raise ConfigError(f"{section}: {e}") from e


def _policy(raw) -> Policy:
    raw = raw or {}
    reject_unknown_keys("policy", raw, set(Policy.__dataclass_fields__))
    mode = typed("policy", "mode", raw.get("mode"), str, "throttle")
    if mode not in MODES:
        raise ConfigError(f"policy.mode {mode!r} is not one of {', '.join(MODES)}")
    fraction = typed("policy", "default_vnode_fraction", raw.get("default_vnode_fraction"), float, 0.1)
    if not 0 < fraction <= 1:
        raise ConfigError(f"policy.default_vnode_fraction {fraction} must be in (0, 1]")
    try:
        default_priority = validation.priority(raw.get("default_priority", 10))
        job_min = validation.priority(raw.get("job_priority_min", 1))
        job_max = validation.priority(raw.get("job_priority_max", 50))
    except InvalidArgument as e:
        raise ConfigError(f"policy: {e}") from e
    if job_min > job_max:
        raise ConfigError(f"policy.job_priority_min {job_min} is above job_priority_max {job_max}")
    expiry = typed("policy", "job_expiry_seconds", raw.get("job_expiry_seconds"), float, 86400.0)
    if expiry <= 0:
        raise ConfigError(f"policy.job_expiry_seconds {expiry} must be above 0")
    allocation = typed("policy", "allocation", raw.get("allocation"), str, "static")
    if allocation not in ALLOCATIONS:
        raise ConfigError(f"policy.allocation {allocation!r} is not one of {', '.join(ALLOCATIONS)}")
    if allocation == "work-conserving" and mode != "throttle":
        raise ConfigError("policy.allocation work-conserving needs policy.mode throttle (it sets bytes/s limits)")
    tuning = {}
    for key, low, high in (("control_seconds", 0.05, 3600.0), ("probe_fraction", 0.0, 0.5),
                           ("hysteresis", 0.0, 0.5), ("fallback_seconds", 1.0, 86400.0)):
        value = typed("policy", key, raw.get(key), float, Policy.__dataclass_fields__[key].default)
        if not low <= value <= high:
            raise ConfigError(f"policy.{key} {value} must be in [{low}, {high}]")
        tuning[key] = value
    return Policy(mode, fraction, default_priority,
                  _priority_map("policy.account_priorities", raw.get("account_priorities")),
                  _priority_map("policy.queue_priorities", raw.get("queue_priorities")),
                  job_min, job_max, expiry, allocation, **tuning)


def _device(node_id: str, raw) -> DeviceCapacity:
    section = f"storage_nodes[{node_id}].devices"
    if not isinstance(raw, dict):
        raise ConfigError(f"{section}: each device must be a mapping")
    reject_unknown_keys(section, raw, {"name", "read_bps", "write_bps", "read_iops", "write_iops"})
    name = typed(section, "name", raw.get("name"), str)
    if not name:
        raise ConfigError(f"{section}: a device needs a name (its path, e.g. /dev/sdb)")
    try:
        values = {k: validation.bandwidth(raw.get(k, 0), f"{section}[{name}].{k}")
                  for k in ("read_bps", "write_bps", "read_iops", "write_iops")}
    except InvalidArgument as e:
        raise ConfigError(str(e)) from e
    if not values["read_bps"] or not values["write_bps"]:
        raise ConfigError(f"{section}[{name}] needs read_bps and write_bps above 0 (bytes/s)")
    return DeviceCapacity(name, **values)


def _node(raw) -> StorageNodeConfig:
    if not isinstance(raw, dict):
        raise ConfigError("storage_nodes: each node must be a mapping")
    reject_unknown_keys("storage_nodes[]", raw, {"id", "devices", "endpoints"})
    try:
        node_id = validation.node_id(raw.get("id"))
    except InvalidArgument as e:
        raise ConfigError(f"storage_nodes: {e}") from e
    devices = raw.get("devices") or []
    if not isinstance(devices, list) or not devices:
        raise ConfigError(f"storage_nodes[{node_id}] needs a list of devices")
    parsed = tuple(_device(node_id, d) for d in devices)
    if len({d.name for d in parsed}) != len(parsed):
        raise ConfigError(f"storage_nodes[{node_id}] lists a device twice")
    endpoints = raw.get("endpoints") or []
    if not isinstance(endpoints, list):
        raise ConfigError(f"storage_nodes[{node_id}].endpoints must be a list of address:port or address")
    try:
        return StorageNodeConfig(node_id, parsed, tuple(validation.endpoint(e) for e in endpoints))
    except InvalidArgument as e:
        raise ConfigError(f"storage_nodes[{node_id}].endpoints: {e}") from e


def _user(raw) -> SeedUser:
    if not isinstance(raw, dict):
        raise ConfigError("users: each user must be a mapping")
    reject_unknown_keys("users[]", raw, {"name", "uid", "priority", "active"})
    try:
        return SeedUser(validation.user_name(raw.get("name")), validation.uid(raw.get("uid")),
                        validation.priority(raw.get("priority", 10)),
                        bool(typed("users[]", "active", raw.get("active"), bool, False)))
    except InvalidArgument as e:
        raise ConfigError(f"users: {e}") from e


def parse_config(raw: dict) -> CoordinatorConfig:
    reject_unknown_keys("coordinator config", raw,
                        {"listen", "state_path", "policy", "users", "storage_nodes", "log_format",
                         "tls", "insecure", "audit_log", "metrics"})
    users = tuple(_user(u) for u in raw.get("users") or [])
    if len({u.name for u in users}) != len(users):
        raise ConfigError("users: a user is listed twice")
    nodes = tuple(_node(n) for n in raw.get("storage_nodes") or [])
    if len({n.node_id for n in nodes}) != len(nodes):
        raise ConfigError("storage_nodes: a node id is listed twice")
    log_format = typed("config", "log_format", raw.get("log_format"), str, "plain")
    if log_format not in ("plain", "json"):
        raise ConfigError(f"log_format {log_format!r} is not one of plain, json")
    security = parse_transport("config", raw.get("tls"), raw.get("insecure"))
    metrics = parse_metrics("metrics", raw.get("metrics"))
    if metrics.enabled:
        endpoint_tls(metrics, security)   # plaintext off this host must be asked for
    return CoordinatorConfig(
        listen=typed("config", "listen", raw.get("listen"), str, "127.0.0.1:7070"),
        state_path=typed("config", "state_path", raw.get("state_path"), str,
                         "/var/lib/vnode-sync/coordinator.sqlite"),
        policy=_policy(raw.get("policy")), users=users, storage_nodes=nodes, log_format=log_format,
        security=security, audit_log=typed("config", "audit_log", raw.get("audit_log"), str, ""), metrics=metrics)


def load_config(path: str) -> CoordinatorConfig:
    return parse_config(load_yaml_mapping(path))
