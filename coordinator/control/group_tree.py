"""The store's groups and users as the policy's tree of weights, and per-user figures summed up it.

Only active users are leaves, and only groups with an active user under them are nodes: an idle
subtree takes nothing, and a tree whose groups hold no active user is today's flat claims (None).
A user's weight is its effective priority; a group's, its own; siblings compare whatever they are
(a user under the root beside groups shares with them by priority against their weights).

Jobs as VNodes (job_vnodes.py): a row named `user.job` is a leaf under its user, which becomes an
inner node of its effective priority, floor and ceiling; its own job-less work is a leaf beside its
jobs, at the admin's priority and limit.
"""

import math
from collections.abc import Mapping, Sequence

from vnode_sync.coordinator.state.groups import GroupRecord
from vnode_sync.coordinator.policy.weight_tree import Group, User, WeightTree
from vnode_sync.coordinator.state.store import UserRecord
from vnode_sync.validation import JOB_VNODE_SEPARATOR


def _user_node(record: UserRecord) -> User:
    limit = record.effective_limit
    return User(record.name, float(record.effective_priority), float(record.effective_reservation),
                float(limit) if limit else math.inf)


def _with_jobs(record: UserRecord, jobs: Sequence[UserRecord]) -> User | Group:
    if not jobs:
        return _user_node(record)
    own = User(record.name, float(record.priority), 0.0, float(record.limit_bps) if record.limit_bps else math.inf)
    outer = _user_node(record)
    # Named apart from every group and user: no group or user name has a space.
    return Group(f"user {record.name}", outer.weight, (own, *(_user_node(j) for j in jobs)), outer.floor,
                 outer.ceiling)


def weight_tree(users: Sequence[UserRecord], groups: Sequence[GroupRecord]) -> WeightTree | None:
    """The tree of the active users of `users` (in any order) and their jobs' rows; None when no group
    holds one of them and no job has a row. A user whose group is unknown (removed meanwhile: the
    store refuses that) sits under the root."""
    by_name = {g.name: g for g in groups}
    jobs: dict[str, list[UserRecord]] = {}
    for record in users:
        if JOB_VNODE_SEPARATOR in record.name:
            jobs.setdefault(record.name.split(JOB_VNODE_SEPARATOR, 1)[0], []).append(record)
    children: dict[str, list] = {}
    for record in users:
        if record.active and JOB_VNODE_SEPARATOR not in record.name:
            group = record.group if record.group in by_name else ""
            children.setdefault(group, []).append(_with_jobs(record, jobs.get(record.name, [])))
    if set(children) <= {""} and not jobs:
        return None
    for group in sorted(by_name):   # every group's child groups, listed once
        children.setdefault(group, [])

    def node(group: GroupRecord) -> Group | None:
        kids = [k for k in (node(by_name[c]) for c in sorted(_child_groups(by_name, group.name))) if k is not None]
        kids += children[group.name]
        if not kids:
            return None
        return Group(group.name, float(group.weight), tuple(kids), float(group.floor_bps),
                     float(group.ceiling_bps) if group.ceiling_bps else math.inf)

    top = [k for k in (node(by_name[c]) for c in sorted(_child_groups(by_name, ""))) if k is not None]
    return WeightTree(tuple(top + children.get("", [])))


def _child_groups(groups: Mapping[str, GroupRecord], parent: str) -> list[str]:
    return [g.name for g in groups.values() if g.parent == parent]
