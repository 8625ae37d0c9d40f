"""The coordinator's configuration: where it listens, where state lives, policy, seed users and nodes.

Users listed here are created on first start; later changes made with vnodectl are kept
in the state database and win over this file. Storage nodes likewise: this file's seed the store
once; `vnodectl nodes add|set|remove` changes them at runtime and the store's win afterwards
(coordinator/commands/nodes.py).
Read by the one typed loader (vnode_sync.config_loading); each class below is one section.
"""

import re
from typing import Annotated, Literal

import annotated_types as at
from pydantic import Field, model_validator

from vnode_sync import validation
from vnode_sync.config_loading import (MEASURED, Group, ListOf, LogFormat, NodeId, Priority, Refused, Settings, Uid, Unit,
                                       UserName, checked_by, load, parse)
from vnode_sync.metrics.settings import MetricsSettings, refuse_unasked_plaintext
from vnode_sync.security.tls import SecuredSettings, TlsFiles

STATIC, WORK_CONSERVING = "static", "work-conserving"
SHARINGS = (STATIC, WORK_CONSERVING)
# The two keys `sharing` replaced: named in the one line that refuses them.
_REPLACED = ("allocation", "mode")

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

    sharing: Literal[SHARINGS] = STATIC
    """static: each device's bandwidth split into caps by priority (the paper's Algorithm 1); bandwidth an
    idle user leaves is not lent. work-conserving: every node shares by local weight at every request
    where its backend can (BFQ, the DataNode's scheduler), within reservations and limits, and the
    coordinator's weight step moves each user's weight to where its demand is, so that users'
    cluster-wide totals approach the weighted max-min; nodes that can only cap (blkio throttle without
    BFQ, io.max, Lustre TBF) are sent the step's rates as caps (docs/fair-shares.md)."""
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
    control_seconds: Annotated[float, at.Ge(0.05), at.Le(3600.0), Unit("seconds")] = 1.0
    """Work-conserving: the weight step's period: as often as agents report usage."""
    probe_fraction: Annotated[float, at.Ge(0.0), at.Le(0.5)] = 0.03
    """Work-conserving, nodes that can only cap: the part of a device's BW every active user's cap keeps
    at least (never above its priority's part), so that its return is seen (coordinator/policy/caps.py)."""
    fallback_seconds: Annotated[float, at.Ge(1.0), at.Le(86400.0), Unit("seconds")] = 30.0
    """Agents cut off from the coordinator this long go back to the static shares."""

    @model_validator(mode="before")
    @classmethod
    def _sharing_replaced(cls, raw):
        replaced = [key for key in _REPLACED if isinstance(raw, dict) and key in raw]
        if replaced:
            raise Refused(replaced[0], raw[replaced[0]], f"no longer a key: policy.sharing replaces allocation and "
                                                         f"mode (sharing: {' or '.join(SHARINGS)})")
        return raw

    @model_validator(mode="after")
    def _consistent(self):
        if self.job_priority_min > self.job_priority_max:
            raise Refused("job_priority_min", self.job_priority_min,
                          f"at most job_priority_max ({self.job_priority_max})")
        return self


GroupName = checked_by(validation.group_name, "1-32 characters from a-z, 0-9, '_', '-', starting with a letter or '_'")
GroupWeight = Annotated[int, at.Ge(validation.GROUP_WEIGHT_MIN), at.Le(validation.GROUP_WEIGHT_MAX)]


class NssGroupsSettings(Settings):
    """The `nss_groups:` section: groups of the tree of weights whose members are the site's Unix
    groups' as NSS has them (`getent group`: files, LDAP, SSSD), refreshed on a period
    (coordinator/commands/nss_groups.py). These groups are NSS's: vnodectl does not move users in or out of them."""

    groups: dict[GroupName, GroupWeight]
    """Unix group -> its weight under the root (the tree's group has the Unix group's name)."""
    refresh_seconds: Annotated[float, at.Ge(1.0), at.Le(86400.0), Unit("seconds")] = 300.0
    """How often NSS is asked again: a membership change reaches the shares within this."""
    prefer: dict[UserName, GroupName] = Field(default_factory=dict)
    """User -> the one of these groups it sits in when NSS lists it in several (else it is refused in
    one logged line and stays where it was)."""

    @model_validator(mode="after")
    def _preferred_are_listed(self):
        for user, group in self.prefer.items():
            if group not in self.groups:
                raise Refused(f"prefer.{user}", group, f"one of the groups listed ({', '.join(self.groups)})")
        return self


class SlurmAccountsSettings(Settings):
    """The `slurm_accounts:` section: groups of the tree of weights copied from Slurm's accounts
    (`sacctmgr show associations`: the fair-share tree the site already keeps), refreshed on a period
    (coordinator/commands/slurm_accounts.py). These groups are Slurm's: vnodectl does not change their weight or
    place, nor move users in or out of them."""

    accounts: Annotated[ListOf[GroupName], at.MinLen(1)]
    """The Slurm accounts copied with their subtrees, each a group under the tree's root; every group's
    weight is its account's Slurm fair-share (Share)."""
    cluster: Annotated[str, at.MaxLen(64)] = ""
    """The Slurm cluster whose associations are read ("": sacctmgr's default, the one local slurm.conf names)."""
    refresh_seconds: Annotated[float, at.Ge(1.0), at.Le(86400.0), Unit("seconds")] = 300.0
    """How often sacctmgr is asked again: an account change reaches the shares within this."""
    prefer: dict[UserName, GroupName] = Field(default_factory=dict)
    """User -> the one of the copied accounts it sits in when Slurm has it in several (else it is
    refused in one logged line and stays where it was)."""

    @model_validator(mode="after")
    def _cluster_name(self):
        if self.cluster and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", self.cluster):
            raise Refused("cluster", self.cluster, "a Slurm cluster name: letters, digits, '_', '.', '-'")
        return self


class ZooKeeperSettings(Settings):
    """The `zookeeper:` section: state in an existing ZooKeeper ensemble, and several coordinators of
    which one leads (docs/ha.md). Without it, state is the SQLite file and one coordinator serves."""

    hosts: Annotated[str, at.MinLen(1), at.MaxLen(4096)]
    """The ensemble's client addresses, comma-separated: zk1:2181,zk2:2181,zk3:2181."""
    root: Annotated[str, at.MinLen(2), at.MaxLen(256)] = "/vnode-sync"
    """The znode everything lives under (state, the leader election); one per vnode-sync site."""
    advertise: Annotated[str, at.MinLen(1), at.MaxLen(256)]
    """host:port at which agents, vnodectl and batch hooks reach this coordinator: standbys name
    the leader by it."""
    session_timeout_seconds: Annotated[float, at.Ge(2.0), at.Le(60.0), Unit("seconds")] = 10.0
    """A leader cut off from ZooKeeper stops publishing at once and gives up leading after this long;
    a standby takes over once ZooKeeper has expired the session (this long too)."""
    learn_seconds: Annotated[float, at.Ge(0.0), at.Le(60.0), Unit("seconds"), MEASURED] = 3.0
    """Under work-conserving sharing, a new leader learns the demand from the agents' usage reports
    this long before it sends any node its state (as Doorman's new master learns for a lease before
    it grants): each node then gets one state with an allocation, not the static shares first and
    an allocation later. Agents keep their last allocation meanwhile (below policy.fallback_seconds)."""
    tls: TlsFiles | None = None
    """TLS to ZooKeeper (its secureClientPort): the CA the servers chain to, and this client's
    certificate and key (servers that require client certificates check them)."""
    digest_user: Annotated[str, at.MaxLen(64)] = ""
    """With digest_password_file: the coordinators authenticate as this digest user, and every
    znode they create carries an ACL that lets this user alone read or change it."""
    digest_password_file: str = ""
    """File holding the digest user's password (one line; mode 0600, readable by the coordinator)."""
    sasl_user: Annotated[str, at.MaxLen(64)] = ""
    """Instead of a digest identity: authenticate by SASL DIGEST-MD5 as this user (an ensemble that
    requires SASL); every znode the coordinators create is readable and writable by sasl:<user> alone."""
    sasl_password_file: str = ""
    """File holding the SASL user's password (one line; mode 0600)."""

    @model_validator(mode="after")
    def _root_and_credentials(self):
        if not self.root.startswith("/") or self.root.endswith("/") or "//" in self.root:
            raise Refused("root", self.root, "an absolute znode path without a trailing '/', e.g. /vnode-sync")
        if bool(self.digest_user) != bool(self.digest_password_file):
            raise Refused("digest_user", self.digest_user, "set together with digest_password_file")
        if ":" in self.digest_user:
            raise Refused("digest_user", self.digest_user, "a name without ':'")
        if bool(self.sasl_user) != bool(self.sasl_password_file):
            raise Refused("sasl_user", self.sasl_user, "set together with sasl_password_file")
        if self.sasl_user and self.digest_user:
            raise Refused("sasl_user", self.sasl_user, "unset when digest_user is set (one identity)")
        return self


SERVING, LOGS = Group("Serving"), Group("Logs")


class CoordinatorConfig(SecuredSettings):
    """The coordinator's file (`vnode-coordinator --config`)."""

    listen: Annotated[str, at.MinLen(1), SERVING] = "127.0.0.1:7070"
    """host:port to serve on; loopback by default, so nothing is exposed until configured."""
    state_path: Annotated[str, at.MinLen(1), Group("State")] = "/var/lib/vnode-sync/coordinator.sqlite"
    """The SQLite state database (users, priorities, jobs, generation)."""
    policy: Policy = Field(default_factory=Policy)
    """How shares are computed (sharing, batch defaults)."""
    users: ListOf[SeedUser] = ()
    """Users created on first start."""
    storage_nodes: ListOf[StorageNodeConfig] = ()
    """Every storage node and its devices' bandwidth, copied into the store on the first start that finds
    none there; afterwards the store's list wins (changed with `vnodectl nodes`, docs/using.md)."""
    log_format: Annotated[LogFormat, LOGS] = "plain"
    """plain for people, json for a log collector."""
    audit_log: Annotated[str, LOGS] = ""
    """Audit lines (who changed what, old and new value) also go to this file; "": the log only."""
    metrics: MetricsSettings | None = None
    """The Prometheus endpoint (docs/metrics.md); none: off."""
    zookeeper: ZooKeeperSettings | None = None
    """State in ZooKeeper and one leader among several coordinators (docs/ha.md); none: state_path
    (SQLite), one coordinator."""
    nss_groups: NssGroupsSettings | None = None
    """Groups whose members come from the site's Unix groups (docs/tree-of-weights.md); none: groups are
    vnodectl's alone."""
    slurm_accounts: SlurmAccountsSettings | None = None
    """Groups copied from Slurm's accounts (docs/tree-of-weights.md); none: not from Slurm."""
    fan_out_processes: Annotated[int, at.Ge(1), at.Le(64), SERVING] = 1
    """Processes that serve the agents' desired-state and usage-report streams: 1, the coordinator's
    own event loop; N > 1, N child processes (one per core) on ephemeral ports of the listen host,
    each serving the streams of a share of the nodes, with the same TLS identity and access rules;
    agents are sent there when they register (benchmarks/results/coordinator-scale.md). With
    `zookeeper`, a leader's pause and learning reach the processes' streams too (docs/ha.md)."""

    @model_validator(mode="after")
    def _metrics_transport(self):
        refuse_unasked_plaintext(self.metrics, self.security)
        return self

    @model_validator(mode="after")
    def _one_source_per_group(self):
        if self.nss_groups is not None and self.slurm_accounts is not None:
            both = sorted(set(self.nss_groups.groups) & set(self.slurm_accounts.accounts))
            if both:
                raise Refused("slurm_accounts.accounts", both[0], "a group nss_groups does not keep already "
                              "(one source per group)")
        for name, section in (("nss_groups", self.nss_groups), ("slurm_accounts", self.slurm_accounts)):
            if section is not None and self.policy.sharing != WORK_CONSERVING:
                # Groups are refused under static sharing: every refresh would fail, and the coordinator with it.
                raise Refused(name, "(set)", f"only with policy.sharing {WORK_CONSERVING}, which shares by the "
                              "tree's weights")
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
