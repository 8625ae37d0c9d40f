"""vnodectl: set priorities, (de)activate users, and see what each user gets on each storage node.

The coordinator's address comes from --coordinator, else $VNODE_COORDINATOR, else the
`coordinator:` key of --config (default /etc/vnode-sync/vnodectl.yaml if present),
else 127.0.0.1:7070. The client certificate likewise: --ca/--cert/--key, else
$VNODE_CA/$VNODE_CERT/$VNODE_KEY, else the config's `tls:` section. Without one,
vnodectl talks plaintext only with --insecure (or `insecure: true`) or to a coordinator
on this host.
"""

import argparse
import json
import os
import sys

import grpc

from vnode_sync import validation
from vnode_sync.ctl.settings import DEFAULT_PATH as DEFAULT_CONFIG, load_ctl_settings
from vnode_sync.ctl.groups_command import GROUP_COMMANDS, add_group_commands, group_status_lines, run_group_command
from vnode_sync.ctl.measure import add_measure_command, run_measure
from vnode_sync.ctl.nodes_command import add_node_actions, run_node_action
from vnode_sync.ctl.status_document import node_json, status_json
from vnode_sync.ctl.tables import mb, render
from vnode_sync.ctl.top import add_top_command, run_top
from vnode_sync.distribution import version
from vnode_sync.errors import ConfigError, InvalidArgument, NotFound, VNodeSyncError
from vnode_sync.security.certs_command import add_certs_commands, run_certs
from vnode_sync.security.tls import TlsFiles, is_loopback, secure_channel
from vnode_sync.wire import vnode_pb2 as pb, vnode_pb2_grpc as pb_grpc
from vnode_sync.wire.leader import dial, split_addresses

DEFAULT_ADDRESS = "127.0.0.1:7070"
RPC_TIMEOUT_SECONDS = 10.0
# Given several coordinators (docs/ha.md), a call waits out a failover: a killed leader's session
# expires (10 s by default), a standby is elected and serves.
FAILOVER_TIMEOUT_SECONDS = 30.0
# Status of 10,000 users x 100 nodes is ~14 MB; gRPC's default receive limit is 4 MB.
STATUS_SIZE_OPTIONS = [("grpc.max_receive_message_length", 256 << 20)]
# Above this many (user, node) lines the `status` table is one line per user (a million lines is no
# table to read, and takes Python ~10 s to print); --per-node, --user or --node give the lines.
# --json always has the per-node shape (scripts need one shape); --summary asks for summaries.
STATUS_LINES_MAX = 10_000

EXIT_OK, EXIT_FAILED, EXIT_INVALID, EXIT_NOT_FOUND, EXIT_UNAVAILABLE = 0, 1, 2, 3, 4
EXIT_DENIED = 5
# What a shell reports for a tool that SIGPIPE ended (128 + 13): `vnodectl status | head -1` stops like `yes | head -1`.
EXIT_BROKEN_PIPE = 141
_EXIT_OF_STATUS = {grpc.StatusCode.INVALID_ARGUMENT: EXIT_INVALID, grpc.StatusCode.NOT_FOUND: EXIT_NOT_FOUND,
                   grpc.StatusCode.PERMISSION_DENIED: EXIT_DENIED, grpc.StatusCode.UNAUTHENTICATED: EXIT_DENIED,
                   grpc.StatusCode.UNAVAILABLE: EXIT_UNAVAILABLE,
                   grpc.StatusCode.DEADLINE_EXCEEDED: EXIT_UNAVAILABLE}


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        print(f"vnodectl: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_INVALID)


def coordinator_address(flag: str | None, config_path: str | None) -> str:
    if flag:
        return flag
    if os.environ.get("VNODE_COORDINATOR"):
        return os.environ["VNODE_COORDINATOR"]
    return load_ctl_settings(config_path).coordinator or DEFAULT_ADDRESS


def client_tls(args, address: str) -> TlsFiles | None:
    """Flags win over $VNODE_CA/_CERT/_KEY, which win over the config file; None means plaintext."""
    chosen = {k: getattr(args, k) or os.environ.get(f"VNODE_{k.upper()}") for k in ("ca", "cert", "key")}
    if args.insecure:
        return None
    if any(chosen.values()):
        missing = [f"--{k}" for k, v in chosen.items() if not v]
        if missing:
            raise ConfigError(f"mutual TLS needs --ca, --cert and --key; missing {', '.join(missing)}")
        files = TlsFiles(**chosen)
    else:
        security = load_ctl_settings(args.config).security
        files = security.tls
        if files is None and not security.insecure and not is_loopback(address):
            raise ConfigError(f"no client certificate for coordinator {address}: pass --ca/--cert/--key "
                              "(or set them in the config), or --insecure for a lab coordinator")
    if files is not None:
        files.read()  # an expired, foreign or mismatched certificate fails here, in one line
    return files


def _user_arg(value: str) -> str:
    try:
        return validation.user_name(value)
    except InvalidArgument as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def _priority_arg(value: str) -> int:
    try:
        return validation.priority(value)
    except InvalidArgument as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def _rate_arg(value: str) -> int:
    try:
        return validation.rate(value)
    except InvalidArgument as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="vnodectl", description=__doc__.splitlines()[0])
    parser.add_argument("--coordinator", help="coordinator host:port (several, comma-separated: the leader is followed)")
    parser.add_argument("--config", help=f"vnodectl YAML (default {DEFAULT_CONFIG})")
    parser.add_argument("--ca", help="CA certificate (PEM) the coordinator's certificate must chain to")
    parser.add_argument("--cert", help="this admin's or user's certificate (PEM)")
    parser.add_argument("--key", help="its private key (PEM)")
    parser.add_argument("--insecure", action="store_true", help="plaintext, for a lab coordinator (insecure: true)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    add_certs_commands(sub)
    p = sub.add_parser("set-priority", help="set a user's priority (1..100, 100 highest)")
    p.add_argument("user", type=_user_arg)
    p.add_argument("priority", type=_priority_arg)
    for name, text in (("set-reservation", "a user's floor on each node it uses, e.g. 15MB/s, or none "
                                           "(work-conserving policy)"),
                       ("set-limit", "a user's ceiling on each node, e.g. 100MB/s, or none (work-conserving policy)")):
        p = sub.add_parser(name, help=text)
        p.add_argument("user", type=_user_arg)
        p.add_argument("rate", type=_rate_arg)
    p = sub.add_parser("add-user", help="register a user")
    p.add_argument("user", type=_user_arg)
    p.add_argument("--uid", type=int, required=True)
    p.add_argument("--priority", type=_priority_arg, default=10)
    p.add_argument("--active", action="store_true")
    for name, text in (("activate", "give a user a share"), ("deactivate", "take a user's share away"),
                       ("remove", "forget a user")):
        sub.add_parser(name, help=text).add_argument("user", type=_user_arg)
    for name, text in (("users", "list users"), ("nodes", "list storage nodes; add, set or remove one"),
                       ("status", "targets and measured MB/s per user and node")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--json", action="store_true", help="machine-readable")
        if name == "nodes":
            add_node_actions(p, _Parser)
    p.add_argument("--user", type=_user_arg, help="only this user, on every node")
    p.add_argument("--node", help="only this storage node")
    p.add_argument("--per-node", action="store_true",
                   help=f"a line per user and node however many (above {STATUS_LINES_MAX:,}: one per user)")
    p.add_argument("--summary", action="store_true",
                   help="one line (or JSON object) per user: its nodes' target range and summed rates "
                        "(ignored with --user or --node)")
    add_group_commands(sub)
    add_top_command(sub)
    add_measure_command(sub)
    return parser


def _user_line(user: pb.User) -> str:
    bounds = "".join(f", {what} {mb(value)} MB/s" for what, value in (("reservation", user.reservation_bps),
                                                                       ("limit", user.limit_bps)) if value)
    return f"{user.name}: priority {user.priority}, {'active' if user.active else 'inactive'}{bounds}"


def _demand(value: float) -> str:
    return "unbounded" if value == float("inf") else mb(value)


def _share(part: float) -> str:
    """A node's weights, as sent: the user's part (none where the node shares by rate, not weight)."""
    return f"{100 * part:.1f}" if part else "-"


def _range(low: int, high: int) -> str:
    return mb(low) if low == high else f"{mb(low)}-{mb(high)}"


def _print_summaries(status: pb.StatusResponse) -> None:
    rows = [[us.user.name, us.user.priority, "yes" if us.user.active else "no", us.summary.nodes,
             _range(us.summary.target_read_bps_min, us.summary.target_read_bps_max),
             _range(us.summary.target_write_bps_min, us.summary.target_write_bps_max),
             mb(us.summary.measured_read_bps), mb(us.summary.measured_write_bps), us.summary.applied_generation_min,
             us.summary.nodes_held_at_limit] for us in status.users]
    print(f"generation {status.generation}, sharing {status.sharing}")
    print(render(["USER", "PRIO", "ACTIVE", "NODES", "TARGET_RD_MB/s", "TARGET_WR_MB/s", "MEASURED_RD_MB/s",
                  "MEASURED_WR_MB/s", "MIN_APPLIED_GEN", "HELD_NODES"], rows))
    print(f"{len(status.users)} users x {len(status.nodes)} nodes: one line per user (targets lowest-highest over "
          "its nodes, measured summed); --user NAME or --node ID for their per-node lines, --per-node for all")


def _print_not_enforcing(status: pb.StatusResponse) -> None:
    for node in status.nodes:
        if node.not_enforcing:
            print(f"{node.node_id}: not enforcing: {node.not_enforcing}")
        for line in node.degraded:
            print(f"{node.node_id}: degraded: {line}")


def _print_status(status: pb.StatusResponse) -> None:
    if any(us.HasField("summary") for us in status.users[:1]):
        _print_summaries(status)
        _print_jobs(status)
        _print_groups(status)
        _print_not_enforcing(status)
        return
    rows = []
    fair = status.sharing == "work-conserving"
    for us in status.users:
        u = us.user
        for n in us.nodes or [pb.UserNodeStatus(node_id="-")]:
            row = [u.name, u.priority, "yes" if u.active else "no", n.node_id,
                   mb(n.target_read_bps), mb(n.target_write_bps), mb(n.measured_read_bps),
                   mb(n.measured_write_bps), n.applied_generation]
            if fair:
                row[4:4] = [mb(u.reservation_bps) if u.reservation_bps else "-",
                            mb(u.limit_bps) if u.limit_bps else "-", mb(n.allocated_read_bps),
                            mb(n.allocated_write_bps), _demand(n.demand_read_bps), _demand(n.demand_write_bps),
                            _share(n.weight_read_share), _share(n.weight_write_share)]
            rows.append(row)
    print(f"generation {status.generation}, sharing {status.sharing}")
    head = ["USER", "WEIGHT" if fair else "PRIO", "ACTIVE", "NODE", "TARGET_RD_MB/s", "TARGET_WR_MB/s",
            "MEASURED_RD_MB/s", "MEASURED_WR_MB/s", "APPLIED_GEN"]
    if fair:
        head[4:4] = ["RESERVE_MB/s", "LIMIT_MB/s", "ALLOC_RD_MB/s", "ALLOC_WR_MB/s", "DEMAND_RD_MB/s", "DEMAND_WR_MB/s",
                     "WEIGHT_RD_%", "WEIGHT_WR_%"]
    print(render(head, rows))
    _print_jobs(status)
    _print_groups(status)
    _print_not_enforcing(status)


def _print_jobs(status: pb.StatusResponse) -> None:
    lines = [f"  {us.user.name}: job {job.job_id} on {job.node}: "
             + (f"falls back to its user ({job.fallback})" if job.fallback else f"VNode {job.vnode}")
             for us in status.users for job in us.user.jobs]
    if lines:
        print("running jobs (a job is its own VNode once a compute agent reports a connection of it):")
        print("\n".join(lines))


def _print_groups(status: pb.StatusResponse) -> None:
    lines = group_status_lines(status)
    if lines:
        print("by group (each group's subtree summed):")
        print(lines)


def _enforcing(node: pb.StorageNode) -> str:
    if not node.backend:
        return "-"
    return "NO" if node.not_enforcing else "yes"


def _print_nodes(nodes) -> None:
    rows = [[n.node_id, "yes" if n.connected else "no", n.backend or "-", _enforcing(n), n.applied_generation,
             ", ".join(f"{d.name}({mb(d.read_bps)}/{mb(d.write_bps)} MB/s)" for d in n.devices)]
            for n in nodes]
    print(render(["NODE", "CONNECTED", "BACKEND", "ENFORCING", "APPLIED_GEN", "DEVICES (read/write BW)"], rows))
    for n in nodes:
        if n.not_enforcing:
            print(f"{n.node_id}: not enforcing: {n.not_enforcing}")
        for line in n.degraded:
            print(f"{n.node_id}: degraded: {line}")
        for note in n.limitations:
            print(f"{n.node_id}: cannot: {note}")
        for error in n.errors:
            print(f"{n.node_id}: error: {error}")


def run(args, stub: pb_grpc.AdminStub, timeout: float = RPC_TIMEOUT_SECONDS) -> None:
    t = timeout
    if args.command == "set-priority":
        print(_user_line(stub.SetPriority(pb.SetPriorityRequest(user=args.user, priority=args.priority), timeout=t)))
    elif args.command in ("set-reservation", "set-limit"):
        call = stub.SetReservation if args.command == "set-reservation" else stub.SetLimit
        print(_user_line(call(pb.SetRateRequest(user=args.user, bps=args.rate), timeout=t)))
    elif args.command == "add-user":
        print(_user_line(stub.AddUser(pb.AddUserRequest(user=args.user, uid=validation.uid(args.uid),
                                                        priority=args.priority, active=args.active), timeout=t)))
    elif args.command in ("activate", "deactivate"):
        request = pb.SetActiveRequest(user=args.user, active=args.command == "activate")
        print(_user_line(stub.SetActive(request, timeout=t)))
    elif args.command == "remove":
        print(f"removed {stub.RemoveUser(pb.UserRequest(user=args.user), timeout=t).user}")
    elif args.command == "users":
        response = stub.ListUsers(pb.ListUsersRequest(), timeout=t)
        if args.json:
            print(json.dumps({"generation": response.generation, "users": [
                {"name": u.name, "uid": u.uid, "priority": u.priority, "active": u.active,
                 "running_jobs": u.running_jobs, "reservation_bps": u.reservation_bps, "limit_bps": u.limit_bps,
                 "group": u.group}
                for u in response.users]}, indent=2))
        else:
            print(render(["USER", "UID", "PRIO", "ACTIVE", "JOBS"],
                         [[u.name, u.uid, u.priority, "yes" if u.active else "no", u.running_jobs]
                          for u in response.users]))
    elif args.command in GROUP_COMMANDS:
        print(run_group_command(args, stub, t))
    elif args.command == "nodes" and args.node_action:
        print(run_node_action(args, stub, t))
    elif args.command == "measure-capacity":
        run_measure(args, stub, t)
    elif args.command == "nodes":
        response = stub.ListNodes(pb.ListNodesRequest(), timeout=t)
        if args.json:
            print(json.dumps({"generation": response.generation,
                              "nodes": [node_json(n) for n in response.nodes]}, indent=2))
        else:
            _print_nodes(response.nodes)
    elif args.command == "top":
        run_top(args, stub, t)
    elif args.command == "status":
        request = pb.StatusRequest(max_entries=_status_max_entries(args), summarise=args.summary,
                                   user=args.user or "", node=args.node or "")
        status = stub.Status(request, timeout=t)
        if args.json:
            print(json.dumps(status_json(status), indent=2))
        else:
            _print_status(status)


def _status_max_entries(args: argparse.Namespace) -> int:
    return 0 if args.per_node or args.json else STATUS_LINES_MAX


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    address, tls = "", None
    try:
        if args.command == "certs":
            run_certs(args)
        else:
            address = coordinator_address(args.coordinator, args.config)
            tls = client_tls(args, address)
            with dial(address, lambda one: secure_channel(one, tls, STATUS_SIZE_OPTIONS) if tls
                      else grpc.insecure_channel(one, options=STATUS_SIZE_OPTIONS)) as channel:
                run(args, pb_grpc.AdminStub(channel),
                    FAILOVER_TIMEOUT_SECONDS if len(split_addresses(address)) > 1 else RPC_TIMEOUT_SECONDS)
        sys.stdout.flush()   # here, not at exit, so a closed reader is caught below
    except BrokenPipeError:
        # The reader is gone: no traceback, and no second error from the flush at interpreter exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except VNodeSyncError as e:
        print(f"vnodectl: error: {e}", file=sys.stderr)
        return EXIT_NOT_FOUND if isinstance(e, NotFound) else EXIT_INVALID
    except grpc.RpcError as e:
        code = e.code()
        # UNAVAILABLE is either no coordinator, or one whose state store cannot write (it says so).
        store_failed = code == grpc.StatusCode.UNAVAILABLE and (e.details() or "").startswith("state store")
        detail = (e.details() if code != grpc.StatusCode.UNAVAILABLE or store_failed
                  else f"coordinator {address} is unreachable")
        if code == grpc.StatusCode.UNAVAILABLE and tls is not None and not store_failed:
            detail += " or refused this certificate (TLS handshake)"
        print(f"vnodectl: error: {detail}", file=sys.stderr)
        return _EXIT_OF_STATUS.get(code, EXIT_FAILED)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
