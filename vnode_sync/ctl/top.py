"""`vnodectl top`: who is held back, live.

Users come from the coordinator's Pressure RPC, hardest pressed first: held at their limit now
on the most nodes, then held longest within the window, then the highest measured/allowed rate.
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
    p.add_argument("--limit", type=int, default=0, help="show at most this many users (default: all that "
                   "move bytes or were held)")


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


def render_top(answer: pb.PressureResponse, height: int | None = None) -> str:
    clock = datetime.datetime.fromtimestamp(answer.sampled_at_unix or time.time()).strftime("%H:%M:%S")
    head = (f"vnode-sync top  {clock}  generation {answer.generation}, sharing {answer.sharing}; "
            f"held time over the last {duration(answer.window_seconds)}"
            + (f" (coordinator saw {duration(answer.covered_seconds)})"
               if answer.covered_seconds + 1 < answer.window_seconds else ""))
    rows = []
    for user in answer.users:
        for i, node in enumerate(user.nodes):
            first = i == 0
            if node.held_at_limit:
                held = f"held {duration(answer.sampled_at_unix - node.held_since_unix)}"
            else:
                held = "-"
            rows.append([user.user if first else "", user.priority if first else "",
                         f"{user.pressure:.2f}" if first else "", f"{user.nodes_held}" if first else "",
                         duration(user.held_seconds) if first else "", node.node_id,
                         _share(node.read_bps, node.allowed_read_bps), _share(node.write_bps, node.allowed_write_bps),
                         held, duration(node.held_seconds), SOURCES.get(node.held_source, "-")])
    if not rows:
        return head + "\n\nno user moves bytes or was held in the window"
    table = render(["USER", "PRIO", "PRESSURE", "NODES_HELD", "HELD_IN_WINDOW", "NODE", "READ_MB/s(/ALLOWED)",
                    "WRITE_MB/s(/ALLOWED)", "NOW", "HELD_ON_NODE", "SOURCE"], rows)
    lines = table.splitlines()
    if height is not None and len(lines) + 2 > height:
        hidden = len(lines) + 3 - height
        lines = lines[:max(1, height - 3)] + [f"... {hidden} more rows (--limit, or a taller terminal)"]
    return head + "\n\n" + "\n".join(lines)


def top_json(answer: pb.PressureResponse) -> dict:
    return {
        "generation": answer.generation, "sharing": answer.sharing,
        "window_seconds": answer.window_seconds, "covered_seconds": round(answer.covered_seconds, 1),
        "sampled_at_unix": answer.sampled_at_unix,
        "users": [{"user": u.user, "priority": u.priority, "pressure": round(u.pressure, 3),
                   "nodes_held": u.nodes_held, "held_seconds": round(u.held_seconds, 1),
                   "nodes": [{"node_id": n.node_id, "read_bps": round(n.read_bps, 1),
                              "write_bps": round(n.write_bps, 1), "allowed_read_bps": n.allowed_read_bps,
                              "allowed_write_bps": n.allowed_write_bps, "held_at_limit": n.held_at_limit,
                              "held_since_unix": n.held_since_unix or None, "held_seconds": round(n.held_seconds, 1),
                              "held_source": SOURCES.get(n.held_source)} for n in u.nodes]}
                  for u in answer.users]}


def run_top(args, stub: pb_grpc.AdminStub, timeout: float) -> None:
    request = pb.PressureRequest(window_seconds=args.window, limit=max(0, args.limit))
    if args.json:
        print(json.dumps(top_json(stub.Pressure(request, timeout=timeout)), indent=2))
        return
    if args.once:
        print(render_top(stub.Pressure(request, timeout=timeout)))
        return
    live = sys.stdout.isatty()
    if live:
        sys.stdout.write(ENTER + HIDE)
    try:
        while True:
            try:
                frame = render_top(stub.Pressure(request, timeout=timeout),
                                   shutil.get_terminal_size().lines if live else None)
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
