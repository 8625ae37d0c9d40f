"""`vnodectl top`: who is held back, live.

VNodes come from the coordinator's Pressure RPC, a row each for a user's own VNode and for each of
its running jobs' (`alice.123`), hardest pressed first: held at their limit now on the most nodes,
then held longest within the window, then the highest measured/allowed rate. `--by user` folds each
user's jobs into its row, `--by group` sums each group's subtree (its users and their jobs) node by
node; users under the root make the group "/".
Each of a user's nodes shows its read and write rate against what it may use there (its
allocation or its Algorithm 1 target) and how long it has been held. The live view redraws in
place with plain ANSI escapes (no curses: the table is all it draws); --once prints one table
and --json one document, for scripts.
"""

import argparse
import datetime
import json
import shutil
import sys
import time

import grpc

from vnode_sync.ctl.tables import mb, render
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc

BY = ("vnode", "user", "group")
SOURCES = {pb.HELD_SOURCE_MEASURED: "measured", pb.HELD_SOURCE_ESTIMATED: "estimated"}
# Alternate screen, cursor home and clear, hide and show the cursor (ECMA-48 / xterm).
ENTER, LEAVE, HOME_CLEAR, HIDE, SHOW = "\x1b[?1049h", "\x1b[?1049l", "\x1b[H\x1b[2J", "\x1b[?25l", "\x1b[?25h"


def add_top_command(sub) -> None:
    p = sub.add_parser("top", help="users held back at their limit, hardest pressed first (live)")
    p.add_argument("--once", action="store_true", help="print one table and exit")
    p.add_argument("--json", action="store_true", help="print one JSON document and exit")
    p.add_argument("--interval", type=_positive, default=2.0, help="seconds between refreshes (default 2)")
    p.add_argument("--window", type=_positive, default=300.0,
                   help="held time is summed over the last this many seconds (default 300, at most 3600)")
    p.add_argument("--limit", type=int, default=0, help="show at most this many rows (default: all that "
                   "move bytes or were held)")
    p.add_argument("--by", choices=BY, default="vnode",
                   help="a row per VNode (a user's own and each job's, the default), per user (its jobs "
                        "folded in) or per group (its subtree summed)")


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be above 0 seconds")
    return value


def duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _share(rate: float, allowed: int) -> str:
    if not allowed:
        return f"{mb(rate)}/-"
    return f"{mb(rate)}/{mb(allowed)} {100 * rate / allowed:3.0f}%"


def _merge(into: pb.NodePressure, node: pb.NodePressure) -> None:
    """Adds one VNode's figures on a node to a fold's: rates and allowances sum; held if any is."""
    into.read_bps += node.read_bps
    into.write_bps += node.write_bps
    into.allowed_read_bps += node.allowed_read_bps
    into.allowed_write_bps += node.allowed_write_bps
    if node.held_at_limit:
        into.held_since_unix = min(into.held_since_unix or node.held_since_unix, node.held_since_unix)
        into.held_source = into.held_source or node.held_source
    into.held_at_limit = into.held_at_limit or node.held_at_limit
    into.held_seconds = max(into.held_seconds, node.held_seconds)


def _group_keys(row: pb.UserPressure) -> list[str]:
    """The groups whose subtree holds ROW: "a", "a/b" for path "a/b"; "/" under the root."""
    if not row.group:
        return ["/"]
    parts = row.group.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def folded(answer: pb.PressureResponse, by: str) -> list[pb.UserPressure]:
    """The answer's rows as asked: per VNode as sent, or summed per user or per group, node by node,
    ranked as the coordinator ranks VNodes. A user's fold keeps its own priority; a group's has none."""
    if by == "vnode":
        return list(answer.users)
    folds: dict[str, pb.UserPressure] = {}
    nodes: dict[tuple[str, str], pb.NodePressure] = {}
    for row in answer.users:
        for key in [row.user] if by == "user" else _group_keys(row):
            fold = folds.get(key)
            if fold is None:
                fold = folds[key] = (pb.UserPressure(user=row.user, group=row.group) if by == "user"
                                     else pb.UserPressure(group=key))
            if by == "user" and not row.job:
                fold.priority = row.priority
            for node in row.nodes:
                merged = nodes.get((key, node.node_id))
                if merged is None:
                    merged = nodes[(key, node.node_id)] = fold.nodes.add(node_id=node.node_id)
                _merge(merged, node)
    for fold in folds.values():
        for node in fold.nodes:
            fold.pressure = max(fold.pressure, _ratio(node.read_bps, node.allowed_read_bps),
                                _ratio(node.write_bps, node.allowed_write_bps))
            fold.held_seconds = max(fold.held_seconds, node.held_seconds)
            fold.nodes_held += node.held_at_limit
        fold.nodes.sort(key=lambda n: (not n.held_at_limit, -n.held_seconds, n.node_id))
    return sorted(folds.values(), key=lambda r: (-r.nodes_held, -r.held_seconds, -r.pressure, r.user, r.group))


def _ratio(rate: float, allowed: int) -> float:
    return rate / allowed if allowed else 0.0


def _name(row: pb.UserPressure, by: str) -> str:
    if by == "group":
        return row.group
    return f"{row.user}.{row.job}" if row.job else row.user


def render_top(answer: pb.PressureResponse, height: int | None = None, by: str = "vnode") -> str:
    clock = datetime.datetime.fromtimestamp(answer.sampled_at_unix or time.time()).strftime("%H:%M:%S")
    head = (f"vnode-sync top  {clock}  generation {answer.generation}, sharing {answer.sharing}; "
            f"held time over the last {duration(answer.window_seconds)}"
            + (f" (coordinator saw {duration(answer.covered_seconds)})"
               if answer.covered_seconds + 1 < answer.window_seconds else ""))
    rows = []
    shown = folded(answer, by)
    grouped = by != "group" and any(user.group for user in shown)
    for user in shown:
        for i, node in enumerate(user.nodes):
            first = i == 0
            if node.held_at_limit:
                held = f"held {duration(answer.sampled_at_unix - node.held_since_unix)}"
            else:
                held = "-"
            rows.append([_name(user, by) if first else ""]
                        + ([(user.group or "/") if first else ""] if grouped else [])
                        + [((user.priority or "-") if by != "group" else "-") if first else "",
                         f"{user.pressure:.2f}" if first else "", f"{user.nodes_held}" if first else "",
                         duration(user.held_seconds) if first else "", node.node_id,
                         _share(node.read_bps, node.allowed_read_bps), _share(node.write_bps, node.allowed_write_bps),
                         held, duration(node.held_seconds), SOURCES.get(node.held_source, "-")])
    if not rows:
        return head + "\n\nno user moves bytes or was held in the window"
    first = {"vnode": "VNODE", "user": "USER", "group": "GROUP"}[by]
    table = render([first] + (["GROUP"] if grouped else []) + ["PRIO", "PRESSURE", "NODES_HELD", "HELD_IN_WINDOW", "NODE", "READ_MB/s(/ALLOWED)",
                    "WRITE_MB/s(/ALLOWED)", "NOW", "HELD_ON_NODE", "SOURCE"], rows)
    lines = table.splitlines()
    if height is not None and len(lines) + 2 > height:
        hidden = len(lines) + 3 - height
        lines = lines[:max(1, height - 3)] + [f"... {hidden} more rows (--limit, or a taller terminal)"]
    return head + "\n\n" + "\n".join(lines)


def top_json(answer: pb.PressureResponse, by: str = "vnode") -> dict:
    def row(u: pb.UserPressure) -> dict:
        who = {"group": u.group} if by == "group" else {"user": u.user, "job": u.job or None, "group": u.group,
                                                         "priority": u.priority or None}
        return {**who, "pressure": round(u.pressure, 3), "nodes_held": u.nodes_held,
                "held_seconds": round(u.held_seconds, 1),
                "nodes": [{"node_id": n.node_id, "read_bps": round(n.read_bps, 1),
                           "write_bps": round(n.write_bps, 1), "allowed_read_bps": n.allowed_read_bps,
                           "allowed_write_bps": n.allowed_write_bps, "held_at_limit": n.held_at_limit,
                           "held_since_unix": n.held_since_unix or None, "held_seconds": round(n.held_seconds, 1),
                           "held_source": SOURCES.get(n.held_source)} for n in u.nodes]}

    return {
        "generation": answer.generation, "sharing": answer.sharing,
        "window_seconds": answer.window_seconds, "covered_seconds": round(answer.covered_seconds, 1),
        "sampled_at_unix": answer.sampled_at_unix, "by": by,
        ("groups" if by == "group" else "users"): [row(u) for u in folded(answer, by)]}


def run_top(args, stub: pb_grpc.AdminStub, timeout: float) -> None:
    request = pb.PressureRequest(window_seconds=args.window, limit=max(0, args.limit))
    if args.json:
        print(json.dumps(top_json(stub.Pressure(request, timeout=timeout), args.by), indent=2))
        return
    if args.once:
        print(render_top(stub.Pressure(request, timeout=timeout), by=args.by))
        return
    live = sys.stdout.isatty()
    if live:
        sys.stdout.write(ENTER + HIDE)
    try:
        while True:
            try:
                frame = render_top(stub.Pressure(request, timeout=timeout),
                                   shutil.get_terminal_size().lines if live else None, args.by)
            except grpc.RpcError as e:
                if e.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise
                frame = (f"vnode-sync top  {time.strftime('%H:%M:%S')}  coordinator unreachable ({e.code().name}); "
                         "retrying")
            sys.stdout.write((HOME_CLEAR if live else "\n") + frame + "\n")
            sys.stdout.flush()
            time.sleep(args.interval)
    except KeyboardInterrupt:
        pass
    finally:
        if live:
            sys.stdout.write(SHOW + LEAVE)
            sys.stdout.flush()
