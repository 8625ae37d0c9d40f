"""Groups of the tree of weights from Slurm's accounts (`sacctmgr show associations`: the fair-share
tree the site already keeps), refreshed on a period (the coordinator config's `slurm_accounts:` section).

A pass reads the associations off the store thread (`read_associations`: one `sacctmgr --parsable2
--noheader show associations` with the fields Cluster, Account, User, ParentName and Share, names
and the cluster validated, argv only, never a shell), then `SlurmAccounts.apply` makes the tree
agree on the store thread: each configured account and every account under it is a group, the
configured ones under the tree's root and the others under their Slurm parent, each weighted by its
Slurm fair-share; every store user sits in the copied account Slurm associates it with, or under the
root if none. A user Slurm associates with two of them is refused in one logged line and left where
it is, unless `prefer` names one. An account gone from Slurm is removed once empty (a configured one
stays, emptied, and is named in a logged line each pass). Only the store's
users are moved. One source per subtree: vnodectl cannot change these groups' weight or place, add
groups under them, or move users in or out of them (commands/groups.py).

Slurm's Share is an integer from 0 up, or `parent` (the association's usage counts as its
parent's); the tree's weights are 1..10,000 and only ratios among siblings matter: 0 and `parent`
become 1 and shares above 10,000 become 10,000, each in one logged line.
"""

import logging
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field

from vnode_sync import validation
from vnode_sync.coordinator.config import SlurmAccountsSettings
from vnode_sync.coordinator.commands.groups import GroupCommands
from vnode_sync.coordinator.state.groups import MAX_DEPTH, GroupRecord
from vnode_sync.coordinator.commands.nss_groups import placement
from vnode_sync.errors import InvalidArgument, NotFound, Unavailable, VNodeSyncError

log = logging.getLogger(__name__)

SACCTMGR = "sacctmgr"
# A slurmdbd that does not answer by then fails the pass (retried with backoff by its supervisor).
SACCTMGR_TIMEOUT_SECONDS = 60.0
FIELDS = ("cluster", "account", "user", "parentname", "share")
ACTOR = "slurm"


@dataclass
class Associations:
    """What sacctmgr lists, as the tree needs it."""

    parent: dict[str, str] = field(default_factory=dict)      # account -> its parent account ("" for Slurm's root)
    share: dict[str, str] = field(default_factory=dict)       # account -> its Share as sacctmgr prints it
    accounts_of: dict[str, set[str]] = field(default_factory=dict)   # user -> the accounts it is associated with


def parse_associations(text: str) -> Associations:
    """Parse `sacctmgr --parsable2 --noheader show associations format=Cluster,Account,User,ParentName,Share`.
    An account's association has no user; a user's (one per partition, if any) names its account. A line
    without 5 fields, or one cluster's lines mixed with another's, is refused in one line."""
    out, clusters = Associations(), set()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) != len(FIELDS):
            raise Unavailable(f"sacctmgr line {number}: {len(parts)} fields, not the {len(FIELDS)} asked for "
                              f"({'|'.join(FIELDS)}); accounts from Slurm not refreshed")
        cluster, account, user, parent, share = (p.strip() for p in parts)
        clusters.add(cluster)
        if user:
            out.accounts_of.setdefault(user, set()).add(account)
        else:
            out.parent[account], out.share[account] = parent, share
    if len(clusters) > 1:
        raise Unavailable(f"sacctmgr listed clusters {', '.join(sorted(clusters))}: name one in "
                          "slurm_accounts.cluster; accounts from Slurm not refreshed")
    return out


def read_associations(cluster: str = "", sacctmgr: str = SACCTMGR) -> Associations:
    argv = [sacctmgr, "--parsable2", "--noheader", "show", "associations", f"format={','.join(FIELDS)}"]
    if cluster:
        argv.append(f"cluster={cluster}")
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=SACCTMGR_TIMEOUT_SECONDS)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Unavailable(f"sacctmgr failed ({e}); accounts from Slurm not refreshed") from e
    if done.returncode != 0:
        # sacctmgr explains itself over several lines (slurmdbd down: the address, then the refusal); one line here
        said = " / ".join(filter(None, map(str.strip, done.stderr.splitlines())))
        raise Unavailable(f"sacctmgr exited {done.returncode} ({said[:300]}); accounts from Slurm not refreshed")
    return parse_associations(done.stdout)


def weight(account: str, share: str) -> tuple[int, str | None]:
    """The group's weight for a Slurm Share, and a line to log where it was moved into 1..10,000."""
    if share.isdigit() and validation.GROUP_WEIGHT_MIN <= int(share) <= validation.GROUP_WEIGHT_MAX:
        return int(share), None
    if share.isdigit() and int(share) > validation.GROUP_WEIGHT_MAX:
        return validation.GROUP_WEIGHT_MAX, (f"account {account}: Slurm share {share} is above the tree's "
                                             f"{validation.GROUP_WEIGHT_MAX}; weighted {validation.GROUP_WEIGHT_MAX}")
    return validation.GROUP_WEIGHT_MIN, f"account {account}: Slurm share {share!r} weighted 1"


@dataclass
class Copied:
    """The accounts to copy (parents first) as groups, the lines refused on the way."""

    groups: list[GroupRecord]
    refused: list[str]


def copied_accounts(found: Associations, tops: Sequence[str], taken: set[str] = frozenset()) -> Copied:
    """The configured accounts and their subtrees as groups, parents first (a configured account under
    another is copied in its place under it). An account whose name is
    not a group name, is a group another source keeps (`taken`), or would sit deeper than the tree
    allows, is left out with its subtree, in one line each; a configured account Slurm does not list,
    likewise."""
    children: dict[str, list[str]] = {}
    for account, parent in found.parent.items():
        children.setdefault(parent, []).append(account)
    groups, refused, copied = [], [], set()
    for top in tops:
        if top not in found.parent:
            refused.append(f"account {top} (slurm_accounts.accounts) is not in Slurm's associations")
            continue
        if _under(found.parent, top, set(tops) - {top}):     # copied in its place under the other
            continue
        stack = [(top, "", 1)]
        while stack:
            account, parent, depth = stack.pop()
            if account in copied:     # Slurm's tree has no loops; output that does is not followed round
                continue
            copied.add(account)
            try:
                validation.group_name(account)
            except InvalidArgument as e:
                refused.append(f"account {account} and the accounts under it not copied: {e}")
                continue
            if account in taken:
                refused.append(f"account {account} and the accounts under it not copied: group {account} is kept by "
                               "NSS (nss_groups); one source per group")
                continue
            if depth > MAX_DEPTH:
                refused.append(f"account {account} and the accounts under it not copied: deeper than the tree's "
                               f"{MAX_DEPTH} levels of groups")
                continue
            share, line = weight(account, found.share[account])
            if line:
                refused.append(line)
            groups.append(GroupRecord(account, share, parent))
            stack.extend((child, account, depth + 1) for child in sorted(children.get(account, []), reverse=True))
    return Copied(groups, refused)


def _under(parent: dict[str, str], account: str, others: set[str]) -> bool:
    """Whether one of `others` is above `account` in Slurm's tree."""
    seen = set()
    up = parent.get(account, "")
    while up and up not in seen:
        if up in others:
            return True
        seen.add(up)
        up = parent.get(up, "")
    return False


class SlurmAccounts:
    """One refresh: read (off the store thread), then apply (on it)."""

    def __init__(self, settings: SlurmAccountsSettings, commands: GroupCommands, sacctmgr: str = SACCTMGR):
        self.settings, self.commands, self.sacctmgr = settings, commands, sacctmgr

    def read(self) -> Associations:
        return read_associations(self.settings.cluster, self.sacctmgr)

    def apply(self, found: Associations) -> None:
        copied = copied_accounts(found, self.settings.accounts, set(self.commands.nss_kept()))
        for line in copied.refused:
            log.warning("slurm accounts: %s", line)
        existing = {g.name: g for g in self.commands.groups()}
        for record in copied.groups:
            now = existing.get(record.name)
            if now is None:
                self.commands.add_group(record, ACTOR, by_source=True)
            elif (now.weight, now.parent) != (record.weight, record.parent):
                self.commands.set_group(record.name, ACTOR, weight=record.weight, parent=record.parent, by_source=True)
        wanted_groups = {g.name for g in copied.groups}
        kept = self.commands.slurm_kept()
        users = self.commands.store.users()
        members: dict[str, set[str]] = {g: set() for g in wanted_groups}
        for user, accounts in found.accounts_of.items():
            for account in accounts & wanted_groups:
                members[account].add(user)
        placed, refused = placement(members, [u.name for u in users], self.settings.prefer,
                                    source="Slurm accounts", prefer_key="slurm_accounts.prefer")
        for line in refused:
            log.warning("slurm accounts: %s", line)
        for user in users:
            wanted = placed.get(user.name)
            if wanted is not None and wanted != user.group and (wanted or user.group in kept):
                try:
                    self.commands.move_user(user.name, wanted, ACTOR, by_source=True)
                except (NotFound, InvalidArgument) as e:   # removed meanwhile: the next pass sees it
                    log.warning("slurm accounts: user %s not moved to %s: %s", user.name, wanted or "the root", e)
        self._remove_gone(kept - wanted_groups - set(self.settings.accounts))

    def _remove_gone(self, gone: set[str]) -> None:
        """Accounts Slurm no longer lists, leaves first; one still holding a user (refused, left where it
        was) stays until it is empty."""
        while gone:
            groups = self.commands.groups()
            leaves = {g.name for g in groups if g.name in gone} - {g.parent for g in groups}
            if not leaves:
                return
            for name in sorted(leaves):
                try:
                    self.commands.remove_group(name, ACTOR, by_source=True)
                except VNodeSyncError as e:
                    log.warning("slurm accounts: account %s is gone from Slurm but its group stays: %s", name, e)
            gone -= leaves

    def __call__(self) -> None:
        """Both in one go (tests; the coordinator reads off the store thread: coordinator/main.py)."""
        self.apply(self.read())
