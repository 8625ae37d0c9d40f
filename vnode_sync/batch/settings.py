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
from typing import Annotated

import annotated_types as at
from pydantic import Field

from vnode_sync.config_loading import Settings, Unit, load, parse
from vnode_sync.security.tls import SecuredSettings

DEFAULT_PATH = "/etc/vnode-sync/batch.yaml"
DEFAULT_COORDINATOR = "127.0.0.1:7070"


class PlacementSettings(Settings):
    """Putting a job's processes into its user's VNode on the compute node (blkio v1)."""

    enabled: bool = False
    """Off: on most sites the compute nodes' own disks are not what is shared."""
    cgroup_root: Annotated[str, at.MinLen(1)] = "/sys/fs/cgroup"
    """Where the cgroup hierarchies are mounted."""
    cgroup_name: Annotated[str, at.MinLen(1)] = "vnode-sync-compute"
    """The subtree the compute side owns under blkio."""
    watch_seconds: Annotated[float, at.Ge(0), at.Le(3600), Unit("seconds")] = 30.0
    """The prolog runs before the job's processes exist; a detached watcher places them as they
    appear for this long, then exits. Later children inherit the cgroup."""


class BatchSettings(SecuredSettings):
    """The batch hooks' file; the certificate names this host as compute:<node>."""

    coordinator: Annotated[str, at.MinLen(1)] = DEFAULT_COORDINATOR
    """host:port of the coordinator (several, comma-separated: the leader is followed); $VNODE_COORDINATOR wins."""
    timeout_seconds: Annotated[float, at.Gt(0), at.Le(120), Unit("seconds")] = 5.0
    """Bound on one hook's whole run. Slurm drains the node when its prolog fails or passes
    PrologEpilogTimeout, pbs_mom kills it after $prologalarm (300 s): stay far below."""
    fail_closed: bool = False
    """False: a hook exits 0 when the coordinator cannot be reached (the job runs, the event is
    spooled). True: exit 1, so Slurm drains the node and requeues the job, PBS aborts it."""
    spool_dir: Annotated[str, at.MinLen(1)] = "/var/spool/vnode-sync/batch"
    """Events the coordinator did not get wait here until a later hook or `reconcile` delivers them."""
    log_file: str = "/var/log/vnode-sync/batch.log"
    """Slurm and pbs_mom throw a hook's output away, so each hook also appends its line here."""
    node: str = ""
    """This compute node's name; "": SLURMD_NODENAME or the short host name."""
    placement: PlacementSettings = Field(default_factory=PlacementSettings)
    """Placing jobs' processes on this compute node; off by default."""


def parse_settings(raw: Mapping, env: Mapping[str, str] | None = None,
                   source: str = "(batch config)") -> BatchSettings:
    return _with_environment(parse(raw, BatchSettings, source), env)


def load_settings(path: str | None = None, env: Mapping[str, str] | None = None) -> BatchSettings:
    """Read `path` (default /etc/vnode-sync/batch.yaml if it exists; none is fine: defaults apply)."""
    env = os.environ if env is None else env
    if path is None:
        path = DEFAULT_PATH if os.path.exists(DEFAULT_PATH) else None
    return _with_environment(load(path, BatchSettings) if path else BatchSettings(), env)


def _with_environment(settings: BatchSettings, env: Mapping[str, str] | None) -> BatchSettings:
    address = (env or {}).get("VNODE_COORDINATOR")
    return settings.model_copy(update={"coordinator": address}) if address else settings
