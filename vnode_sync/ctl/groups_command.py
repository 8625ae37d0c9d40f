"""`vnodectl add-group | set-group | remove-group | move | groups`: the tree of weights (users under
groups, groups under groups), changed while the coordinator serves (coordinator/commands/groups.py);
and the per-group lines `vnodectl status` prints."""

import argparse
import json

from vnode_sync import validation
from vnode_sync.ctl.tables import mb, render
from vnode_sync.errors import InvalidArgument
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc

GROUP_COMMANDS = ("add-group", "set-group", "remove-group", "move", "groups")
ROOT = "-"   # `move USER -` and `--parent -`: under the root


def _checked(check, value: str):
    try:
        return check(value)
    except InvalidArgument as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def group_arg(value: str) -> str:
    return _checked(validation.group_name, value)


def place_arg(value: str) -> str:
    """A group, or ROOT: "" (under the root)."""
    return "" if value == ROOT else group_arg(value)


def _weight_arg(value: str) -> int:
    return _checked(validation.group_weight, value)


def _rate_arg(value: str) -> int:
    return _checked(validation.rate, value)


def _user_arg(value: str) -> str:
    return _checked(validation.user_name, value)


def add_group_commands(sub) -> None:
    p = sub.add_parser("add-group", help="add a group (project, account) to the tree of weights")
    p.add_argument("group", type=group_arg)
    p.add_argument("--weight", type=_weight_arg, required=True,
                   help=f"its share among its siblings ({validation.GROUP_WEIGHT_MIN}..{validation.GROUP_WEIGHT_MAX}; "
                        "only ratios among siblings matter)")
    p.add_argument("--parent", type=place_arg, default=ROOT, help="the group it sits in (default: the root)")
    p.add_argument("--floor", type=_rate_arg, default=0, help="its users' floor together on each node, e.g. 20MB/s")
    p.add_argument("--ceiling", type=_rate_arg, default=0, help="its users' ceiling together on each node, or none")
    p = sub.add_parser("set-group", help="change a group's weight, floor, ceiling or parent")
    p.add_argument("group", type=group_arg)
    p.add_argument("--weight", type=_weight_arg)
    p.add_argument("--parent", type=place_arg, help=f"another group, or {ROOT} for the root")
    p.add_argument("--floor", type=_rate_arg)
    p.add_argument("--ceiling", type=_rate_arg)
    sub.add_parser("remove-group", help="remove an empty group").add_argument("group", type=group_arg)
    p = sub.add_parser("move", help="put a user in a group")
    p.add_argument("user", type=_user_arg)
    p.add_argument("group", type=place_arg, help=f"the group, or {ROOT} for the root")
    sub.add_parser("groups", help="list the tree of weights").add_argument("--json", action="store_true")


def _group_line(g: pb.Group) -> str:
    bounds = "".join(f", {what} {mb(v)} MB/s" for what, v in (("floor", g.floor_bps), ("ceiling", g.ceiling_bps)) if v)
    return f"group {g.name}: weight {g.weight}, under {g.parent or 'the root'}{bounds}"


def _tree_rows(groups) -> list[list]:
    """One row per group, each under its parent (depth-first), names indented by depth."""
    children: dict[str, list] = {}
    for g in groups:
        children.setdefault(g.parent, []).append(g)
    rows, stack = [], [(g, 0) for g in reversed(children.get("", []))]
    while stack:
        g, depth = stack.pop()
        rows.append([("  " * depth) + g.name, g.weight, mb(g.floor_bps) if g.floor_bps else "-",
                     mb(g.ceiling_bps) if g.ceiling_bps else "-", ", ".join(g.users) or "-"])
        stack.extend((c, depth + 1) for c in reversed(children.get(g.name, [])))
    return rows


def run_group_command(args, stub: pb_grpc.AdminStub, timeout: float) -> str:
    if args.command == "add-group":
        group = pb.Group(name=args.group, weight=args.weight, parent=args.parent, floor_bps=args.floor,
                         ceiling_bps=args.ceiling)
        return "added " + _group_line(stub.AddGroup(pb.AddGroupRequest(group=group), timeout=timeout))
    if args.command == "set-group":
        request = pb.SetGroupRequest(name=args.group)
        for field, value in (("weight", args.weight), ("parent", args.parent), ("floor_bps", args.floor),
                             ("ceiling_bps", args.ceiling)):
            if value is not None:
                setattr(request, field, value)
        return _group_line(stub.SetGroup(request, timeout=timeout))
    if args.command == "remove-group":
        return "removed " + _group_line(stub.RemoveGroup(pb.GroupRequest(name=args.group), timeout=timeout))
    if args.command == "move":
        user = stub.MoveUser(pb.MoveUserRequest(user=args.user, group=args.group), timeout=timeout)
        return f"user {user.name} is in {('group ' + user.group) if user.group else 'the root'}"
    response = stub.ListGroups(pb.ListGroupsRequest(), timeout=timeout)
    if args.json:
        return json.dumps({"generation": response.generation, "groups": [group_json(g) for g in response.groups]},
                          indent=2)
    if not response.groups:
        return "no groups: every user shares under the root by its priority"
    return render(["GROUP", "WEIGHT", "FLOOR_MB/s", "CEILING_MB/s", "USERS"], _tree_rows(response.groups))


def group_json(g: pb.Group) -> dict:
    return {"name": g.name, "weight": g.weight, "parent": g.parent, "floor_bps": g.floor_bps,
            "ceiling_bps": g.ceiling_bps, "users": list(g.users)}


def group_status_lines(status: pb.StatusResponse) -> str:
    """The groups of a Status answer, as a tree: their subtrees' users summed ("" without groups)."""
    if not status.groups:
        return ""
    by_name = {gs.group.name: gs for gs in status.groups}
    rows = []
    for row in _tree_rows([gs.group for gs in status.groups]):
        gs = by_name[row[0].strip()]
        rows.append([row[0], gs.group.weight, gs.active_users, mb(gs.measured_read_bps), mb(gs.measured_write_bps),
                     mb(gs.given_read_bps), mb(gs.given_write_bps)])
    return render(["GROUP", "WEIGHT", "ACTIVE_USERS", "MEASURED_RD_MB/s", "MEASURED_WR_MB/s", "GIVEN_RD_MB/s",
                   "GIVEN_WR_MB/s"], rows)
