"""Command line of the HDFS testbed (see the package docstring)."""

import argparse
import json
import os
import sys
from dataclasses import asdict

from testbed import leftovers
from vnode_sync import logs
from vnode_sync.errors import VNodeSyncError
from testbed.hdfs_cluster.cluster import (DISK_KINDS, PACED_READ_MBPS, STATE_FILE, WORKDIR_PREFIX, HdfsCluster,
                                          _marked_processes, default_workdir, take_down)
from testbed.hdfs_cluster.runtime import HADOOP_VERSION, JvmSettings


def _workdir(args: argparse.Namespace) -> str:
    return os.path.abspath(args.workdir) if args.workdir else default_workdir(args.name)


def _main_class(cmdline: list[str]) -> str:
    return cmdline[cmdline.index("-cp") + 2] if "-cp" in cmdline[:-2] else " ".join(cmdline)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testbed.hdfs_cluster",
                                     description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    def named(command: str, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(command, help=help_text)
        where = sub.add_mutually_exclusive_group(required=True)
        where.add_argument("--name")
        where.add_argument("--workdir", help=f"default /tmp/{WORKDIR_PREFIX}.NAME")
        return sub

    up = named("up", "start a cluster and leave it running")
    up.add_argument("--datanodes", type=int, default=2)
    up.add_argument("--disk-mb", type=int, default=1024, help="size of each DataNode's disk")
    up.add_argument("--disk", choices=DISK_KINDS, default="loop",
                    help="loop: a file on the host disk behind a loop device; zram: a RAM block device; "
                         "paced: reads paced to --disk-read-mbps, like a real disk; paced-rw: writes too")
    up.add_argument("--disk-read-mbps", type=float, default=PACED_READ_MBPS, help="a paced disk's read rate, MB/s")
    up.add_argument("--replication", type=int, default=1)
    up.add_argument("--heap-mb", type=int, default=256)
    up.add_argument("--dual-stack", action="store_true", help="IPv4+IPv6 sockets (tcp6) instead of IPv4 only")
    up.add_argument("--full-jit", action="store_true", help="C1 and C2 compilers (slower start)")
    up.add_argument("--hadoop-version", help=f"a line of deploy/hadoop/lines.txt (default {HADOOP_VERSION}, "
                                               "or $VNODE_SYNC_HADOOP_VERSION)")
    up.add_argument("--kerberos", action="store_true",
                    help="secure HDFS: a KDC of its own, Kerberos, block tokens, SASL privacy, SPNEGO")
    up.add_argument("--short-circuit", action="store_true",
                    help="short-circuit local reads through a domain socket (loads libhadoop.so)")
    up.add_argument("--datanode-java-home", metavar="DIR",
                    help="the Java runtime the DataNodes run on (e.g. /usr/lib/jvm/java-11-openjdk-amd64); "
                         "the NameNode and clients use java from PATH")
    up.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra hdfs-site property")
    named("down", "stop a cluster started by `up`, even if that process died")
    add_user = named("add-user", "secure cluster: principal USER@REALM, its keytab and ticket cache, owned by --uid")
    add_user.add_argument("user")
    add_user.add_argument("--uid", type=int, required=True)
    named("status", "print the state file and which daemons run")
    restart = named("restart-datanode", "restart one DataNode as Hadoop's launcher does: its conf dir's hadoop-env.sh "
                                        "(JAVA_HOME, HDFS_DATANODE_OPTS) read; returns once the JVM is started")
    restart.add_argument("datanode", help="its id, e.g. dn0")
    write = named("write", "write a file of SIZE bytes streamed from memory")
    write.add_argument("path")
    write.add_argument("--size-mb", type=int, required=True)
    read = named("read", "read a file through the native client and print the rate")
    read.add_argument("path")
    read.add_argument("--seconds", type=float, default=0)
    for sub in (write, read):
        sub.add_argument("--as-uid", type=int)
        sub.add_argument("--hdfs-user")
    stale = commands.add_parser("cleanup-stale", help="remove every leftover whose path contains PREFIX")
    stale.add_argument("--prefix", default=WORKDIR_PREFIX)
    stale.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    logs.configure("hdfs-testbed")
    try:
        return _run(args)
    except VNodeSyncError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    if args.command == "cleanup-stale":
        found = [item for item in leftovers.find(args.prefix) if item.run.startswith(WORKDIR_PREFIX) and not item.live]
        if not args.dry_run:
            leftovers.remove(found)
        for item in found:
            print(("would remove " if args.dry_run else "removed ") + str(item))
        return 0
    workdir = _workdir(args)
    if args.command == "up":
        jvm = JvmSettings(args.heap_mb, quick_jit=not args.full_jit, ipv4_stack=not args.dual_stack)
        cluster = HdfsCluster(args.name or os.path.basename(workdir), workdir, args.datanodes, args.disk_mb,
                              args.replication, jvm, dict(item.split("=", 1) for item in args.set), disk=args.disk,
                              disk_read_mbps=args.disk_read_mbps, hadoop_version=args.hadoop_version,
                              kerberos=args.kerberos, short_circuit=args.short_circuit,
                              datanode_java_home=args.datanode_java_home)
        cluster.start()
        print(f"HDFS {cluster.runtime.version} up in {cluster.startup_seconds} s: {cluster.namenode_uri}, "
              f"http {cluster.namenode.http_address}, state {cluster.state_path}")
        for dn in cluster.datanodes:
            print(f"  {dn.id}: pid {dn.pid}, {dn.loop_device} ({dn.device_number}), data {dn.xfer_address}")
        return 0
    if args.command == "down":
        if os.path.exists(os.path.join(workdir, STATE_FILE)):
            HdfsCluster.attach(workdir).stop()
        else:
            take_down(workdir)
        return 0
    cluster = HdfsCluster.attach(workdir)
    if args.command == "status":
        with open(cluster.state_path) as f:
            state = json.load(f)
        state["running"] = {str(p.pid): _main_class(p.cmdline()) for p in _marked_processes(workdir)}
        print(json.dumps(state, indent=2))
    elif args.command == "restart-datanode":
        dn = cluster.restart_datanode_as_hadoop(args.datanode)
        print(f"{dn.id}: pid {dn.pid}")
    elif args.command == "add-user":
        cluster.add_user(args.user, args.uid)
        print(f"{args.user}@{cluster.kerberos.realm}: ticket cache {cluster.kerberos.ccache(args.user)}")
    elif args.command == "write":
        print(json.dumps(asdict(cluster.write_file(args.path, args.size_mb << 20, args.as_uid, args.hdfs_user))))
    elif args.command == "read":
        print(json.dumps(asdict(cluster.read_file(args.path, args.as_uid, args.hdfs_user, args.seconds))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
