"""Settings of the batch hooks, from /etc/vnode-sync/batch.yaml; $VNODE_COORDINATOR overrides the address.

Example:
    coordinator: coord.example.org:7070
    timeout_seconds: 5
    fail_closed: false
    spool_dir: /var/spool/vnode-sync/batch
    log_file: /var/log/vnode-sync/batch.log
    tls: {ca: /etc/vnode-sync/ca.pem, cert: /etc/vnode-sync/compute.pem, key: /etc/vnode-sync/compute.key}
    placement: {enabled: true, cgroup_root: /sys/fs/cgroup, cgroup_name: vnode-sync-compute}

The certificate names this host as compute:<node>; the coordinator accepts job events only
for that node. Without tls, plaintext is used only to a coordinator on this host, or with
`insecure: true` (lab only).
"""

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from vnode_sync.config_loading import load_yaml_mapping, reject_unknown_keys, typed
from vnode_sync.errors import ConfigError
from vnode_sync.security.tls import TransportSecurity, parse_transport

DEFAULT_PATH = "/etc/vnode-sync/batch.yaml"
DEFAULT_COORDINATOR = "127.0.0.1:7070"


@dataclass(frozen=True)
class PlacementSettings:
    """Putting a job's processes into its user's VNode on the compute node (blkio v1)."""

    enabled: bool = False
    cgroup_root: str = "/sys/fs/cgroup"
    cgroup_name: str = "vnode-sync-compute"   # the subtree the compute side owns under blkio
    # The prolog runs before the job's processes exist; a detached watcher places them as
    # they appear for this long (seconds), then exits. Later children inherit the cgroup.
    watch_seconds: float = 30.0


@dataclass(frozen=True)
class BatchSettings:
    coordinator: str = DEFAULT_COORDINATOR
    # Bound on one hook's whole run (seconds). Slurm drains the node when its prolog fails or
    # passes PrologEpilogTimeout, pbs_mom kills it after $prologalarm (300 s): stay far below.
    timeout_seconds: float = 5.0
    # False: a hook exits 0 when the coordinator cannot be reached (the job runs, the event is
    # spooled). True: exit 1, so Slurm drains the node and requeues the job, PBS aborts it.
    fail_closed: bool = False
    # Events the coordinator did not get wait here until a later hook or `reconcile` delivers them.
    spool_dir: str = "/var/spool/vnode-sync/batch"
    # Slurm and pbs_mom throw a hook's output away, so each hook also appends its line here.
    log_file: str = "/var/log/vnode-sync/batch.log"
    node: str = ""                      # "" = SLURMD_NODENAME or the short host name
    placement: PlacementSettings = field(default_factory=PlacementSettings)
    security: TransportSecurity = field(default_factory=TransportSecurity)


def _placement(raw) -> PlacementSettings:
    if raw is None:
        return PlacementSettings()
    if not isinstance(raw, Mapping):
        raise ConfigError("placement must be a mapping")
    reject_unknown_keys("placement", raw, set(PlacementSettings.__dataclass_fields__))
    defaults = PlacementSettings()
    watch = typed("placement", "watch_seconds", raw.get("watch_seconds"), float, defaults.watch_seconds)
    if watch < 0:
        raise ConfigError(f"placement.watch_seconds {watch} must be 0 or more")
    return PlacementSettings(
        enabled=typed("placement", "enabled", raw.get("enabled"), bool, defaults.enabled),
        cgroup_root=typed("placement", "cgroup_root", raw.get("cgroup_root"), str, defaults.cgroup_root),
        cgroup_name=typed("placement", "cgroup_name", raw.get("cgroup_name"), str, defaults.cgroup_name),
        watch_seconds=watch)


def parse_settings(raw: Mapping, env: Mapping[str, str] | None = None) -> BatchSettings:
    reject_unknown_keys("batch config", raw, (set(BatchSettings.__dataclass_fields__) - {"security"}) | {"tls", "insecure"})
    d = BatchSettings()
    timeout = typed("batch", "timeout_seconds", raw.get("timeout_seconds"), float, d.timeout_seconds)
    if not 0 < timeout <= 120:
        raise ConfigError(f"timeout_seconds {timeout} must be in (0, 120]")
    coordinator = (env or {}).get("VNODE_COORDINATOR") or typed("batch", "coordinator", raw.get("coordinator"),
                                                                  str, d.coordinator)
    return BatchSettings(
        coordinator=coordinator, timeout_seconds=timeout,
        fail_closed=typed("batch", "fail_closed", raw.get("fail_closed"), bool, d.fail_closed),
        spool_dir=typed("batch", "spool_dir", raw.get("spool_dir"), str, d.spool_dir),
        log_file=typed("batch", "log_file", raw.get("log_file"), str, d.log_file),
        node=typed("batch", "node", raw.get("node"), str, d.node),
        placement=_placement(raw.get("placement")),
        security=parse_transport("batch config", raw.get("tls"), raw.get("insecure")))


def load_settings(path: str | None = None, env: Mapping[str, str] | None = None) -> BatchSettings:
    """Read `path` (default /etc/vnode-sync/batch.yaml if it exists; none is fine: defaults apply)."""
    env = os.environ if env is None else env
    if path is None:
        path = DEFAULT_PATH if os.path.exists(DEFAULT_PATH) else None
    return parse_settings(load_yaml_mapping(path) if path else {}, env)
