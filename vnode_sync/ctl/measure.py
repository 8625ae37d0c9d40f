"""`vnodectl measure-capacity NODE`: measure, on the storage node itself, each of its devices'
sustained sequential read and write rate (vnode_sync.kernel.disk_rate) and, with --apply, set them
as the node's capacities (SetStorageNode); without, print them only.

A vnodectl command rather than the agent's: it needs an admin's identity to set capacities (an
agent's certificate may only register and report), and it runs once, by hand, when a node is
added or its disks change, not in the agent's reconcile loop. It reads each device and writes under
its mount point (or --write-dir), so it runs on the node, as a user that may do both (root).
"""

import argparse

from vnode_sync.ctl.tables import mb, render
from vnode_sync.errors import InvalidArgument, NotFound
from vnode_sync.kernel.devices import device_number
from vnode_sync.kernel.disk_rate import checked_seconds, mount_point, read_rate, write_rate
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc

DEFAULT_SECONDS = 3.0


def _seconds_arg(value: str) -> float:
    try:
        return checked_seconds(float(value))
    except (ValueError, InvalidArgument) as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def _write_dir_arg(value: str) -> tuple[str, str]:
    device, sep, directory = value.partition("=")
    if not sep or not device or not directory:
        raise argparse.ArgumentTypeError(f"invalid --write-dir {value!r}: use DEVICE=DIR, e.g. /dev/sdb=/data/1/dfs")
    return device, directory


def add_measure_command(sub) -> None:
    p = sub.add_parser("measure-capacity", help="measure a storage node's devices (run on that node); "
                                                "--apply sets them as its capacities")
    p.add_argument("node", help="the storage node's id, as the coordinator lists it")
    p.add_argument("--device", action="append", default=[], help="only this device of the node (repeatable)")
    p.add_argument("--write-dir", action="append", default=[], type=_write_dir_arg, metavar="DEVICE=DIR",
                   help="write the test file here, on DEVICE (default: the device's mount point)")
    p.add_argument("--seconds", type=_seconds_arg, default=DEFAULT_SECONDS,
                   help=f"measure each direction of each device this long (default {DEFAULT_SECONDS:g})")
    p.add_argument("--apply", action="store_true", help="set the measured rates as the node's capacities")


def _devices_to_measure(args, node: pb.StorageNode) -> list[pb.Device]:
    known = {d.name: d for d in node.devices}
    for name in args.device:
        if name not in known:
            raise NotFound(f"storage node {node.node_id!r} has no device {name!r} (it has: {', '.join(known)})")
    for name, _ in args.write_dir:
        if name not in known:
            raise NotFound(f"--write-dir names {name!r}, not a device of storage node {node.node_id!r}")
    return [known[name] for name in args.device] if args.device else list(node.devices)


def measure(device: str, write_dir: str | None, seconds: float) -> pb.Device:
    directory = write_dir or mount_point(device_number(device))
    read, write = read_rate(device, seconds), write_rate(directory, seconds)
    for what, rate in (("read", read), ("write", write)):
        if rate.bps <= 0:
            raise NotFound(f"{device}: nothing could be {what} in {seconds:g} s (too small a device?)")
    return pb.Device(name=device, read_bps=read.bps, write_bps=write.bps)


def run_measure(args, stub: pb_grpc.AdminStub, timeout: float) -> None:
    nodes = {n.node_id: n for n in stub.ListNodes(pb.ListNodesRequest(), timeout=timeout).nodes}
    node = nodes.get(args.node)
    if node is None:
        raise NotFound(f"unknown storage node {args.node!r} (the coordinator lists: {', '.join(nodes) or 'none'})")
    devices = _devices_to_measure(args, node)
    write_dirs = dict(args.write_dir)
    measured = [measure(d.name, write_dirs.get(d.name), args.seconds) for d in devices]
    before = {d.name: d for d in node.devices}
    print(render(["DEVICE", "READ_MB/s", "WRITE_MB/s", "SET_NOW_RD_MB/s", "SET_NOW_WR_MB/s"],
                 [[m.name, mb(m.read_bps), mb(m.write_bps), mb(before[m.name].read_bps), mb(before[m.name].write_bps)]
                  for m in measured]))
    if not args.apply:
        print(f"dry run: nothing set (sequential, one request at a time, {args.seconds:g} s each); "
              "--apply sets these as the node's capacities")
        return
    change = stub.SetStorageNode(pb.SetStorageNodeRequest(node_id=node.node_id, devices=measured), timeout=timeout)
    print(f"set {node.node_id}'s capacities (generation {change.generation})"
          + (f"; {change.pending}" if change.pending else ""))
