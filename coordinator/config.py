"""The coordinator's configuration: where it listens, where state lives, policy, seed users and nodes.

Users listed here are created on first start; later changes made with vnodectl are kept
in the state database and win over this file. Storage nodes and their capacities are
read from this file on every start: capacity is a property of hardware, set by the admin.
Read by the one typed loader (vnode_sync.config_loading); each class below is one section.
"""

from typing import Annotated, Literal

import annotated_types as at
from pydantic import Field, model_validator

from vnode_sync import validation
from vnode_sync.config_loading import (ListOf, LogFormat, NodeId, Priority, Refused, Settings, Uid, Unit, UserName,
                                       checked_by, load, parse)
from vnode_sync.metrics.settings import MetricsSettings, refuse_unasked_plaintext
from vnode_sync.security.tls import SecuredSettings

MODES = ("throttle", "weight")
ALLOCATIONS = ("static", "work-conserving")

Bandwidth = Annotated[int, at.Gt(0), at.Le(validation.RATE_MAX_BPS), Unit("bytes/s")]
Iops = Annotated[int, at.Ge(0), at.Le(10**9), Unit("I/Os per second, 0: not split")]
Endpoint = checked_by(validation.endpoint, "an IP address with a port (10.0.0.5:9866, [fd00::5]:9866), or an "
                                           "address alone for every port")


class DeviceCapacity(Settings):
    """One device of a storage node and what it can serve: BW of Algorithm 1."""

    name: Annotated[str, at.MinLen(1)]
    """Device path on the storage node, e.g. /dev/sdb."""
    read_bps: Bandwidth
    """Read bandwidth, bytes/s: what all users' read shares on this device add up to."""
    write_bps: Bandwidth
    """Write bandwidth, bytes/s."""
    read_iops: Iops = 0
    """Read I/Os per second to split too; 0 (the default) splits bandwidth only, as the paper does."""
    write_iops: Iops = 0
    """Write I/Os per second to split; 0: not split."""


class StorageNodeConfig(Settings):
    """A storage node (DataNode, OSS) and its devices."""

    id: NodeId
    """The node's id, as its agent's `node_id` says."""
    devices: Annotated[ListOf[DeviceCapacity], at.MinLen(1)]
    """Its data devices; at least one, each listed once."""
    endpoints: ListOf[Endpoint] = ()
    """Where clients reach this node's file system service, as compute nodes see it: "address:port",
    "[IPv6]:port" or an address alone (every port); kept as (address, port or None). A reported
    connection goes only to the nodes whose endpoints match its storage end; a node with none
    listed gets every connection (it cannot be told apart)."""

    @model_validator(mode="after")
    def _each_device_once(self):
        names = [d.name for d in self.devices]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise Refused(f"devices[{i}].name", name, "a device not listed before on this node")
        return self

    @property
    def node_id(self) -> str:
        return self.id


class SeedUser(Settings):
    """A user created on the first start (later, vnodectl's changes win)."""

    name: UserName
    """POSIX user name; it ends up in cgroup paths, hence the strict pattern."""
    uid: Uid
    """The user's uid on storage nodes: how handler threads are told apart."""
    priority: Priority = 10
    """1..100, 100 highest; 10 leaves room both ways."""
    active: bool = False
    """Whether the user has a share from the start; batch hooks switch it later."""


class Policy(Settings):
    """How shares are computed: the `policy:` section."""

    mode: Literal[MODES] = "throttle"
    """throttle: bytes/s caps (the paper's Algorithm 1); weight: proportional BFQ weights."""
    default_vnode_fraction: Annotated[float, at.Gt(0), at.Le(1)] = 0.1
    """Share of each device's BW that the default VNode (unidentified handler threads,
    inactive users) may use. Above 0 so that nothing is unthrottled by accident."""
    default_priority: Priority = 10
    """Priority a user gets when a batch job creates it and nothing else says."""
    account_priorities: dict[str, Priority] = Field(default_factory=dict)
    """Batch account -> priority for users its jobs create."""
    queue_priorities: dict[str, Priority] = Field(default_factory=dict)
    """Batch queue (partition) -> priority for users its jobs create."""
    job_priority_min: Priority = 1
    """Lowest priority a job may ask for itself; requests below are raised to it."""
    job_priority_max: Priority = 50
    """Highest priority a job may ask for itself: half the range, so admins keep the top."""
    job_expiry_seconds: Annotated[float, at.Gt(0), Unit("seconds")] = 86400.0
    """A job not confirmed (started again or listed as running) for this long is dropped, so a
    lost epilogue cannot keep a user active forever. A day: longer than a cron reconcile gap."""
    allocation: Literal[ALLOCATIONS] = "static"
    """static: Algorithm 1 caps per node (the paper's). work-conserving: cluster-wide weighted
    max-min from measured demand, with reservations and limits (docs/fair-shares.md; throttle mode)."""
    control_seconds: Annotated[float, at.Ge(0.05), at.Le(3600.0), Unit("seconds")] = 1.0
    """The allocation loop's period: as often as agents report usage."""
    probe_fraction: Annotated[float, at.Ge(0.0), at.Le(0.5)] = 0.03
    """Of a node's BW every active user keeps, so that its return is seen."""
    hysteresis: Annotated[float, at.Ge(0.0), at.Le(0.5)] = 0.05
    """A new allocation is pushed only if it differs by more than this fraction (no flapping)."""
    fallback_seconds: Annotated[float, at.Ge(1.0), at.Le(86400.0), Unit("seconds")] = 30.0
    """Agents cut off from the coordinator this long go back to the static shares."""

    @model_validator(mode="after")
    def _consistent(self):
        if self.job_priority_min > self.job_priority_max:
            raise Refused("job_priority_min", self.job_priority_min,
                          f"at most job_priority_max ({self.job_priority_max})")
        if self.allocation == "work-conserving" and self.mode != "throttle":
            raise Refused("mode", self.mode, "throttle with allocation work-conserving (it sets bytes/s limits)")
        return self


class CoordinatorConfig(SecuredSettings):
    """The coordinator's file (`vnode-coordinator --config`)."""

    listen: Annotated[str, at.MinLen(1)] = "127.0.0.1:7070"
    """host:port to serve on; loopback by default, so nothing is exposed until configured."""
    state_path: Annotated[str, at.MinLen(1)] = "/var/lib/vnode-sync/coordinator.sqlite"
    """The SQLite state database (users, priorities, jobs, generation)."""
    policy: Policy = Field(default_factory=Policy)
    """How shares are computed (mode, allocation, batch defaults)."""
    users: ListOf[SeedUser] = ()
    """Users created on first start."""
    storage_nodes: ListOf[StorageNodeConfig] = ()
    """Every storage node and its devices' bandwidth."""
    log_format: LogFormat = "plain"
    """plain for people, json for a log collector."""
    audit_log: str = ""
    """Audit lines (who changed what, old and new value) also go to this file; "": the log only."""
    metrics: MetricsSettings | None = None
    """The Prometheus endpoint (docs/metrics.md); none: off."""
    fan_out_processes: Annotated[int, at.Ge(1), at.Le(64)] = 1
    """Processes that serve the agents' desired-state streams: 1, the coordinator's own event loop;
    N > 1, N child processes (one per core) on ephemeral ports of the listen host, each serving the
    streams of a share of the nodes, with the same TLS identity and access rules; agents are sent
    there when they register (docs/coordinator-scale: thousands of agents)."""

    @model_validator(mode="after")
    def _metrics_transport(self):
        refuse_unasked_plaintext(self.metrics, self.security)
        return self

    @model_validator(mode="after")
    def _each_once(self):
        _first_of_each("users", [u.name for u in self.users], "name", "a user name not listed before")
        _first_of_each("users", [u.uid for u in self.users], "uid", "a uid no user listed before has")
        _first_of_each("storage_nodes", [n.node_id for n in self.storage_nodes], "id", "a node id not listed before")
        return self

    def node(self, node_id: str) -> StorageNodeConfig | None:
        return next((n for n in self.storage_nodes if n.node_id == node_id), None)


def _first_of_each(section: str, values: list, key: str, allowed: str) -> None:
    for i, value in enumerate(values):
        if value in values[:i]:
            raise Refused(f"{section}[{i}].{key}", value, allowed)


def parse_config(raw: dict, source: str = "(coordinator config)") -> CoordinatorConfig:
    return parse(raw, CoordinatorConfig, source)


def load_config(path: str) -> CoordinatorConfig:
    return load(path, CoordinatorConfig)
