"""The audited commands on the tree of weights: add, change and remove groups, move users between them.

As commands/users.py: each runs on the store thread, validates, changes the store in one change (the
store checks the tree's rules, groups.py, inside it), publishes the new generation and writes one
audit line; a refused command raises a VNodeSyncError having changed nothing.
"""

import logging

from vnode_sync import validation
from vnode_sync.coordinator.config import WORK_CONSERVING, CoordinatorConfig
from vnode_sync.coordinator.state.groups import GroupRecord
from vnode_sync.coordinator.control.publishing import Publishing
from vnode_sync.coordinator.state.store import Store, UserRecord
from vnode_sync.errors import InvalidArgument, NotFound, Unsupported
from vnode_sync.security.audit import AUDIT_LOGGER

audit = logging.getLogger(AUDIT_LOGGER)


def _checked(record: GroupRecord) -> GroupRecord:
    validation.group_name(record.name)
    validation.group_weight(record.weight)
    if record.parent:
        validation.group_name(record.parent)
    validation.bandwidth(record.floor_bps, "group floor")
    validation.bandwidth(record.ceiling_bps, "group ceiling")
    if record.ceiling_bps and record.ceiling_bps < record.floor_bps:
        raise InvalidArgument(f"group {record.name}: ceiling {record.ceiling_bps} bytes/s is below its floor "
                              f"{record.floor_bps} bytes/s (0 = no ceiling)")
    return record


class GroupCommands:
    def __init__(self, config: CoordinatorConfig, store: Store, publishing: Publishing):
        self.config = config
        self.store = store
        self._published = publishing.published

    def _tree_applies(self) -> None:
        """Groups share by weight: the static policy (Algorithm 1) splits each device by priority alone
        and would store a tree it never applies."""
        sharing = self.config.policy.sharing
        if sharing != WORK_CONSERVING:
            raise Unsupported(f"groups apply only with policy.sharing work-conserving; this coordinator's is "
                              f"{sharing}, which would ignore them (docs/tree-of-weights.md)")

    def nss_kept(self) -> dict[str, int]:
        """The groups NSS keeps (config nss_groups): group -> its configured weight."""
        return dict(self.config.nss_groups.groups) if self.config.nss_groups else {}

    def slurm_kept(self) -> set[str]:
        """The groups Slurm keeps (config slurm_accounts): the copied accounts and every group under them."""
        if self.config.slurm_accounts is None:
            return set()
        kept = set(self.config.slurm_accounts.accounts)
        groups = self.store.groups()
        grown = True
        while grown:
            under = {g.name for g in groups if g.parent in kept} - kept
            kept |= under
            grown = bool(under)
        return kept

    def _not_managed(self, group: str, what: str) -> None:
        """One source per subtree: a group NSS or Slurm keeps is changed through them only."""
        if group in self.nss_kept():
            raise InvalidArgument(f"group {group!r} is kept by NSS (the coordinator config's nss_groups): {what} "
                                  "there, not with vnodectl")
        if group and group in self.slurm_kept():
            raise InvalidArgument(f"group {group!r} is kept by Slurm (the coordinator config's slurm_accounts): "
                                  "change its account with sacctmgr, not with vnodectl")

    def group(self, name: str) -> GroupRecord:
        found = next((g for g in self.store.groups() if g.name == name), None)
        if found is None:
            raise NotFound(f"unknown group {name!r}")
        return found

    def groups(self) -> list[GroupRecord]:
        return self.store.groups()

    def _not_under_slurm(self, parent: str) -> None:
        if parent and parent in self.slurm_kept():
            raise InvalidArgument(f"group {parent!r} is kept by Slurm (the coordinator config's slurm_accounts): "
                                  "groups under it are its sub-accounts; add one with sacctmgr, not with vnodectl")

    def add_group(self, record: GroupRecord, actor: str, by_source: bool = False) -> GroupRecord:
        """`by_source`: the group is Slurm's own account (slurm_accounts.py)."""
        _checked(record)
        self._tree_applies()
        if not by_source:
            self._not_under_slurm(record.parent)
        generation = self._published(self.store.add_group(record))
        audit.info("actor=%s action=add-group group=%s weight=%d parent=%s floor=%d ceiling=%d generation=%d",
                   actor, record.name, record.weight, record.parent or "-", record.floor_bps, record.ceiling_bps,
                   generation)
        return record

    def set_group(self, name: str, actor: str, weight: int | None = None, parent: str | None = None,
                  floor_bps: int | None = None, ceiling_bps: int | None = None, by_source: bool = False) -> GroupRecord:
        """Only the settings given change. A group NSS keeps takes its weight and place from the config
        (its floor and ceiling are vnodectl's), as does one Slurm keeps; `by_source`: the change is the
        source's own (nss_groups.py, slurm_accounts.py)."""
        validation.group_name(name)
        if not by_source and (weight is not None or parent is not None):
            self._not_managed(name, "its weight is set in nss_groups.groups and it sits under the root;")
            if parent is not None:
                self._not_under_slurm(parent)
        old = self.group(name)
        changed = {k: v for k, v in (("weight", weight), ("parent", parent), ("floor_bps", floor_bps),
                                     ("ceiling_bps", ceiling_bps)) if v is not None}
        if not changed:
            raise InvalidArgument("set-group: give at least one of --weight, --parent, --floor, --ceiling")
        record = _checked(GroupRecord(**{**old.__dict__, **changed}))
        generation, before = self.store.set_group(record)
        self._published(generation)
        audit.info("actor=%s action=set-group group=%s old=%s new=%s generation=%d", actor, name,
                   _settings(before), _settings(record), generation)
        return record

    def move_user(self, user: str, group: str, actor: str, by_source: bool = False) -> UserRecord:
        """`by_source`: the move is the source's own (nss_groups.py, slurm_accounts.py), into or out of the
        groups it keeps."""
        validation.user_name(user)
        if group:   # "": back under the root
            validation.group_name(group)
        if not by_source:
            self._not_managed(group, "its members are the Unix group's; change them")
            self._not_managed(self.store.user(user).group, "its members are the Unix group's; change them")
        generation, old = self.store.move_user(user, group)
        self._published(generation)
        audit.info("actor=%s action=move user=%s old=%s new=%s generation=%d", actor, user, old or "-",
                   group or "-", generation)
        return self.store.user(user)

    def remove_group(self, name: str, actor: str, by_source: bool = False) -> GroupRecord:
        """`by_source`: the removal is Slurm's own (slurm_accounts.py: the account is gone)."""
        validation.group_name(name)
        if not by_source:
            self._not_managed(name, "remove it from nss_groups.groups")
        generation, old = self.store.remove_group(name)
        self._published(generation)
        audit.info("actor=%s action=remove-group group=%s old=%s generation=%d", actor, name, _settings(old),
                   generation)
        return old


def _settings(record: GroupRecord) -> str:
    return (f"weight:{record.weight},parent:{record.parent or '-'},floor:{record.floor_bps},"
            f"ceiling:{record.ceiling_bps}")
