"""The coordinator's state, assembled from its parts, and the views that read across them.

- `commands`: the audited commands (users, jobs) that change the durable store;
- `publishing`: the generation, its snapshot, and each node's serialized desired state;
- `runtime`: what agents reported since the coordinator started (in memory);
- `allocator` (work-conserving policy only) and `pressure`: what the usage reports feed.
"""

from vnode_sync.coordinator.allocation import Allocator
from vnode_sync.coordinator.commands import Commands
from vnode_sync.coordinator.config import CoordinatorConfig
from vnode_sync.coordinator.node_runtime import NodeRuntimes
from vnode_sync.coordinator.pressure import NodeShareView, PressureBook
from vnode_sync.coordinator.publishing import Publishing
from vnode_sync.coordinator.store import StateStore, UserRecord


class Cluster:
    def __init__(self, config: CoordinatorConfig, store: StateStore):
        self.config = config
        self.store = store
        # The work-conserving policy's in-memory allocations (None: Algorithm 1 only, as the paper).
        self.allocator = Allocator(config) if config.policy.allocation == "work-conserving" else None
        self.pressure = PressureBook()   # held time per (node, user), for the Pressure RPC and metrics
        self.publishing = Publishing(config, store, self.allocator)
        self.runtime = NodeRuntimes(self.publishing, self.allocator, self.pressure)
        self.commands = Commands(config, store, self.publishing)

    def generation(self) -> int:
        return self.publishing.generation()

    def users(self) -> list[UserRecord]:
        """Every user, read from the store (a blocking read: off the event loop)."""
        return self.store.users()

    def share_views(self) -> list[NodeShareView]:
        """Per node: measured rates, and what each user may use there now (allocation or target)."""
        views = []
        for node in self.config.storage_nodes:
            allowed = dict(self.publishing.targets(node.node_id))
            if self.allocator is not None:
                allowed.update({user: (given.allocated_read_bps, given.allocated_write_bps)
                                for user, given in self.allocator.status(node.node_id).items()})
            rates = {user: (r.read_bps, r.write_bps) for user, r in self.runtime.measured_rates(node.node_id).items()}
            views.append(NodeShareView(node.node_id, rates, allowed))
        return views
