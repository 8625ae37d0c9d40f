"""The storage-node commands: add, change and remove a storage node while the coordinator serves.

The store holds every node as the admin declared it (one JSON document each). The config file's
`storage_nodes` seed it once, on the first start that finds none there; from then on the store wins
and the file's list is read no more (a start whose file differs says so in the log): a change made
at runtime must survive a restart, and two sources of truth that both win sometimes would lose one.

Each command validates the node by the config file's rules, changes the store in one transaction with
a new generation (a kill leaves the old node list or the new), hands the new list to every part that
reads it (`Cluster.set_storage_nodes`: under the work-conserving policy the weight step's arrays are laid
out again between two ticks), publishes the generation (each node's agent gets its new desired state;
the work-conserving loop ticks at once) and writes one audit line. Every change is in force at once.
"""

import json
import logging
from collections.abc import Sequence
from typing import Protocol

from vnode_sync import validation
from vnode_sync.config_loading import parse
from vnode_sync.coordinator.config import CoordinatorConfig, StorageNodeConfig
from vnode_sync.coordinator.control.publishing import Publishing
from vnode_sync.coordinator.policy.admission import check_admission
from vnode_sync.coordinator.state.store import Store
from vnode_sync.errors import InvalidArgument, InvalidSetting, NotFound
from vnode_sync.security.audit import AUDIT_LOGGER

log = logging.getLogger(__name__)
audit = logging.getLogger(AUDIT_LOGGER)


def _endpoint_text(endpoint: tuple[str, int | None]) -> str:
    address, port = endpoint
    if port is None:
        return address
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def spec_of(node: StorageNodeConfig) -> str:
    """The node as the store keeps it: canonical JSON, the config file's keys (parsed back by `node_of`)."""
    raw = node.model_dump(mode="json")
    raw["endpoints"] = [_endpoint_text(e) for e in node.endpoints]
    return json.dumps(raw, sort_keys=True)


def _audited(node: StorageNodeConfig | None) -> str:
    """The node in an audit line: JSON without spaces (the line is key=value pairs split on spaces)."""
    return json.dumps(json.loads(spec_of(node)), sort_keys=True, separators=(",", ":")) if node else "none"


def node_of(raw: dict, source: str) -> StorageNodeConfig:
    """A node by the config file's rules; a bad value is refused in one line naming it."""
    try:
        return parse(raw, StorageNodeConfig, source)
    except InvalidSetting as e:
        raise InvalidArgument(f"{source}: {e.key}: got {e.given}; allowed: {e.allowed}") from None


def stored_nodes(store: Store, config: CoordinatorConfig) -> tuple[StorageNodeConfig, ...]:
    """The store's storage nodes, seeded from the config file on the first start that finds none."""
    specs = store.storage_nodes()
    if specs is None:
        store.seed_storage_nodes({n.node_id: spec_of(n) for n in config.storage_nodes})
        log.info("storage nodes seeded from the config file (%d); from now on the store's list wins "
                 "(vnodectl nodes add|set|remove)", len(config.storage_nodes))
        return tuple(config.storage_nodes)
    nodes = tuple(node_of(json.loads(spec), f"stored storage node {node_id!r}") for node_id, spec in specs.items())
    if {n.node_id: spec_of(n) for n in config.storage_nodes} != specs:
        log.warning("the config file's storage_nodes differ from the store's (%d nodes); the store's are used: "
                    "they were seeded from the file once and changed with vnodectl since (docs/using.md)", len(nodes))
    return nodes


def _device(device) -> dict:
    """A wire Device as a config file's device entry (iops only when given)."""
    raw = {"name": device.name, "read_bps": device.read_bps, "write_bps": device.write_bps}
    raw.update({k: getattr(device, k) for k in ("read_iops", "write_iops") if getattr(device, k)})
    return raw


class NodeHolder(Protocol):
    """What the commands use of the cluster (cluster.py), which sits above them and builds them."""

    config: CoordinatorConfig
    store: Store
    publishing: Publishing

    def set_storage_nodes(self, nodes: Sequence[StorageNodeConfig]) -> None: ...


class StorageNodeCommands:
    def __init__(self, cluster: NodeHolder):
        self.cluster = cluster

    @property
    def nodes(self) -> tuple[StorageNodeConfig, ...]:
        return tuple(self.cluster.config.storage_nodes)

    def node(self, node_id: str) -> StorageNodeConfig:
        validation.node_id(node_id)
        node = self.cluster.config.node(node_id)
        if node is None:
            raise NotFound(f"unknown storage node {node_id!r}")
        return node

    def add(self, node_id: str, devices, endpoints: Sequence[str], actor: str) -> StorageNodeConfig:
        """Returns the node as stored and in force; as `set`, and `remove` the node removed."""
        validation.node_id(node_id)
        node = node_of({"id": node_id, "devices": [_device(d) for d in devices], "endpoints": list(endpoints)},
                       f"storage node {node_id!r}")
        return self._change(node_id, node, create=True, actor=actor)

    def set(self, node_id: str, devices, remove_devices: Sequence[str], endpoints: Sequence[str] | None,
            actor: str) -> StorageNodeConfig:
        """`devices` set the capacities of those they name (a new name adds one), `remove_devices` drop
        devices; `endpoints` (None: unchanged) replace the node's."""
        old = self.node(node_id)
        unknown = sorted(set(remove_devices) - {d.name for d in old.devices})
        if unknown:
            raise NotFound(f"storage node {node_id!r} has no device {unknown[0]!r} "
                           f"(it has: {', '.join(d.name for d in old.devices)})")
        raw = spec_of(old)
        merged = json.loads(raw)
        by_name = {d["name"]: d for d in merged["devices"] if d["name"] not in remove_devices}
        for device in devices:   # iops the request leaves at 0 stay as they were
            by_name[device.name] = {**by_name.get(device.name, {}), **_device(device)}
        merged["devices"] = list(by_name.values())
        if endpoints is not None:
            merged["endpoints"] = list(endpoints)
        node = node_of(merged, f"storage node {node_id!r}")
        return self._change(node_id, node, create=False, actor=actor, old=old)

    def remove(self, node_id: str, actor: str) -> StorageNodeConfig:
        old = self.node(node_id)
        nodes = tuple(n for n in self.nodes if n.node_id != node_id)
        generation, _ = self.cluster.store.remove_storage_node(node_id)
        self._take(nodes, generation)
        audit.info("actor=%s action=remove-storage-node node=%s old=%s generation=%d",
                   actor, node_id, _audited(old), generation)
        return old

    def _change(self, node_id: str, node: StorageNodeConfig, create: bool, actor: str,
                old: StorageNodeConfig | None = None) -> StorageNodeConfig:
        if create and self.cluster.config.node(node_id) is not None:
            raise InvalidArgument(f"storage node {node_id!r} exists already; use `vnodectl nodes set` to change it")
        nodes = (*self.nodes, node) if create else tuple(node if n.node_id == node_id else n for n in self.nodes)
        self._admit(nodes)
        generation, _ = self.cluster.store.put_storage_node(node_id, spec_of(node), create)
        self._take(nodes, generation)
        audit.info("actor=%s action=%s node=%s old=%s new=%s generation=%d", actor,
                   "add-storage-node" if create else "set-storage-node", node_id,
                   _audited(old), _audited(node), generation)
        return node

    def _admit(self, nodes: Sequence[StorageNodeConfig]) -> None:
        """Lower capacities must still hold every admitted reservation (as set-reservation checks)."""
        reservations = {u.name: u.effective_reservation for u in self.cluster.store.users() if u.effective_reservation}
        if not reservations:
            return
        for direction in ("read_bps", "write_bps"):
            check_admission({f"{n.node_id}:{d.name}": getattr(d, direction) for n in nodes for d in n.devices},
                            reservations)

    def _take(self, nodes: Sequence[StorageNodeConfig], generation: int) -> None:
        self.cluster.set_storage_nodes(nodes)
        self.cluster.publishing.published(generation)
