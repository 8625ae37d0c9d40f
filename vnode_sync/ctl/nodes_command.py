"""`vnodectl nodes add|set|remove`: storage nodes and their devices' capacities, changed while the
coordinator serves (coordinator/commands/nodes.py); `vnodectl nodes` alone lists them."""

import argparse

from vnode_sync import validation
from vnode_sync.ctl.tables import mb
from vnode_sync.errors import InvalidArgument
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc

DEVICE_FORM = "DEVICE:READ:WRITE, e.g. /dev/sdb:180MB/s:150MB/s"


def capacity(value: str, what: str) -> int:
    """A device's capacity: a rate above 0 (validation.rate's units; at most 1 TB/s)."""
    try:
        bps = validation.rate(value, what)
    except InvalidArgument:
        bps = 0
    if bps <= 0:
        raise InvalidArgument(f"invalid {what} {value!r}: use bytes/s above 0, at most 1TB/s, like 180MB/s or 1.2GB/s")
    return bps


def device_arg(value: str) -> pb.Device:
    """DEVICE:READ:WRITE (the device path holds no ':'; the rates none either)."""
    parts = value.rsplit(":", 2)
    if len(parts) != 3 or not parts[0]:
        raise argparse.ArgumentTypeError(f"invalid device {value!r}: use {DEVICE_FORM}")
    name, read, write = parts
    try:
        return pb.Device(name=name, read_bps=capacity(read, f"read capacity of {name}"),
                         write_bps=capacity(write, f"write capacity of {name}"))
    except InvalidArgument as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def node_arg(value: str) -> str:
    try:
        return validation.node_id(value)
    except InvalidArgument as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def add_node_actions(nodes: argparse.ArgumentParser, parser_class: type[argparse.ArgumentParser]) -> None:
    """`nodes add|set|remove` under the `nodes` command (which lists the nodes without one)."""
    actions = nodes.add_subparsers(dest="node_action", parser_class=parser_class)
    p = actions.add_parser("add", help="add a storage node (its agent may then register)")
    p.add_argument("node", type=node_arg)
    p.add_argument("--device", type=device_arg, action="append", required=True, metavar="DEVICE:READ:WRITE",
                   help=f"a data device and its capacities, bytes/s (repeat for each): {DEVICE_FORM}")
    p.add_argument("--endpoint", action="append", default=[],
                   help="where clients reach its file system service (address:port; repeatable)")
    p = actions.add_parser("set", help="change a storage node's devices or their capacities")
    p.add_argument("node", type=node_arg)
    p.add_argument("--device", type=device_arg, action="append", default=[], metavar="DEVICE:READ:WRITE",
                   help="set this device's capacities (a new device is added); repeatable")
    p.add_argument("--remove-device", action="append", default=[], metavar="DEVICE", help="drop a device")
    p.add_argument("--endpoint", action="append", default=None,
                   help="replace the node's endpoints with these (repeatable)")
    p = actions.add_parser("remove", help="remove a storage node (its agent's streams end)")
    p.add_argument("node", type=node_arg)


def _change_line(verb: str, change: pb.StorageNodeChange) -> str:
    node = change.node
    devices = ", ".join(f"{d.name}({mb(d.read_bps)}/{mb(d.write_bps)} MB/s)" for d in node.devices)
    line = f"{verb} {node.node_id}: {devices} (generation {change.generation})"
    return f"{line}; {change.pending}" if change.pending else line


def run_node_action(args, stub: pb_grpc.AdminStub, timeout: float) -> str:
    """The action's one line of output."""
    if args.node_action == "add":
        request = pb.StorageNodeSpec(node_id=args.node, devices=args.device, endpoints=args.endpoint)
        return _change_line("added", stub.AddStorageNode(request, timeout=timeout))
    if args.node_action == "set":
        if not (args.device or args.remove_device or args.endpoint is not None):
            raise InvalidArgument("nodes set: nothing to change: give --device, --remove-device or --endpoint")
        request = pb.SetStorageNodeRequest(node_id=args.node, devices=args.device, remove_devices=args.remove_device,
                                           endpoints=args.endpoint or [], replace_endpoints=args.endpoint is not None)
        return _change_line("set", stub.SetStorageNode(request, timeout=timeout))
    change = stub.RemoveStorageNode(pb.StorageNodeRequest(node_id=args.node), timeout=timeout)
    return _change_line("removed", change)
