"""The coordinator's state, assembled from its parts, and the views that read across them.

- `commands`: the audited commands (users, jobs) that change the durable store; `node_commands`
  those that add, change and remove storage nodes (commands/nodes.py); `group_commands` those on the
  tree of weights (commands/groups.py);
- `publishing`: the generation, its snapshot, and each node's serialized desired state;
- `runtime`: what agents reported since the coordinator started (in memory);
- `ledger`: the usage reports, booked once; the work-conserving control loop (`weights`) reads it and
  sends every node the step's weights, or caps where its edge can only cap.
"""

import itertools
import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from vnode_sync.coordinator.commands.users import Commands
from vnode_sync.coordinator.config import WORK_CONSERVING, CoordinatorConfig, StorageNodeConfig
from vnode_sync.coordinator.commands.groups import GroupCommands
from vnode_sync.coordinator.state.groups import GroupRecord
from vnode_sync.coordinator.commands.nodes import StorageNodeCommands, stored_nodes
from vnode_sync.coordinator.control.node_runtime import NodeRuntimes
from vnode_sync.coordinator.state.pressure import NodeShareView
from vnode_sync.coordinator.control.publishing import Publishing
from vnode_sync.coordinator.state.store import Store, UserRecord
from vnode_sync.coordinator.state.usage_ledger import UsageLedger

if TYPE_CHECKING:   # numpy is imported only by a work-conserving coordinator
    from vnode_sync.coordinator.control.weight_control import PairStatus, WeightControl

log = logging.getLogger(__name__)


class Cluster:
    def __init__(self, config: CoordinatorConfig, store: Store):
        # The store's storage nodes win over the file's, which seed it once (commands/nodes.py).
        config = config.model_copy(update={"storage_nodes": stored_nodes(store, config)})
        self.config = config
        self.store = store
        self._nodes_listeners: list[Callable[[list[str], set[str]], None]] = []
        self.ledger = UsageLedger()   # every usage report, booked once: rates, held, demand, held time
        # The work-conserving step's in-memory weights and caps (None: static shares, Algorithm 1 as the paper).
        self.weights: "WeightControl | None" = None
        if config.policy.sharing == WORK_CONSERVING:
            # numpy comes with the weight step: a coordinator with static shares never loads it.
            from vnode_sync.coordinator.control.weight_control import WeightControl
            self.weights = WeightControl(config, self.ledger, itertools.count(1).__next__)
            threading.Thread(target=_compile_weight_step, name="weight-step-compile", daemon=True).start()
        self.publishing = Publishing(config, store, self.weights)
        self.runtime = NodeRuntimes(self.publishing, self.ledger, self.weights)
        self.commands = Commands(config, store, self.publishing)
        self.node_commands = StorageNodeCommands(self)
        self.group_commands = GroupCommands(config, store, self.publishing)

    def set_storage_nodes(self, nodes: Sequence[StorageNodeConfig]) -> None:
        """Every part that reads the storage nodes takes `nodes` (on the store thread, before the
        change's generation is published), the work-conserving weights and allocations too."""
        config = self.config.model_copy(update={"storage_nodes": tuple(nodes)})
        before = [n.node_id for n in self.config.storage_nodes]
        node_ids = [n.node_id for n in nodes]
        if self.weights is not None:
            self.weights.set_nodes(config)
        self.publishing.set_nodes(config)
        self.runtime.set_nodes(node_ids)
        self.config = self.commands.config = self.group_commands.config = config
        if node_ids != before:
            for listener in self._nodes_listeners:
                listener(node_ids, set(before) - set(node_ids))

    def on_nodes_changed(self, listener: Callable[[list[str], set[str]], None]) -> None:
        """`listener(every node id, the removed ones)` when storage nodes are added or removed (the
        server ends removed nodes' streams and tells its fan-out processes), from the store thread."""
        self._nodes_listeners.append(listener)

    def control_tick(self, users: Sequence[UserRecord], groups: Sequence[GroupRecord] = ()) -> set[str]:
        """One work-conserving step over every node (off the event loop): the nodes whose weights or
        caps changed. Every node shares by the tree of `groups` (none: users by their priorities)."""
        changed = self.weights.tick(users, groups)
        self.weights.unreachable(self.runtime.unreachable(changed))   # no report will come from them
        return changed

    def awaiting_reports(self) -> bool:
        """Whether the last tick's weights have yet to be measured by some node they were sent to."""
        return self.weights is not None and self.weights.awaiting_reports()

    def allocation_updates(self) -> dict[str, int]:
        """Weights or caps pushed to each node since the coordinator started."""
        return dict(self.weights.updates) if self.weights is not None else {}

    def generation(self) -> int:
        return self.publishing.generation()

    def users(self) -> list[UserRecord]:
        """Every user, read from the store (a blocking read: off the event loop)."""
        return self.store.users()

    def allocation_status(self, node_id: str) -> "dict[str, PairStatus]":
        """user -> what the work-conserving loop gives it on the node and what it is estimated to want."""
        return self.weights.given(node_id) if self.weights is not None else {}

    def share_views(self) -> list[NodeShareView]:
        """Per node: measured rates, and what each user may use there now (allocation or target)."""
        views = []
        for node in self.config.storage_nodes:
            allowed = dict(self.publishing.targets(node.node_id))
            if self.weights is not None:
                allowed.update({user: (given.allocated_read_bps, given.allocated_write_bps)
                                for user, given in self.allocation_status(node.node_id).items()})
            rates = {user: (r.read_bps, r.write_bps) for user, r in self.runtime.measured_rates(node.node_id).items()}
            views.append(NodeShareView(node.node_id, rates, allowed))
        return views


def _compile_weight_step() -> None:
    """At start, off every loop: the first tick would otherwise compile the step's passes itself."""
    from vnode_sync.coordinator.policy.local_weights import compile_passes
    try:
        compile_passes()
    except Exception as e:   # the first tick compiles them then, or fails there with its own error
        log.warning("compiling the weight step's passes at start failed: %s", e)
