"""Groups of the tree of weights from the site's Unix groups through NSS (`getent`, which covers
files, LDAP and SSSD), refreshed on a period (the coordinator config's `nss_groups:` section).

A pass reads NSS off the store thread (`read_members`: `getent group NAME...` for the configured
groups' listed members, `getent passwd USER...` for the store's users' primary groups), then
`NssGroups.apply` makes the tree agree on the store thread: each configured group exists with its
configured weight, and every store user sits in the configured group NSS puts it in, or under the
root if none. A user NSS puts in two of them is refused in one logged line and left where it is,
unless `prefer` names one. Only the store's users are moved (NSS may list thousands who never use
storage); the names given to getent are validated first and passed as arguments, never to a shell.
"""

import logging
import subprocess
from collections.abc import Mapping, Sequence

from vnode_sync import validation
from vnode_sync.coordinator.config import NssGroupsSettings
from vnode_sync.coordinator.commands.groups import GroupCommands
from vnode_sync.coordinator.state.groups import GroupRecord
from vnode_sync.errors import InvalidArgument, NotFound, Unavailable

log = logging.getLogger(__name__)

GETENT = "getent"
# LDAP or SSSD that does not answer by then fails the pass (retried with backoff by its supervisor).
GETENT_TIMEOUT_SECONDS = 30.0
ACTOR = "nss"


def _getent(database: str, keys: Sequence[str], getent: str) -> list[list[str]]:
    """The entries found (split on ':'); keys NSS does not know are left out (getent exits 2 then)."""
    if not keys:
        return []
    try:
        done = subprocess.run([getent, database, *keys], capture_output=True, text=True, timeout=GETENT_TIMEOUT_SECONDS)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Unavailable(f"getent {database} failed ({e}); groups from NSS not refreshed") from e
    if done.returncode not in (0, 2):
        raise Unavailable(f"getent {database} exited {done.returncode} ({done.stderr.strip()[:200]}); groups from NSS "
                          "not refreshed")
    return [line.split(":") for line in done.stdout.splitlines() if line.count(":") >= 3]


def read_members(groups: Sequence[str], users: Sequence[str], getent: str = GETENT) -> dict[str, set[str]]:
    """Unix group -> the users of `users` in it, listed as members or by their primary group."""
    groups = [validation.group_name(g) for g in groups]
    users = [validation.user_name(u) for u in users]
    wanted, members, by_gid = set(users), {g: set() for g in groups}, {}
    for name, _, gid, listed, *_ in _getent("group", groups, getent):
        if name in members:
            members[name] |= wanted & set(filter(None, listed.split(",")))
            by_gid[gid] = name
    for entry in _getent("passwd", users, getent):
        if len(entry) >= 4 and entry[3] in by_gid and entry[0] in wanted:
            members[by_gid[entry[3]]].add(entry[0])
    return members


def placement(members: Mapping[str, set[str]], users: Sequence[str], prefer: Mapping[str, str],
              source: str = "NSS groups", prefer_key: str = "nss_groups.prefer") -> tuple[dict[str, str], list[str]]:
    """user -> the configured group it belongs in ("": none of them); and one line per user refused
    (in several, none preferred), who is left out of the placement. `source` and `prefer_key` name the
    groups' source and its config's preference in that line."""
    placed, refused = {}, []
    for user in users:
        found = sorted(g for g, names in members.items() if user in names)
        if len(found) > 1 and prefer.get(user) in found:
            found = [prefer[user]]
        if len(found) > 1:
            refused.append(f"user {user} is in {source} {', '.join(found)}: a user sits in one group; name one "
                           f"under {prefer_key} (left where it is)")
            continue
        placed[user] = found[0] if found else ""
    return placed, refused


class NssGroups:
    """One refresh: read (off the store thread), then apply (on it)."""

    def __init__(self, settings: NssGroupsSettings, commands: GroupCommands, getent: str = GETENT):
        self.settings, self.commands, self.getent = settings, commands, getent

    def read(self) -> dict[str, set[str]]:
        return read_members(list(self.settings.groups), [u.name for u in self.commands.store.users()], self.getent)

    def apply(self, members: Mapping[str, set[str]]) -> None:
        existing = {g.name: g for g in self.commands.groups()}
        for name, weight in self.settings.groups.items():
            if name not in existing:
                self.commands.add_group(GroupRecord(name, weight), ACTOR)
            elif existing[name].weight != weight or existing[name].parent:
                self.commands.set_group(name, ACTOR, weight=weight, parent="", by_source=True)
        users = self.commands.store.users()
        placed, refused = placement(members, [u.name for u in users], self.settings.prefer)
        for line in refused:
            log.warning("nss groups: %s", line)
        for user in users:
            wanted = placed.get(user.name)
            if wanted is None:
                continue
            managed_now = user.group in self.settings.groups
            if wanted != user.group and (wanted or managed_now):   # NSS owns its groups' members, nothing else
                try:
                    self.commands.move_user(user.name, wanted, ACTOR, by_source=True)
                except (NotFound, InvalidArgument) as e:   # removed meanwhile: the next pass sees it
                    log.warning("nss groups: user %s not moved to %s: %s", user.name, wanted or "the root", e)

    def __call__(self) -> None:
        """Both in one go (tests; the coordinator reads off the store thread: coordinator/main.py)."""
        self.apply(self.read())
