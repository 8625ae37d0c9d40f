"""The coordinator's state, assembled from its parts, and the views that read across them.

- `commands`: the audited commands (users, jobs) that change the durable store; `node_commands`
  those that add, change and remove storage nodes (node_commands.py);
- `publishing`: the generation, its snapshot, and each node's serialized desired state;
- `runtime`: what agents reported since the coordinator started (in memory);
- `ledger`: the usage reports, booked once; the work-conserving control loop reads it: `weights` for
  nodes whose edges share by weight, `allocator` (bytes/s) for nodes that can only cap.
"""

import itertools
import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from vnode_sync.coordinator.allocation import Allocator
from vnode_sync.coordinator.commands import Commands
from vnode_sync.coordinator.config import CoordinatorConfig, StorageNodeConfig
from vnode_sync.coordinator.node_commands import StorageNodeCommands, stored_nodes
from vnode_sync.coordinator.node_runtime import NodeRuntimes
from vnode_sync.coordinator.pressure import NodeShareView
from vnode_sync.coordinator.publishing import Publishing
from vnode_sync.coordinator.store import Store, UserRecord
from vnode_sync.coordinator.usage_ledger import UsageLedger

if TYPE_CHECKING:   # numpy is imported only by a work-conserving coordinator
    from vnode_sync.coordinator.weight_control import PairStatus

log = logging.getLogger(__name__)


class AllocationSequence:
    """One numbering for every node's weights and allocations: a stream sends when it moved."""

    def __init__(self):
        self._count = itertools.count(1)
        self._lock = threading.Lock()

    def next(self) -> int:
        with self._lock:
            return next(self._count)


class Cluster:
    def __init__(self, config: CoordinatorConfig, store: Store):
        # The store's storage nodes win over the file's, which seed it once (node_commands.py).
        config = config.model_copy(update={"storage_nodes": stored_nodes(store, config)})
        self.config = config
        self.store = store
        self._nodes_listeners: list[Callable[[list[str], set[str]], None]] = []
        self.ledger = UsageLedger()   # every usage report, booked once: rates, held, demand, held time
        # The work-conserving policy's in-memory weights and allocations (None: Algorithm 1 only, as the paper).
        self.weights = self.allocator = None
        if config.policy.allocation == "work-conserving":
            # numpy comes with the weight step: a coordinator without work conservation never loads it.
            from vnode_sync.coordinator.weight_control import WeightControl
            sequence = AllocationSequence()
            self.weights = WeightControl(config, self.ledger, sequence.next)
            threading.Thread(target=_compile_weight_step, name="weight-step-compile", daemon=True).start()
            self.allocator = Allocator(config, sequence.next, self.weights.manages)
        self.publishing = Publishing(config, store, self.allocator, self.weights)
        self.runtime = NodeRuntimes(self.publishing, self.allocator, self.ledger, self.weights)
        self.commands = Commands(config, store, self.publishing)
        self.node_commands = StorageNodeCommands(self)

    def set_storage_nodes(self, nodes: Sequence[StorageNodeConfig]) -> None:
        """Every part that reads the storage nodes takes `nodes` (on the store thread, before the
        change's generation is published). The weights and allocations take new capacities of the
        same nodes and devices only (node_commands.py refuses other changes under them)."""
        config = self.config.model_copy(update={"storage_nodes": tuple(nodes)})
        before = [n.node_id for n in self.config.storage_nodes]
        node_ids = [n.node_id for n in nodes]
        if self.weights is not None:
            self.weights.set_capacities(config)
        if self.allocator is not None:
            self.allocator.set_capacities(config)
        self.publishing.set_nodes(config)
        self.runtime.set_nodes(node_ids)
        self.config = self.commands.config = config
        if node_ids != before:
            for listener in self._nodes_listeners:
                listener(node_ids, set(before) - set(node_ids))

    def on_nodes_changed(self, listener: Callable[[list[str], set[str]], None]) -> None:
        """`listener(every node id, the removed ones)` when storage nodes are added or removed (the
        server ends removed nodes' streams and tells its fan-out processes), from the store thread."""
        self._nodes_listeners.append(listener)

    def control_tick(self, users: list[UserRecord]) -> set[str]:
        """One work-conserving step over every node (off the event loop): the nodes whose weights or
        allocation changed."""
        changed = self.weights.tick(users)
        self.weights.unreachable(self.runtime.unreachable(changed))   # no report will come from them
        return changed | self.allocator.tick(users)

    def awaiting_reports(self) -> bool:
        """Whether the last tick's weights have yet to be measured by some node they were sent to."""
        return self.weights is not None and self.weights.awaiting_reports()

    def allocation_updates(self) -> dict[str, int]:
        """Weights or allocations pushed to each node since the coordinator started."""
        out = dict(self.allocator.updates) if self.allocator else {}
        for node_id, count in (self.weights.updates if self.weights else {}).items():
            out[node_id] = out.get(node_id, 0) + count
        return out

    def generation(self) -> int:
        return self.publishing.generation()

    def users(self) -> list[UserRecord]:
        """Every user, read from the store (a blocking read: off the event loop)."""
        return self.store.users()

    def allocation_status(self, node_id: str) -> "dict[str, PairStatus]":
        """user -> what the work-conserving loop gives it on the node and what it is estimated to want."""
        if self.weights is not None and self.weights.manages(node_id):
            return self.weights.given(node_id)
        return self.allocator.status(node_id) if self.allocator else {}

    def share_views(self) -> list[NodeShareView]:
        """Per node: measured rates, and what each user may use there now (allocation or target)."""
        views = []
        for node in self.config.storage_nodes:
            allowed = dict(self.publishing.targets(node.node_id))
            if self.allocator is not None:
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
