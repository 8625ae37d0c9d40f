"""The work-conserving control loop for nodes whose edges share by weight (docs/fair-shares.md).

Each tick: every active user's priority (global weight), reservation and limit, and its demand on
every (node, device, direction) of those nodes as the usage ledger has it from the agents' demand
summaries, go to the global weight step (policy.local_weights, on arrays, warm-started from the
last tick's weights); a node is sent its new local weights only when, for the demands known, some
user's rate there would move beyond the hysteresis (policy.hysteresis). The edges lend and reclaim
at every packet by themselves; this loop only moves weight to where each user's demand is, so that
users' cluster-wide totals approach the weighted max-min. Nodes whose backend can only cap keep the
rate allocator (allocation.py).

Weights are in memory, like allocations: no store transaction, no generation; a node's serialized
Allocation is appended to its desired state and only changed nodes' streams send.
"""

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from vnode_sync.coordinator.config import CoordinatorConfig
from vnode_sync.coordinator.policy.hysteresis import nodes_to_send, rates_moved
from vnode_sync.coordinator.policy.local_weights import WeightStep, local_weights
from vnode_sync.coordinator.store import UserRecord
from vnode_sync.coordinator.usage_ledger import Flow, UsageLedger
from vnode_sync.wire import vnode_pb2 as pb

DIRECTIONS = ("read", "write")
# The wire fields the edge's weights travel in (issue 30's DeviceShare.read_weight/write_weight).
WIRE_HAS_WEIGHTS = "read_weight" in pb.DeviceShare.DESCRIPTOR.fields_by_name


@dataclass(frozen=True)
class Resource:
    node_id: str
    device: str
    direction: int       # 0 read, 1 write


class WeightControl:
    def __init__(self, config: CoordinatorConfig, ledger: UsageLedger, next_sequence: Callable[[], int]):
        self.policy = config.policy
        self.config = config
        self.ledger = ledger
        self._next_sequence = next_sequence
        self._lock = threading.Lock()
        self._weight_nodes: set[str] = set()
        self._users: list[str] = []
        self._resources: list[Resource] = []
        self._weights: np.ndarray | None = None      # the last step's, users x resources
        self._sent: np.ndarray | None = None         # what each node has now (NaN: never sent)
        self._node_bytes: dict[str, tuple[int, bytes]] = {}
        self.last_step: WeightStep | None = None
        self.updates: dict[str, int] = {}
        # Every configured (node, device, direction) is a column of the demand book, every user that
        # ever reported a row; the ledger's listener writes what each report changed.
        self._columns = {(n.node_id, d.name, k): j for j, (n, d, k) in enumerate(
            (n, d, k) for n in config.storage_nodes for d in n.devices for k in (0, 1))}
        self._node_columns = {n.node_id: np.array([self._columns[(n.node_id, d.name, k)] for d in n.devices
                                                   for k in (0, 1)]) for n in config.storage_nodes}
        self._rows: dict[str, int] = {}
        self._demand = np.zeros((0, len(self._columns)), dtype=np.float32)
        self._held = np.zeros((0, len(self._columns)), dtype=bool)
        ledger.on_flows(self._book)

    def _book(self, node_id: str, full: bool, changed: dict[tuple[str, str], Flow], gone: list[str]) -> None:
        columns = self._node_columns.get(node_id)
        if columns is None:
            return
        with self._lock:
            if full:
                self._demand[:, columns] = 0.0
                self._held[:, columns] = False
            for user in gone:
                if user in self._rows:
                    self._demand[self._rows[user], columns] = 0.0
                    self._held[self._rows[user], columns] = False
            for (user, device), flow in changed.items():
                if not user:
                    continue
                row = self._row(user)
                for direction, (want, held) in enumerate(((flow.read_demand_bps, flow.read_held),
                                                          (flow.write_demand_bps, flow.write_held))):
                    j = self._columns.get((node_id, device, direction))
                    if j is not None:
                        self._demand[row, j], self._held[row, j] = want, held

    def _row(self, user: str) -> int:
        row = self._rows.get(user)
        if row is None:
            row = self._rows[user] = len(self._rows)
            if row >= self._demand.shape[0]:
                grown = max(16, 2 * self._demand.shape[0])
                self._demand = np.vstack([self._demand, np.zeros((grown - self._demand.shape[0],
                                                                  self._demand.shape[1]), dtype=np.float32)])
                self._held = np.vstack([self._held, np.zeros((grown - self._held.shape[0], self._held.shape[1]),
                                                             dtype=bool)])
        return row

    def shares_by_weight(self, node_id: str, yes: bool) -> None:
        """A node registered: does its backend share by weight (this loop) or only cap (the allocator)?"""
        with self._lock:
            if yes and WIRE_HAS_WEIGHTS:
                self._weight_nodes.add(node_id)
            else:
                self._weight_nodes.discard(node_id)
                self._node_bytes.pop(node_id, None)

    def manages(self, node_id: str) -> bool:
        with self._lock:
            return node_id in self._weight_nodes

    # ---- the tick ----------------------------------------------------------------

    def tick(self, users: Sequence[UserRecord]) -> set[str]:
        """One control step; the nodes whose weights changed (their streams must send)."""
        with self._lock:
            nodes = [n for n in self.config.storage_nodes if n.node_id in self._weight_nodes]
        active = [u for u in users if u.active]
        if not nodes or not active:
            return set()
        names = [u.name for u in active]
        resources = [Resource(n.node_id, d.name, k) for n in nodes for d in n.devices for k in (0, 1)]
        capacity = np.array([float(getattr(d, f"{direction}_bps")) for n in nodes for d in n.devices
                             for direction in DIRECTIONS])
        demand, held = self._booked(names, resources)
        weight = np.array([float(u.effective_priority) for u in active])
        reservation = np.array([float(u.effective_reservation) for u in active])
        limit = np.array([float(u.effective_limit) if u.effective_limit else math.inf for u in active])
        previous = self._aligned(self._weights, names, resources, weight)
        step = local_weights(capacity, weight, demand, reservation, limit, previous=previous, held=held)
        sent = self._aligned(self._sent, names, resources, None)
        never = np.isnan(sent)
        realised = step.realised(np.where(never, step.weight, sent))
        realised[never] = np.nan
        node_index = {n.node_id: i for i, n in enumerate(nodes)}
        node_of = np.array([node_index[r.node_id] for r in resources])
        changed_nodes = nodes_to_send(rates_moved(realised, step.allocation, self.policy.hysteresis), node_of,
                                      len(nodes))
        on_changed = np.isin(node_of, changed_nodes)
        sent[:, on_changed] = step.weight[:, on_changed]
        changed = {nodes[i].node_id for i in changed_nodes}
        messages = {node_id: self._message(node_id, names, resources, sent) for node_id in changed}
        with self._lock:
            self._users, self._resources, self._weights, self._sent = names, resources, step.weight, sent
            self.last_step = step
            for node_id, message in messages.items():
                self._node_bytes[node_id] = message
                self.updates[node_id] = self.updates.get(node_id, 0) + 1
        return changed

    def _booked(self, names: list[str], resources: list[Resource]) -> tuple[np.ndarray, np.ndarray]:
        """The booked demand and held flags of these users on these resources (numpy gathers)."""
        columns = np.array([self._columns[(r.node_id, r.device, r.direction)] for r in resources])
        with self._lock:
            rows = np.array([self._rows.get(name, -1) for name in names])
            known = rows >= 0
            demand = np.zeros((len(names), len(resources)), dtype=np.float64)
            held = np.zeros(demand.shape, dtype=bool)
            if known.any():
                demand[known] = self._demand[np.ix_(rows[known], columns)]
                held[known] = self._held[np.ix_(rows[known], columns)]
        return demand, held

    def _aligned(self, matrix: np.ndarray | None, names: list[str], resources: list[Resource],
                 fill: np.ndarray | None) -> np.ndarray | None:
        """The last tick's matrix for these users and resources: rows and columns it had are kept, new
        ones are `fill` (a value per user) or NaN (None: no matrix without a previous one)."""
        shape = (len(names), len(resources))
        if matrix is None:
            return None if fill is not None else np.full(shape, np.nan)
        rows = {name: i for i, name in enumerate(self._users)}
        columns = {r: j for j, r in enumerate(self._resources)}
        out = np.full(shape, np.nan) if fill is None else np.repeat(fill[:, None], shape[1], axis=1)
        new_rows = [i for i, name in enumerate(names) if name in rows]
        new_columns = [j for j, r in enumerate(resources) if r in columns]
        if new_rows and new_columns:
            old_rows = [rows[names[i]] for i in new_rows]
            old_columns = [columns[resources[j]] for j in new_columns]
            out[np.ix_(new_rows, new_columns)] = matrix[np.ix_(old_rows, old_columns)]
        return out

    def _message(self, node_id: str, names: list[str], resources: list[Resource],
                 sent: np.ndarray) -> tuple[int, bytes]:
        columns = [(j, r) for j, r in enumerate(resources) if r.node_id == node_id]
        per_user = []
        for i, name in enumerate(names):
            shares: dict[str, dict[str, float]] = {}
            for j, r in columns:
                shares.setdefault(r.device, {})[f"{DIRECTIONS[r.direction]}_weight"] = float(sent[i, j])
            per_user.append(pb.UserAllocation(user=name, shares=[pb.DeviceShare(device=device, **fields)
                                                                 for device, fields in sorted(shares.items())]))
        sequence = self._next_sequence()
        allocation = pb.Allocation(sequence=sequence, fallback_seconds=self.policy.fallback_seconds, users=per_user)
        return sequence, pb.DesiredState(allocation=allocation).SerializeToString()

    # ---- output --------------------------------------------------------------------

    def node_allocation(self, node_id: str) -> tuple[int, bytes]:
        """(sequence, serialized DesiredState holding only the weights); (0, b"") before the first."""
        with self._lock:
            return self._node_bytes.get(node_id, (0, b""))

    def given(self, node_id: str) -> dict[str, tuple[float, float, float, float]]:
        """user -> (read, write bytes/s the step expects the node's edge to give it, read, write demand),
        summed over the node's devices."""
        with self._lock:
            step, names, resources = self.last_step, self._users, self._resources
        if step is None:
            return {}
        columns = [j for j, r in enumerate(resources) if r.node_id == node_id]
        out = {}
        for i, name in enumerate(names):
            given, wanted = [0.0, 0.0], [0.0, 0.0]
            for j in columns:
                given[resources[j].direction] += float(step.allocation[i, j])
                wanted[resources[j].direction] += float(step.ceiling[i, j])
            if any(given) or any(wanted):
                out[name] = (*given, *wanted)
        return out
