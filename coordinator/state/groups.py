"""The site's groups (projects, Slurm accounts, Unix groups) as the store keeps them, and the rules
every change to them keeps, checked alike by both stores inside the change itself.

A group has a weight (how it shares what its parent gets with its siblings), a floor and a ceiling
(bytes/s on each resource, its users together; 0 = none), and a parent group ("" = under the root).
A user sits in at most one group ("" = under the root, as every user did before groups).
"""

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from vnode_sync.errors import InvalidArgument, NotFound

# Levels of groups under the root: the tree step costs a few flat steps per level (docs/tree-of-weights.md).
MAX_DEPTH = 6


@dataclass(frozen=True)
class GroupRecord:
    name: str
    weight: int
    parent: str = ""        # "": under the root
    floor_bps: int = 0      # 0: none
    ceiling_bps: int = 0    # 0: none

    def fields(self) -> dict:
        """As a JSON document (the ZooKeeper store's znode)."""
        return {"weight": self.weight, "parent": self.parent, "floor_bps": self.floor_bps,
                "ceiling_bps": self.ceiling_bps}


def _depth(groups: Mapping[str, GroupRecord], name: str) -> int:
    depth = 0
    while name:
        depth += 1
        name = groups[name].parent
    return depth


def _height_below(groups: Mapping[str, GroupRecord], name: str) -> int:
    """Levels of groups from `name` down (1: it has no child group)."""
    children = [g.name for g in groups.values() if g.parent == name]
    return 1 + max((_height_below(groups, c) for c in children), default=0)


def check_parent(groups: Mapping[str, GroupRecord], name: str, parent: str) -> None:
    """`name` (new, or moving with its subtree) may sit under `parent`: it exists, is not `name` nor
    under it, and the tree stays within MAX_DEPTH levels."""
    if not parent:
        return
    if parent not in groups:
        raise NotFound(f"unknown parent group {parent!r}; add it first with `vnodectl add-group`")
    up = parent
    while up:
        if up == name:
            raise InvalidArgument(f"group {name!r} cannot sit under {parent!r}: {parent!r} is {name!r} "
                                  "or sits under it (a tree has no loops)")
        up = groups[up].parent
    height = _height_below(groups, name) if name in groups else 1
    if _depth(groups, parent) + height > MAX_DEPTH:
        raise InvalidArgument(f"group {name!r} under {parent!r} would make the tree deeper than {MAX_DEPTH} levels "
                              "of groups")


def check_new(groups: Mapping[str, GroupRecord], record: GroupRecord) -> None:
    if record.name in groups:
        raise InvalidArgument(f"group {record.name!r} exists already; use `vnodectl set-group` to change it")
    check_parent(groups, record.name, record.parent)


def check_removable(groups: Mapping[str, GroupRecord], users_in: Mapping[str, str], name: str) -> None:
    """`users_in`: user -> its group. A group is removed only empty: its users would otherwise move
    to the root without anyone having said so."""
    if name not in groups:
        raise NotFound(f"unknown group {name!r}")
    users = sorted(u for u, g in users_in.items() if g == name)
    children = sorted(g.name for g in groups.values() if g.parent == name)
    if users or children:
        held = ", ".join([f"users {', '.join(users[:5])}{' ...' if len(users) > 5 else ''}"] * bool(users)
                         + [f"groups {', '.join(children[:5])}{' ...' if len(children) > 5 else ''}"] * bool(children))
        raise InvalidArgument(f"group {name!r} is not empty ({held}); move them out first (`vnodectl move USER GROUP`, "
                              f"`vnodectl set-group GROUP --parent OTHER`)")


def check_member(groups: Mapping[str, GroupRecord], group: str) -> None:
    """A user may be moved into `group` ("": the root)."""
    if group and group not in groups:
        raise NotFound(f"unknown group {group!r}; add it first with `vnodectl add-group`")


def _up_from(by_name: Mapping[str, GroupRecord], group: str) -> Iterator[str]:
    """`group`, its parent, ... up to the root; the tree's rules (checked in the store) keep it loop-free,
    and a loop read anyway stops where it closes."""
    seen = set()
    while group in by_name and group not in seen:
        seen.add(group)
        yield group
        group = by_name[group].parent


def group_members(users: Sequence, groups: Sequence[GroupRecord]) -> dict[str, list[str]]:
    """group -> every user in its subtree (its groups' users too); `users`: records with a name and a group."""
    by_name = {g.name: g for g in groups}
    out: dict[str, list[str]] = {g.name: [] for g in groups}
    for record in users:
        for group in _up_from(by_name, record.group):
            out[group].append(record.name)
    return out


def group_paths(groups: Sequence[GroupRecord]) -> dict[str, str]:
    """group -> its path from the root ("physics/theory")."""
    by_name = {g.name: g for g in groups}
    return {g.name: "/".join(reversed(list(_up_from(by_name, g.name)))) for g in groups}


def roll_up(members: Mapping[str, list[str]], per_user: Mapping[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
    """group -> the (read, write) figures of the users of its subtree, summed."""
    out = {}
    for group, names in members.items():
        pairs = [per_user[n] for n in names if n in per_user]
        out[group] = (sum(p[0] for p in pairs), sum(p[1] for p in pairs))
    return out
