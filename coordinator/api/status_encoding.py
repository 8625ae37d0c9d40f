"""The Status answer on the wire: users x nodes entries (10,000 x 100 is a million) written as
serialized pieces built once per node and per (user, target), joined, instead of a million
message objects; or one summary per user."""

import collections
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from vnode_sync.coordinator.state.groups import GroupRecord, group_members, roll_up
from vnode_sync.coordinator.control.node_runtime import NodeRuntime, UserNodeRate
from vnode_sync.coordinator.api.rpc import EncodeLater
from vnode_sync.coordinator.serialized import field_entry
from vnode_sync.coordinator.state.store import UserRecord
from vnode_sync.wire import vnode_pb2 as pb

if TYPE_CHECKING:   # numpy is imported only by a work-conserving coordinator
    from vnode_sync.coordinator.control.weight_control import PairStatus

_USER_STATUS_NODES = pb.UserStatus.DESCRIPTOR.fields_by_name["nodes"].number
_STATUS_USERS = pb.StatusResponse.DESCRIPTOR.fields_by_name["users"].number


def user_message(record: UserRecord, jobs: Sequence[pb.JobVNode] = ()) -> pb.User:
    return pb.User(name=record.name, uid=record.uid, priority=record.effective_priority,
                   active=record.active, running_jobs=record.running_jobs,
                   reservation_bps=record.effective_reservation, limit_bps=record.effective_limit,
                   group=record.group, jobs=jobs)


def group_message(record: GroupRecord, users: Sequence[UserRecord]) -> pb.Group:
    """The group and the users right in it."""
    return pb.Group(name=record.name, weight=record.weight, parent=record.parent, floor_bps=record.floor_bps,
                    ceiling_bps=record.ceiling_bps, users=[u.name for u in users if u.group == record.name])


def group_statuses(groups: Sequence[GroupRecord], users: Sequence[UserRecord],
                   measured: dict[str, tuple[float, float]], given: dict[str, tuple[float, float]]) -> list[pb.GroupStatus]:
    """Per group, its subtree's users: how many are active, their measured and given rates summed."""
    members = group_members(users, groups)
    active = {u.name for u in users if u.active}
    rates, shares = roll_up(members, measured), roll_up(members, given)
    return [pb.GroupStatus(group=group_message(g, users), active_users=sum(n in active for n in members[g.name]),
                           measured_read_bps=rates[g.name][0], measured_write_bps=rates[g.name][1],
                           given_read_bps=shares[g.name][0], given_write_bps=shares[g.name][1]) for g in groups]


@dataclass(frozen=True)
class NodeView:
    """What Status shows of one node, read once per call."""

    node_id: str
    runtime: NodeRuntime
    targets: dict[str, tuple[int, int]]   # user -> (read, write) bytes/s of Algorithm 1; one object per set of devices
    rates: dict[str, UserNodeRate]        # measured (only users with a rate)
    allocations: "dict[str, PairStatus]"  # the work-conserving loop's (empty under Algorithm 1)


def entries(users: list[UserRecord], views: list[NodeView],
            jobs: Mapping[str, Sequence[pb.JobVNode]] = {}) -> list[bytes]:
    """Every (user, node) entry."""
    target_part: dict[tuple[int, int], bytes] = {}
    bases = [pb.UserNodeStatus(node_id=v.node_id, applied_generation=v.runtime.applied_generation).SerializeToString()
             for v in views]
    out = []
    for record in users:
        name, pieces = record.name, []
        for base, view in zip(bases, views):
            target = view.targets.get(name, (0, 0))
            part = target_part.get(target)
            if part is None:
                part = target_part[target] = pb.UserNodeStatus(target_read_bps=target[0],
                                                               target_write_bps=target[1]).SerializeToString()
            piece = base + part
            rate, held = view.rates.get(name), name in view.runtime.held_at_limit
            if rate or held:
                # A serialized message followed by another is their merge: these fields are added.
                piece += pb.UserNodeStatus(measured_read_bps=rate.read_bps if rate else 0.0,
                                           measured_write_bps=rate.write_bps if rate else 0.0,
                                           held_at_limit=held).SerializeToString()
            given = view.allocations.get(name)
            if given:
                piece += pb.UserNodeStatus(allocated_read_bps=given.allocated_read_bps,
                                           allocated_write_bps=given.allocated_write_bps,
                                           demand_read_bps=given.demand_read_bps,
                                           demand_write_bps=given.demand_write_bps,
                                           weight_read_share=given.weight_read_share,
                                           weight_write_share=given.weight_write_share).SerializeToString()
            pieces.append(field_entry(_USER_STATUS_NODES, piece))
        user_status = pb.UserStatus(user=user_message(record, jobs.get(name, ()))).SerializeToString() + b"".join(pieces)
        out.append(field_entry(_STATUS_USERS, user_status))
    return out


def summaries(users: list[UserRecord], views: list[NodeView],
              jobs: Mapping[str, Sequence[pb.JobVNode]] = {}) -> list[bytes]:
    """One summary per user, from the nodes' distinct target sets and their (sparse) measurements:
    O(users x sets of devices), not O(users x nodes)."""
    target_sets = list({id(v.targets): v.targets for v in views}.values())
    measured: dict[str, list[float]] = {}
    held: collections.Counter = collections.Counter()
    for view in views:
        for name, rate in view.rates.items():
            total = measured.setdefault(name, [0.0, 0.0])
            total[0] += rate.read_bps
            total[1] += rate.write_bps
        held.update(view.runtime.held_at_limit)
    applied = min((v.runtime.applied_generation for v in views), default=0)
    out = []
    for record in users:
        name = record.name
        targets = [t.get(name, (0, 0)) for t in target_sets] or [(0, 0)]
        reads, writes = [t[0] for t in targets], [t[1] for t in targets]
        read, write = measured.get(name, (0.0, 0.0))
        summary = pb.UserSummary(nodes=len(views), target_read_bps_min=min(reads), target_read_bps_max=max(reads),
                                 target_write_bps_min=min(writes), target_write_bps_max=max(writes),
                                 measured_read_bps=read, measured_write_bps=write, applied_generation_min=applied,
                                 nodes_held_at_limit=held[name])
        out.append(field_entry(_STATUS_USERS, pb.UserStatus(user=user_message(record, jobs.get(name, ())),
                                                           summary=summary).SerializeToString()))
    return out


@dataclass(frozen=True)
class StatusAnswer(EncodeLater):
    """A Status answer as read on the store thread: `head` (generation, mode, nodes), the users and
    node views; encoded later, off the store thread."""

    head: pb.StatusResponse
    users: list[UserRecord]
    views: list[NodeView]
    summarise: bool
    jobs: Mapping[str, Sequence[pb.JobVNode]] = field(default_factory=dict)   # user -> its running jobs

    def encode(self) -> bytes:
        parts = summaries(self.users, self.views, self.jobs) if self.summarise else \
            entries(self.users, self.views, self.jobs)
        return self.head.SerializeToString() + b"".join(parts)
