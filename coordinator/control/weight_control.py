"""The work-conserving control loop, one step for every node (docs/fair-shares.md).

Each tick: every active user's priority (global weight), reservation and limit, and its demand on
every resource of the registered nodes as the usage ledger has it from the agents' demand summaries
(the agents' one estimate, agents/storage/demand.py), go to the global weight step
(policy.local_weights, on arrays, warm-started from the last tick's weights; with groups, the tree
step, policy.tree_step, which resolves the tree into users' weights). What a node is sent
depends on its edge (`Edge`, as its agent registered):
- an edge that shares by weight (BFQ, the DataNode's scheduler) gets the step's local weights: it
  lends and reclaims at every packet by itself, and this loop only moves weight to where each user's
  demand is, so that users' cluster-wide totals approach the weighted max-min;
- a cap-only edge (blkio throttle without BFQ, io.max, Lustre TBF) gets the step's own allocation as
  caps (`caps`): what the step gives each user, plus the room the resource has left, and at least a
  probe, so a user that comes back is seen held at its cap, which starts a tick that gives it its share.
A node is sent only when, for the demands known, some user's rate there would move beyond the
hysteresis (policy.hysteresis.THRESHOLD), or a user it has moved to another priority.

A resource is one (node, device, direction) where the edge weighs each device (BFQ), and one
(node, direction) of all the node's devices' capacity where it weighs the node as a whole (the
DataNode's scheduler, which also reports its bytes for the node, device ""). Everything per pair is done
on arrays indexed by the configured columns: a tick at 10,000 nodes runs no Python loop over users x
resources, and a node's message is its slice of the weights (or caps) written as a packed ShareTable
on the resources its edge shares: its devices, or the node as a whole (device ""). Nodes and
devices added or removed at runtime (`vnodectl nodes`) lay the columns out again between two ticks
(set_nodes): what stays keeps its demand, warm start and what it was sent.

Weights and caps are in memory: no store transaction, no generation; a node's serialized
Allocation is appended to its desired state and only changed nodes' streams send.
"""

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from vnode_sync.coordinator.config import CoordinatorConfig
from vnode_sync.coordinator.control.group_tree import weight_tree
from vnode_sync.coordinator.state.groups import GroupRecord
from vnode_sync.coordinator.control.node_edge import Edge
from vnode_sync.coordinator.policy.caps import caps
from vnode_sync.coordinator.policy.hysteresis import nodes_to_send, rates_moved
from vnode_sync.coordinator.policy.local_weights import WeightStep, local_weights
from vnode_sync.coordinator.policy.tree_step import tree_weights
from vnode_sync.coordinator.serialized import field_head, packed_floats, string_entries
from vnode_sync.coordinator.state.store import UserRecord
from vnode_sync.coordinator.state.usage_ledger import Flow, UsageLedger
from vnode_sync.shares import NODE
from vnode_sync.validation import JOB_VNODE_SEPARATOR
from vnode_sync.wire import vnode_pb2 as pb

DIRECTIONS = ("read", "write")
_ALLOCATION_SHARES = pb.Allocation.DESCRIPTOR.fields_by_name["shares"].number
_DESIRED_ALLOCATION = pb.DesiredState.DESCRIPTOR.fields_by_name["allocation"].number
# The weight step's iterations stop after this share of the control period (CPU time of the thread
# that runs it, one of the threads working its blocks of resources; the fixed passes come on top,
# ~0.1 s at 10^7 user x resource pairs on this 2-core VM, where the step then ends in ~0.5 s): the
# weights are in force and measured (0.5 s, agents/storage/report_interval.py) by the next period,
# and the next step resumes from them. Rounds, not iterations, bound how fast the site settles
# (benchmarks/results/policy/README.md).
STEP_SHARE = 0.3
_TABLE = {name: pb.ShareTable.DESCRIPTOR.fields_by_name[name].number
          for name in ("users", "devices", "read_weights", "write_weights")}
_NODE_PART = string_entries(_TABLE["devices"], [NODE])   # the one resource of an edge that shares the node


class _Columns:
    """Every configured (node, device, direction), node by node, devices in configured order, read then
    write: the demand book's columns. Each node's columns are one contiguous block."""

    def __init__(self, config: CoordinatorConfig):
        nodes = config.storage_nodes
        self.node_ids = [n.node_id for n in nodes]
        self.node_index = {node_id: i for i, node_id in enumerate(self.node_ids)}
        self.devices = [tuple(d.name for d in n.devices) for n in nodes]
        self.start = np.cumsum([0] + [2 * len(n.devices) for n in nodes])[:-1]
        self.of = {(n.node_id, d.name, k): int(self.start[i]) + 2 * e + k
                   for i, n in enumerate(nodes) for e, d in enumerate(n.devices) for k in (0, 1)}
        self.node = np.repeat(np.arange(len(nodes)), [2 * len(n.devices) for n in nodes])
        self.direction = np.tile([0, 1], len(self.node) // 2)
        self.capacity = np.array([float(getattr(d, f"{direction}_bps")) for n in nodes for d in n.devices
                                  for direction in DIRECTIONS])
        node_capacity = np.zeros((len(nodes), 2))
        np.add.at(node_capacity, (self.node, self.direction), self.capacity)
        self.node_capacity = node_capacity
        # The devices part of each node's ShareTable, written once.
        self.devices_part = [string_entries(_TABLE["devices"], list(names)) for names in self.devices]

    def __len__(self) -> int:
        return len(self.node)

    def block(self, i: int) -> slice:
        """Node i's columns."""
        start = int(self.start[i])
        return slice(start, start + 2 * len(self.devices[i]))


@dataclass(frozen=True)
class PairStatus:
    """What the step gives one user on one node and what it is estimated to want there (summed over the
    node's devices)."""

    allocated_read_bps: int       # a cap-only node: the caps sent; else the rates the step expects
    allocated_write_bps: int
    demand_read_bps: float
    demand_write_bps: float
    weight_read_share: float = 0.0   # nodes that share by weight: the user's part of the weights sent
    weight_write_share: float = 0.0


class _Layout:
    """One tick's resources: the book columns of the nodes weighed by device, then (node, direction)
    pairs of the nodes weighed as a whole; their capacity, their node, each node's block of them, and
    a key per resource that stays the same from tick to tick (its book column, or for a whole node
    its first device's) to carry weights over."""

    def __init__(self, columns: _Columns, managed: np.ndarray, per_node: np.ndarray, caps_only: np.ndarray):
        by_device = managed & ~per_node
        self.device_columns = np.flatnonzero(by_device[columns.node])
        self.node_columns = np.flatnonzero(np.repeat(managed & per_node, 2))     # 2 * node + direction
        whole_node, direction = self.node_columns // 2, self.node_columns % 2
        self.key = np.concatenate([self.device_columns, columns.start[whole_node] + direction])
        self.node = np.concatenate([columns.node[self.device_columns], whole_node])
        self.capacity = np.concatenate([columns.capacity[self.device_columns],
                                        columns.node_capacity.ravel()[self.node_columns]])
        starts = np.flatnonzero(np.r_[True, self.node[1:] != self.node[:-1]]) if len(self.node) else self.node
        ends = np.r_[starts[1:], len(self.node)]
        self.block = {int(self.node[a]): (int(a), int(b)) for a, b in zip(starts, ends)}
        self.nodes = np.flatnonzero(managed)
        self.per_node = per_node
        self.caps_only = caps_only
        self.capped = caps_only[self.node]   # per resource: its node is sent caps, not weights

    def __len__(self) -> int:
        return len(self.key)

    @property
    def by_device(self) -> int:
        """How many of the resources, first, are devices (the rest are whole nodes' directions)."""
        return len(self.device_columns)


@dataclass(frozen=True)
class _Carried:
    """The last step's resources carried over to columns laid out again (set_nodes): only their keys,
    which the next tick aligns its warm start and what was sent by."""

    key: np.ndarray
    by_device: int

    def __len__(self) -> int:
        return len(self.key)


class WeightControl:
    def __init__(self, config: CoordinatorConfig, ledger: UsageLedger, next_sequence: Callable[[], int]):
        self.policy = config.policy
        self.config = config
        self.ledger = ledger
        self._next_sequence = next_sequence
        self._lock = threading.Lock()
        # Held for a whole tick and by set_nodes: the columns are laid out again between two ticks, never
        # during one (the step's arrays are indexed by them). `_lock` guards the book against reports.
        self._tick_lock = threading.Lock()
        self._book_columns = _Columns(config)
        self._managed = np.zeros(len(self._book_columns.node_ids), dtype=bool)    # registered
        self._per_node = np.zeros(len(self._book_columns.node_ids), dtype=bool)
        self._caps_only = np.zeros(len(self._book_columns.node_ids), dtype=bool)
        self._users: list[str] = []
        self._layout: _Layout | None = None
        self._weights: np.ndarray | None = None      # the last step's, users x the layout's resources
        self._level: np.ndarray | None = None        # the last step's level per resource
        # What each node has now, users x the layout's resources: weights, or bytes/s caps on a cap-only
        # node (NaN: never sent).
        self._sent: np.ndarray | None = None
        # users x nodes: each user's priority when the node was last sent (0: never). The step's weights
        # are the one route a priority takes to a node, and a node where no rate moves would keep the last.
        self._sent_priority: np.ndarray | None = None
        self._resend: set[int] = set()               # nodes whose last message no longer counts
        self._held_listeners: list[Callable[[], None]] = []
        self._node_bytes: dict[str, tuple[int, bytes]] = {}
        self.last_step: WeightStep | None = None
        self.updates: dict[str, int] = {}
        # Nodes sent weights by the last tick that have not yet reported rates measured under them:
        # node id -> the sequence sent (control_loop.AWAIT_PERIODS).
        self._awaited: dict[str, int] = {}
        # Every user that ever reported is a row of the demand book; the ledger's listener writes what
        # each report changed.
        self._rows: dict[str, int] = {}
        self._demand = np.zeros((0, len(self._book_columns)), dtype=np.float32)
        self._held = np.zeros((0, len(self._book_columns)), dtype=bool)
        # The same per (node, direction), summed over its devices (held: on any): what a node weighed
        # as a whole wants, kept as reports come so a tick reads it without adding up a site's disks.
        self._node_demand = np.zeros((0, 2 * len(self._book_columns.node_ids)), dtype=np.float32)
        self._node_held = np.zeros((0, 2 * len(self._book_columns.node_ids)), dtype=bool)
        ledger.on_flows(self._book)

    def _book(self, node_id: str, full: bool, changed: dict[tuple[str, str], Flow], gone: list[str]) -> None:
        columns = self._book_columns
        i = columns.node_index.get(node_id)
        if i is None:
            return
        block = columns.block(i)
        with self._lock:
            was_held = self._held[:, block].copy() if self._caps_only[i] else None
            if full:
                self._demand[:, block] = 0.0
                self._held[:, block] = False
            touched = [self._rows[user] for user in gone if user in self._rows]
            self._demand[touched, block] = 0.0
            self._held[touched, block] = False
            for (user, device), flow in changed.items():
                if not user:
                    continue
                row = self._row(user)
                touched.append(row)
                # The node as a whole (device "", an edge that shares the node) is booked at its key, its
                # first device's column: only the node's sum over its devices is read.
                device = columns.devices[i][0] if device == NODE else device
                for direction, (want, held) in enumerate(((flow.read_demand_bps, flow.read_held),
                                                          (flow.write_demand_bps, flow.write_held))):
                    j = columns.of.get((node_id, device, direction))
                    if j is not None:
                        self._demand[row, j], self._held[row, j] = want, held
            self._sum_node(i, slice(None) if full else touched)
            newly_held = was_held is not None and bool((self._held[:was_held.shape[0], block] & ~was_held).any())
        if newly_held:
            # A user held at its cap on a cap-only node (one back from idle at its probe): only a step
            # raises a cap, so it need not wait for the period.
            for listener in self._held_listeners:
                listener()

    def _sum_node(self, i: int, rows) -> None:
        """Node i's (node, direction) book for these rows, from its devices' (the lock held)."""
        block, pair = self._book_columns.block(i), slice(2 * i, 2 * i + 2)
        devices = len(self._book_columns.devices[i])
        self._node_demand[rows, pair] = self._demand[rows, block].reshape(-1, devices, 2).sum(axis=1)
        self._node_held[rows, pair] = self._held[rows, block].reshape(-1, devices, 2).any(axis=1)

    def _row(self, user: str) -> int:
        row = self._rows.get(user)
        if row is None:
            row = self._rows[user] = len(self._rows)
            if row >= self._demand.shape[0]:
                grown = max(16, 2 * self._demand.shape[0]) - self._demand.shape[0]
                self._demand, self._held, self._node_demand, self._node_held = (
                    np.vstack([book, np.zeros((grown, book.shape[1]), dtype=book.dtype)])
                    for book in (self._demand, self._held, self._node_demand, self._node_held))
        return row

    def register(self, node_id: str, edge: Edge) -> None:
        """A node's agent registered: the next step covers the node, and sends it weights or caps."""
        with self._lock:
            i = self._book_columns.node_index.get(node_id)
            if i is None:
                return   # removed meanwhile
            if self._managed[i] and bool(self._caps_only[i]) == edge.by_weight:
                self._resend.add(i)   # another backend: what it was sent is of the other kind
            self._managed[i] = True
            self._per_node[i] = edge.per_node
            self._caps_only[i] = not edge.by_weight

    def on_capped_user_held(self, listener: Callable[[], None]) -> None:
        """`listener()` when a report shows a user newly held on a cap-only node (from the thread that
        booked it, after the usage ledger's lock is released: it must only wake the control loop)."""
        self._held_listeners.append(listener)

    def measured(self, node_id: str, allocation: int) -> None:
        """A report from the node whose rates were measured wholly under allocation `allocation`."""
        with self._lock:
            if node_id in self._awaited and allocation >= self._awaited[node_id]:
                del self._awaited[node_id]

    def unreachable(self, node_ids) -> None:
        """These nodes have no live stream: they will not report under the weights sent, and the next
        step does not wait for them (it would wait AWAIT_PERIODS after every tick that sent them)."""
        with self._lock:
            for node_id in node_ids:
                self._awaited.pop(node_id, None)

    def awaiting_reports(self) -> bool:
        """Whether a node sent weights by the last tick has yet to report rates measured under them."""
        with self._lock:
            return bool(self._awaited)

    def set_nodes(self, config: CoordinatorConfig) -> None:
        """The storage nodes as changed at runtime: new capacities, nodes or devices added or removed. The
        next tick steps on them. Where the nodes and devices are the same, every column keeps its place.
        Otherwise every array indexed by column or node is laid out again: what stays keeps its demand,
        its warm start and what its node was sent; a new node or device starts with none (its node is sent
        weights at the next tick); what is gone is dropped. A node whose devices changed is sent again."""
        columns = _Columns(config)
        with self._tick_lock, self._lock:
            old = self._book_columns
            if columns.node_ids != old.node_ids or columns.devices != old.devices:
                self._lay_out(old, columns)
            self.config, self._book_columns = config, columns

    def _lay_out(self, old: _Columns, new: _Columns) -> None:
        """Every array of `old`'s columns and nodes moved to `new`'s (both locks held)."""
        column = np.array([new.of.get(key, -1) for key in sorted(old.of, key=old.of.get)], dtype=int)
        node = np.array([new.node_index.get(node_id, -1) for node_id in old.node_ids], dtype=int)
        kept_columns, kept_nodes = np.flatnonzero(column >= 0), np.flatnonzero(node >= 0)

        def moved(array: np.ndarray, index: np.ndarray, kept: np.ndarray, width: int, fill=0) -> np.ndarray:
            out = np.full((*array.shape[:-1], width), fill, dtype=array.dtype)
            out[..., index[kept]] = array[..., kept]
            return out

        self._demand = moved(self._demand, column, kept_columns, len(new))
        self._held = moved(self._held, column, kept_columns, len(new))
        pair = 2 * new.node + new.direction   # each column's (node, direction)
        self._node_demand = np.zeros((len(self._demand), 2 * len(new.node_ids)), dtype=np.float32)
        np.add.at(self._node_demand, (slice(None), pair), self._demand)
        held = np.zeros(self._node_demand.shape, dtype=np.int32)
        np.add.at(held, (slice(None), pair), self._held)
        self._node_held = held > 0
        self._managed = moved(self._managed, node, kept_nodes, len(new.node_ids), False)
        self._per_node = moved(self._per_node, node, kept_nodes, len(new.node_ids), False)
        self._caps_only = moved(self._caps_only, node, kept_nodes, len(new.node_ids), False)
        # A node whose devices changed is sent its whole table again (its message lists its devices).
        resent = [i for i in kept_nodes if old.devices[i] != new.devices[node[i]]]
        self._resend = {int(node[i]) for i in self._resend if node[i] >= 0} | {int(node[i]) for i in resent}
        if self._sent_priority is not None:
            self._sent_priority = moved(self._sent_priority, node, kept_nodes, len(new.node_ids))
            self._sent_priority[:, node[resent]] = 0
        if self._layout is not None:
            # The last step's resources by their key: a device's column, or a whole node's first one.
            by_device = self._layout.by_device
            whole = self._layout.key[by_device:]
            whole_node = node[old.node[whole]]
            key = np.concatenate([column[self._layout.key[:by_device]],
                                  np.where(whole_node >= 0, new.start[np.maximum(whole_node, 0)]
                                           + (whole - old.start[old.node[whole]]), -1)])
            kept = np.flatnonzero(key >= 0)
            self._layout = _Carried(key[kept], int(np.count_nonzero(kept < by_device)))
            self._weights, self._level = self._weights[:, kept], self._level[kept]
            self._sent = self._sent[:, kept]
            self._sent[:, np.isin(new.node[self._layout.key], node[resent])] = np.nan
        # given() and given_totals() read the last step by its layout: empty until the next tick.
        self.last_step = None
        removed = {old.node_ids[i] for i in np.flatnonzero(node < 0)}
        self._node_bytes = {k: v for k, v in self._node_bytes.items() if k not in removed}
        self.updates = {k: v for k, v in self.updates.items() if k not in removed}
        self._awaited = {k: v for k, v in self._awaited.items() if k not in removed}

    def manages(self, node_id: str) -> bool:
        i = self._book_columns.node_index.get(node_id)
        with self._lock:
            return i is not None and bool(self._managed[i])

    # ---- the tick ----------------------------------------------------------------

    def tick(self, users: Sequence[UserRecord], groups: Sequence[GroupRecord] = ()) -> set[str]:
        """One control step; the nodes whose weights or caps changed (their streams must send). With groups
        that hold active users, the tree step (policy.tree_step) gives users the weights that realise the
        tree's hierarchical sharing; the edges still see one weight or cap per user."""
        with self._tick_lock:
            return self._tick(users, groups)

    def _tick(self, users: Sequence[UserRecord], groups: Sequence[GroupRecord]) -> set[str]:
        with self._lock:
            layout = _Layout(self._book_columns, self._managed.copy(), self._per_node.copy(), self._caps_only.copy())
            resend, self._resend = self._resend, set()
        active = [u for u in users if u.active]
        if not len(layout.nodes) or not active:
            return set()
        names = [u.name for u in active]
        demand, held = self._booked(names, layout)
        weight = np.array([float(u.effective_priority) for u in active])
        reservation = np.array([float(u.effective_reservation) for u in active])
        limit = np.array([float(u.effective_limit) if u.effective_limit else math.inf for u in active])
        tree = weight_tree(active, groups) if groups or any(JOB_VNODE_SEPARATOR in n for n in names) else None
        if tree is None:   # one level: the flat step, warm-started
            previous = self._aligned(self._weights, names, layout, weight)
            step = local_weights(layout.capacity, weight, demand, reservation, limit, previous=previous, held=held,
                                 previous_level=self._aligned_level(layout),
                                 seconds=STEP_SHARE * self.policy.control_seconds)
        else:
            step = tree_weights(layout.capacity, tree.arrays(names), demand, held=held).step
        new = step.weight
        if layout.capped.any():
            new = step.weight.copy()
            new[:, layout.capped] = caps(step.allocation[:, layout.capped], layout.capacity[layout.capped], weight,
                                         limit, self.policy.probe_fraction)
        sent = self._aligned(self._sent, names, layout, None)
        never = np.isnan(sent) | np.isin(layout.node, list(resend))[None, :]
        # A weighted node is judged by the rates its weights give, a capped one by its caps.
        before = step.realised(np.where(never, step.weight, sent))
        before[:, layout.capped] = sent[:, layout.capped]
        after = step.allocation.copy()
        after[:, layout.capped] = new[:, layout.capped]
        before[never] = np.nan
        moved = rates_moved(before, after)
        # Rates are judged at the configured capacity, where users given all they want get it whatever
        # their weights; a node that delivers less (encryption, a slow disk) splits what it has by the
        # weights it holds. So a user's new priority goes to every node where it wants something, when
        # it does.
        priority = weight.astype(np.uint8)   # 1..100 (the store's check)
        sent_priority = self._priority_rows(names)
        stale = np.flatnonzero((sent_priority != priority[:, None]).any(axis=1))   # few: priorities seldom change
        if len(stale):
            behind = sent_priority[np.ix_(stale, layout.node)] != priority[stale, None]
            moved |= (behind & (step.ceiling[stale] > 0)).any(axis=0)
        changed_nodes = nodes_to_send(moved, layout.node, len(self._book_columns.node_ids))
        on_changed = np.isin(layout.node, changed_nodes)
        sent[:, on_changed] = new[:, on_changed]
        sent_priority[:, changed_nodes] = priority[:, None]
        users_part = string_entries(_TABLE["users"], names)
        messages = {self._book_columns.node_ids[i]: self._message(int(i), layout, names, users_part, sent)
                    for i in changed_nodes}
        with self._lock:
            self._users, self._layout, self._weights, self._sent = names, layout, step.weight, sent
            self._sent_priority = sent_priority
            self._level = step.level
            self.last_step = step
            for node_id, message in messages.items():
                self._node_bytes[node_id] = message
                self.updates[node_id] = self.updates.get(node_id, 0) + 1
            self._awaited = {node_id: sequence for node_id, (sequence, _) in messages.items()}
        return set(messages)

    def _priority_rows(self, names: list[str]) -> np.ndarray:
        """The priorities last sent to each node, one row per user of `names` (0: never sent)."""
        out = np.zeros((len(names), len(self._book_columns.node_ids)), dtype=np.uint8)
        if self._sent_priority is None:
            return out
        rows = {name: i for i, name in enumerate(self._users)}
        new_rows = [i for i, name in enumerate(names) if name in rows]
        out[new_rows] = self._sent_priority[[rows[names[i]] for i in new_rows]]
        return out

    def _booked(self, names: list[str], layout: _Layout) -> tuple[np.ndarray, np.ndarray]:
        """The booked demand and held flags of these users on the layout's resources (columns are
        gathered before rows: a site's book is far wider than it is tall)."""
        with self._lock:
            rows = np.array([self._rows.get(name, -1) for name in names], dtype=int)
            known = np.flatnonzero(rows >= 0)
            demand = np.zeros((len(names), len(layout)), dtype=np.float64)
            held = np.zeros(demand.shape, dtype=bool)
            by_device = len(layout.device_columns)
            if len(known):
                for out, book, node_book in ((demand, self._demand, self._node_demand),
                                             (held, self._held, self._node_held)):
                    out[known, :by_device] = book[:, layout.device_columns][rows[known]]
                    out[known, by_device:] = node_book[:, layout.node_columns][rows[known]]
        return demand, held

    def _aligned(self, matrix: np.ndarray | None, names: list[str], layout: _Layout,
                 fill: np.ndarray | None) -> np.ndarray | None:
        """The last tick's matrix for these users and resources: rows and columns it had are kept, new
        ones are `fill` (a value per user) or NaN (None: no matrix without a previous one)."""
        shape = (len(names), len(layout))
        if matrix is None or self._layout is None:
            return None if fill is not None else np.full(shape, np.nan)
        same_users = names == self._users
        if same_users and np.array_equal(layout.key, self._layout.key):
            return matrix.copy()
        old_of_new = self._old_columns(layout)
        new_columns = np.flatnonzero(old_of_new >= 0)
        out = np.full(shape, np.nan) if fill is None else np.repeat(fill[:, None], shape[1], axis=1)
        if same_users:
            out[:, new_columns] = matrix[:, old_of_new[new_columns]]
            return out
        rows = {name: i for i, name in enumerate(self._users)}
        new_rows = [i for i, name in enumerate(names) if name in rows]
        if new_rows and len(new_columns):
            old_rows = [rows[names[i]] for i in new_rows]
            out[np.ix_(new_rows, new_columns)] = matrix[np.ix_(old_rows, old_of_new[new_columns])]
        return out

    def _aligned_level(self, layout: _Layout) -> np.ndarray | None:
        """The last tick's level of each of these resources (NaN where it had none: a cold start there)."""
        if self._level is None or self._layout is None:
            return None
        old_of_new = self._old_columns(layout)
        return np.where(old_of_new >= 0, self._level[np.maximum(old_of_new, 0)], np.nan)

    def _old_columns(self, layout: _Layout) -> np.ndarray:
        """Per resource of `layout`, its column in the last tick's layout (-1: it had none)."""
        old_column = np.full(len(self._book_columns), -1)
        old_column[self._layout.key] = np.arange(len(self._layout))
        return old_column[layout.key]

    def _message(self, node: int, layout: _Layout, names: list[str], users_part: bytes,
                 sent: np.ndarray) -> tuple[int, bytes]:
        """The node's part of the step, a ShareTable of weights or ceilings on the resources its edge
        shares (its devices, or the node), as a serialized DesiredState holding only its Allocation."""
        first, last = layout.block[node]
        block = sent[:, first:last].reshape(len(sent), -1, 2)   # users x resources x (read, write)
        devices_part = _NODE_PART if layout.per_node[node] else self._book_columns.devices_part[node]
        if layout.caps_only[node]:
            capped = np.maximum(1, np.nan_to_num(block, nan=1.0)).astype(np.uint64)   # 0 on the wire is "none"
            table = [users_part, devices_part,
                     pb.ShareTable(read_ceilings_bps=capped[:, :, 0].ravel().tolist(),
                                   write_ceilings_bps=capped[:, :, 1].ravel().tolist()).SerializeToString()]
        else:
            table = [users_part, devices_part, *packed_floats(_TABLE["read_weights"], block[:, :, 0]),
                     *packed_floats(_TABLE["write_weights"], block[:, :, 1])]
        sequence = self._next_sequence()
        table_length = sum(map(len, table))
        head = (pb.Allocation(sequence=sequence, fallback_seconds=self.policy.fallback_seconds).SerializeToString()
                + field_head(_ALLOCATION_SHARES, table_length))
        # Joined once: a site's message is ~100 kB, and every concatenation would copy it again.
        return sequence, b"".join([field_head(_DESIRED_ALLOCATION, len(head) + table_length), head, *table])

    # ---- output --------------------------------------------------------------------

    def node_allocation(self, node_id: str) -> tuple[int, bytes]:
        """(sequence, serialized DesiredState holding only its Allocation); (0, b"") before the first."""
        with self._lock:
            return self._node_bytes.get(node_id, (0, b""))

    def given(self, node_id: str) -> dict[str, PairStatus]:
        """user -> what the last step gives it on the node and what it wants there; on a node that
        shares by weight, also its part of the weights the node was last sent among the users listed,
        averaged over its devices (what each gets while all of them are backlogged)."""
        with self._lock:
            step, names, layout, sent = self.last_step, self._users, self._layout, self._sent
        node = self._book_columns.node_index.get(node_id)
        if step is None or node not in layout.block:
            return {}
        first, last = layout.block[node]
        in_force = np.nan_to_num(sent[:, first:last]) if layout.caps_only[node] else step.allocation[:, first:last]
        given = in_force.reshape(len(names), -1, 2).sum(axis=1)
        wanted = step.ceiling[:, first:last].reshape(len(names), -1, 2).sum(axis=1)
        listed = np.flatnonzero((given != 0).any(axis=1) | (wanted != 0).any(axis=1))
        share = np.zeros((len(listed), 2))
        if not layout.caps_only[node]:
            weights = np.nan_to_num(sent[listed, first:last].reshape(len(listed), (last - first) // 2, 2))  # NaN: never
            total = weights.sum(axis=0)
            share = np.divide(weights, total, out=np.zeros_like(weights), where=total > 0).mean(axis=1)
        return {names[i]: PairStatus(int(given[i, 0]), int(given[i, 1]), float(wanted[i, 0]), float(wanted[i, 1]),
                                     float(share[k, 0]), float(share[k, 1]))
                for k, i in enumerate(listed)}

    def given_totals(self) -> dict[str, tuple[float, float]]:
        """user -> (read, write) bytes/s the last step gives it over every node it weighs: the user's
        cluster-wide share as the center computed it."""
        with self._lock:
            step, names, layout = self.last_step, self._users, self._layout
        if step is None:
            return {}
        direction = self._book_columns.direction[layout.key]   # a whole node's key is its first device's + direction
        read = step.allocation[:, direction == 0].sum(axis=1, dtype=np.float64)
        write = step.allocation[:, direction == 1].sum(axis=1, dtype=np.float64)
        return {name: (float(r), float(w)) for name, r, w in zip(names, read, write)}
