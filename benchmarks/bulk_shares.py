"""Bulk transfers on a real HDFS with Hadoop's FsShell: the split while both users move data, how soon an
idle user's share is lent and taken back, under static caps, the rate re-setting loop, per-packet
weights, and per-packet weights with the coordinator stopped, in one run.

    sudo .venv/bin/python -m benchmarks.bulk_shares [--direction write|read] [--disk-mbps 60]
        [--configured-mbps 50] [--file-mb 1500] [--queue nr_requests=4,...] [--trace FILE]
        [--ext4-options nodelalloc] [--warm-up]

Two DataNodes, each on a paced disk of --disk-mbps (reads and writes: DiskModel.streaming), that
bandwidth configured (or --configured-mbps), the DataNode-side backend (the Java agent in each
DataNode); alice (priority 8) and bob (4) are Unix users. Writes: `hdfs dfs -put` of a local file
each, replication 2, so both DataNodes take every byte of both. Reads: Hadoop's client library
re-reads a file each, from the disk (its blocks are kept out of the page cache). Rates are taken two
ways: the Java agent's counters on each DataNode, and the client's own (/proc/PID/io rchar of the
FsShell or reader JVM: the local file read by -put, the socket read by the reader).

Per policy: both run (split over 8 s: the ratio of the means, and the median of the ratios of the
half-seconds where both moved, as the agents count and as the clients see it: a write pipeline
changing blocks stalls both for a moment every few seconds; and how long each user waited in the
DataNode's scheduler, with the split over the half-seconds where both were held there: where a user
is not held, its client or pipeline sets its pace and its share is rightly lent); bob stops (seconds until alice has 90 % of every DataNode,
a 0.5 s sliding window sampled every 50 ms; and until she has 90 % of her own pace alone on every DataNode, her
rate over the last 2 of the LEND_SECONDS recorded: a single writer's pipeline may not fill a node, and then 90 % of
the node says more of the client than of the lending); bob starts again (from his first bytes on both
DataNodes, seconds until he has 90 % of his weighted share of what the node shares: what its busiest
volume moved over its last interval as the Java agent reports it, or --disk-mbps before any moved).
"""

import argparse
import contextlib
import os
import shutil
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator

from benchmarks.disk_warm_up import HEADER_NOTE as WARM_UP_NOTE, add_warm_up_option, warm_up_disks
from benchmarks.interactive_shares import add_ext4_options_option, key_values
from benchmarks.policy_names import policy_list
from testbed.cpu_priority import cpu_priority
from testbed.hdfs_cluster import HdfsCluster, datanode_throttle_jar
from testbed.local_cluster import LocalCluster, LocalNode, LocalUser
from testbed.loopdev import ext4_mount_options, queue_settings
from testbed.names import unique_name
from testbed.process_cpu import CpuSpan, cluster_roles, compact
from testbed.processes import exit_once_on_signals
from testbed.share_watch import (CacheDropper, ClientBytes, block_files, first_at_least, interval_rates, mean_rates,
                                 sampled, seconds_until, steady_ratio, tail_rates)
from testbed.unix_users import local_users
from vnode_sync.datanode.channel import ThrottleChannel

MB = 1_000_000
MiB = 1 << 20
POLICIES = ("static", "wc-rates", "wc-weights", "coordinator stopped")   # the last: wc-weights, then stopped
REPORT_SECONDS, CONTROL_SECONDS = 0.25, 0.5
LEND_SECONDS = 8.0
TRACE_SECONDS = 0.5
# A user's threads on a DataNode that waited in its scheduler this part of an interval were held there
# (backlogged at the edge) rather than paced by their client or pipeline.
HELD_FRACTION = 0.5


class Run:
    def __init__(self, hdfs: HdfsCluster, users: dict[str, LocalUser], direction: str, bw: float, sources: dict):
        """`users`: role ("alice", "bob") -> the Unix user playing it."""
        self.hdfs, self.users, self.direction, self.bw, self.sources = hdfs, users, direction, bw, sources
        self.channels = {dn.id: ThrottleChannel(hdfs.throttle_socket(dn)) for dn in hdfs.datanodes}
        self.clients: dict[str, subprocess.Popen] = {}
        self.client_bytes: dict[str, ClientBytes] = {}
        self.serial = 0

    def counted(self) -> dict[tuple[str, str], int]:
        """(DataNode, role) -> bytes the Java agent counted for that role's user."""
        return {key: counters["bytes"] for key, counters in self.counters().items()}

    def counters(self) -> dict[tuple[str, str], dict[str, int]]:
        """(DataNode, role) -> that role's user's bytes and scheduler waits (ns) in this direction, from
        one STATS per DataNode."""
        out = {}
        for dn, channel in self.channels.items():
            users = channel.stats().users
            for role, user in self.users.items():
                counters = users.get(user.name)
                out[(dn, role)] = {field: getattr(counters, f"{self.direction}_{field}") if counters else 0
                                   for field in ("bytes", "wait_ns")}
        return out

    def of(self, name: str):
        return lambda: {dn: v for (dn, u), v in self.counted().items() if u == name}

    def rate_share(self) -> float:
        """What the DataNodes share now (the least of each one's busiest volume's last interval), or the
        configured bandwidth before any moved."""
        moved = [max((q.moved_bytes_per_second for q in c.stats().volumes), default=0.0)
                 for c in self.channels.values()]
        return min(moved) if moved and min(moved) > 0 else self.bw

    def start(self, name: str) -> None:
        user = self.users[name]
        self.serial += 1
        if self.direction == "write":
            client = self.hdfs.start_shell("-put", "-f", self.sources[name], f"/{user.name}/bulk-{self.serial}.bin",
                                           as_uid=user.uid, hdfs_user=user.name)
        else:
            client = self.hdfs.start_read(f"/{user.name}/bulk.bin", as_uid=user.uid, hdfs_user=user.name,
                                          seconds=3600)
        self.clients[name], self.client_bytes[name] = client, ClientBytes(client.pid, "rchar")

    def stop(self, name: str) -> None:
        client = self.clients.pop(name, None)
        if client is not None:
            client.kill()
            client.wait()

    def wait_moving(self, names: list[str], timeout: float = 90) -> None:
        start = self.counted()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            time.sleep(0.02)
            now = self.counted()
            if all(now[(dn, n)] > start[(dn, n)] for dn in self.channels for n in names):
                return
        raise RuntimeError(f"{names} did not move bytes on every DataNode within {timeout} s")

    def scenario(self) -> dict:
        out = {}
        self.start("alice")
        self.start("bob")
        self.wait_moving(["alice", "bob"])
        time.sleep(4)
        def sample() -> dict:
            counters = self.counters()
            return {**{("dn", k): c["bytes"] for k, c in counters.items()},
                    **{("wait", k): c["wait_ns"] / 1e9 for k, c in counters.items()},
                    **{("client", n): c() for n, c in self.client_bytes.items()}}
        intervals = interval_rates(sample, 8.0)
        out["split"] = {k: sum(i[k] for i in intervals) / len(intervals) for k in intervals[0] if k[0] != "wait"}
        out["waited"] = {k[1]: sum(i[k] for i in intervals) / len(intervals) for k in intervals[0] if k[0] == "wait"}
        out["both_held"] = both_held_ratio(intervals, list(self.channels))
        for side in ("dn", "client"):
            per_user = [{n: sum(v for k, v in i.items() if k[0] == side and (k[1] == n or k[1][1:] == (n,)))
                         for n in ("alice", "bob")} for i in intervals]
            out[f"median_{side}"] = steady_ratio(per_user, "alice", "bob", least=MB)[0]
        self.stop("bob")
        trace = sampled(self.of("alice"), LEND_SECONDS)
        out["lent"] = first_at_least(trace, 0.9 * self.bw)
        out["alice_alone_dn"] = tail_rates(trace, 2.0)
        out["lent_own"] = first_at_least(trace, {dn: 0.9 * rate for dn, rate in out["alice_alone_dn"].items()})
        out["alice_alone_client"] = mean_rates(lambda: {"alice": self.client_bytes["alice"]()}, 2.0)["alice"]
        self.start("bob")
        self.wait_moving(["bob"])
        share = self.rate_share() * 4 / 12
        out["share"] = share
        out["reclaimed"], out["reclaim_rates"] = seconds_until(self.of("bob"), 0.9 * share, within=8)
        time.sleep(1)
        out["after"] = mean_rates(lambda: {n: c() for n, c in self.client_bytes.items()}, 3.0)
        self.stop("alice")
        self.stop("bob")
        return out


def both_held_ratio(intervals: list[dict], datanodes: list[str]) -> tuple[float | None, int, int]:
    """alice/bob by the median over the (interval, DataNode)s where both users' threads there waited in
    the scheduler at least HELD_FRACTION of the interval (both backlogged at the edge, so the split is
    the scheduler's and not a client's pace); how many those were, of how many."""
    held = [{n: i[("dn", (dn, n))] for n in ("alice", "bob")} for i in intervals for dn in datanodes
            if min(i[("wait", (dn, "alice"))], i[("wait", (dn, "bob"))]) >= HELD_FRACTION]
    median, count = steady_ratio(held, "alice", "bob", least=MB)
    return median, count, len(intervals) * len(datanodes)


class Trace:
    """With --trace: one JSON line per TRACE_SECONDS (and the time `vnodectl status` takes) of what each
    DataNode counted per user (bytes and scheduler waits, the node's NODE line) and, while the
    coordinator answers, what it allocated each user on each node and took as its demand there; the
    agents' and coordinator's logs are kept in FILE.POLICY-logs/, so a run that goes wrong (a user
    starved) can be read afterwards."""

    def __init__(self, path: str, run: "Run", cluster: LocalCluster, policy: str):
        self.path, self.run, self.cluster, self.policy = path, run, cluster, policy
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, name="bulk-trace", daemon=True)

    def __enter__(self) -> "Trace":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join()
        logs = f"{self.path}.{self.policy.replace(' ', '').replace(',', '-')}-logs"
        os.makedirs(logs, exist_ok=True)
        for name in os.listdir(self.cluster.workdir):   # logs and configs; state files come and go under us
            if name.endswith((".log", ".yaml")):
                shutil.copy(os.path.join(self.cluster.workdir, name), logs)

    def _sample(self) -> None:
        started = time.monotonic()
        with open(self.path, "a") as out:
            while not self.done.wait(TRACE_SECONDS):
                line = {"policy": self.policy, "t": round(time.monotonic() - started, 2), "dn": {}}
                for dn, channel in self.run.channels.items():
                    try:
                        stats = channel.stats()
                    except Exception as e:   # a DataNode busy or gone: the line says so
                        line["dn"][dn] = str(e)
                        continue
                    line["dn"][dn] = {"node": stats.node, "users": {
                        role: vars(stats.users[u.name]) for role, u in self.run.users.items() if u.name in stats.users}}
                if self.cluster.coordinator is not None and self.cluster.coordinator.poll() is None:
                    try:
                        line["given"] = {u["name"]: u.get("nodes") for u in self.cluster.status()["users"]}
                    except Exception as e:
                        line["given"] = str(e)
                out.write(json.dumps(line) + "\n")
                out.flush()


@contextlib.contextmanager
def governed(hdfs: HdfsCluster, name: str, users: list[LocalUser], policy: str, bw: int,
             cpu_shares: bool = True) -> Iterator[LocalCluster]:
    """POLICY in force on every DataNode; CPU_SHARES: transfer threads in per-user cpu groups too."""
    nodes = [LocalNode(dn.id, (dn.loop_device,), bw, bw, {"kind": "hdfs", "pid": dn.pid},
                       {"backend": "datanode-throttle",
                        "datanode_throttle": {"socket": hdfs.throttle_socket(dn),
                                              "sharing": "rates" if policy == "wc-rates" else "weights",
                                              "cpu_shares": cpu_shares}},
                       (f"{dn.host}:{dn.ports.data}",))
             for dn in hdfs.datanodes]
    settings = {"sharing": "static" if policy == "static" else "work-conserving", "control_seconds": CONTROL_SECONDS}
    with LocalCluster(f"{name}-{policy[:10].replace(' ', '').replace(',', '')}", users, nodes,
                      agent_settings={"report_seconds": REPORT_SECONDS},
                      coordinator_settings={"policy": settings}) as cluster:
        channels = [ThrottleChannel(hdfs.throttle_socket(dn)) for dn in hdfs.datanodes]
        cluster.wait_for(lambda: all({u.name for u in users} <= set(c.stats().users) for c in channels), 30,
                         "every user's share in every DataNode")
        if "stopped" in policy:
            cluster.stop_coordinator()
        yield cluster


def mbs(value: float) -> str:
    return f"{value / MB:5.1f}"


def report(results: dict, args, dns: list[str]) -> None:
    configured = f"{args.configured_mbps:.0f} MB/s configured" if args.configured_mbps else "= configured"
    print(f"\n{args.direction}s, 2 DataNodes on {args.disk_mbps:.0f} MB/s disks ({configured}), alice 8, bob 4; "
          f"rates from the Java agent (per DataNode) and the clients (rchar); lend: alice to 90 % of "
          f"{args.configured_mbps or args.disk_mbps:.0f} MB/s on every DataNode, and to 90 % of her own pace alone (the least DataNode's "
          f"over the last 2 of {LEND_SECONDS:.0f} s after bob stopped); reclaim: bob to 90 % of 4/12 of what the node shares; coord/agents: "
          f"the CPU vnode-sync's coordinator and agents took over the scenario, % of one core; waited: the part of the "
          f"8 s each user's threads waited in the DataNode's scheduler (mean of the DataNodes; 100 % = one thread "
          f"always waiting); both held: alice/bob by the median over the half-seconds and DataNodes where both waited "
          f"at least {HELD_FRACTION:.0%} (the scheduler's split while both are backlogged at the edge), how many of all")
    print(f"{'policy':<32} | {'both: alice / bob per DN (MB/s)':<34} | {'client a/b':>11} | {'ratio':>5} | "
          f"{'median dn/cl':>12} | {'lend s':>6} | {'to own':>6} | {'reclaim s':>9} | {'alice alone dn / client':>23} | "
          f"{'coord/agents':>13} | {'waited a/b':>10} | {'both held':>14}")
    for policy, r in results.items():
        split = r["split"]
        per_dn = ", ".join(f"{mbs(split[('dn', (dn, 'alice'))])}/{mbs(split[('dn', (dn, 'bob'))])}" for dn in dns)
        a = sum(split[("dn", (dn, "alice"))] for dn in dns)
        b = sum(split[("dn", (dn, "bob"))] for dn in dns)
        client = f"{mbs(split[('client', 'alice')])}/{mbs(split[('client', 'bob')])}"
        lent = f"{r['lent']:.2f}" if r["lent"] is not None else "never"
        lent_own = f"{r['lent_own']:.2f}" if r["lent_own"] is not None else "never"
        alone = f"{mbs(min(r['alice_alone_dn'].values()))} / {mbs(r['alice_alone_client'])}"
        reclaimed = f"{r['reclaimed']:.2f}" if r["reclaimed"] is not None else "never"
        medians = "/".join(f"{r[f'median_{side}']:.2f}" if r[f"median_{side}"] else "-" for side in ("dn", "client"))
        waited = "/".join(f"{100 * sum(r['waited'][(dn, n)] for dn in dns) / len(dns):.0f}" for n in ("alice", "bob"))
        median, count, of = r["both_held"]
        held = f"{median:.2f} ({count}/{of})" if median else f"- ({count}/{of})"
        print(f"{policy:<32} | {per_dn:<34} | {client:>11} | {a / b:5.2f} | {medians:>12} | {lent:>6} | {lent_own:>6} | "
              f"{reclaimed:>9} | {alone:>23} | {compact(r['control_cpu']):>13} | {waited + ' %':>10} | {held:>14}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--direction", choices=("write", "read"), default="write")
    parser.add_argument("--disk-mbps", type=float, default=60.0)
    parser.add_argument("--configured-mbps", type=float, default=None,
                        help="the bandwidth the coordinator is given for each DataNode (default: --disk-mbps)")
    parser.add_argument("--file-mb", type=int, default=1500, help="each user's file, MiB")
    parser.add_argument("--policies", type=lambda text: policy_list(text, POLICIES), default=list(POLICIES),
                        help=f"comma-separated, of {', '.join(POLICIES)} (run in that order)")
    parser.add_argument("--queue", type=key_values, default={},
                        help="every DataNode disk's block queue settings, e.g. nr_requests=4 (put back at the end)")
    parser.add_argument("--trace", metavar="FILE", help="every 0.5 s, each DataNode's counters and the coordinator's view to FILE (JSON lines); "
                        "the agents' and coordinator's logs to FILE.POLICY-logs/")
    add_ext4_options_option(parser)
    add_warm_up_option(parser)
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("bulk_shares: needs root (cgroups, loop devices, FUSE, Unix users)", file=sys.stderr)
        return 2
    exit_once_on_signals()   # a kill or Ctrl-C, even twice, still unwinds every `with` and `finally` below
    started = time.monotonic()
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}; disk queue "
          f"{', '.join(f'{k}={v}' for k, v in args.queue.items()) or 'as the loop devices have it'}"
          + (f"; ext4 {ext4_mount_options(args.ext4_options)}" if args.ext4_options else "")
          + (f"; {WARM_UP_NOTE}" if args.warm_up else ""), flush=True)
    bw = int((args.configured_mbps or args.disk_mbps) * MB)
    source_dir = tempfile.mkdtemp(prefix=unique_name("bulk-src") + ".")
    results = {}
    try:
        os.chmod(source_dir, 0o755)
        with local_users("vsb", (8, 4), first_uid=64_751) as (alice, bob), cpu_priority(unique_name("bulk-cpu")), \
                HdfsCluster(unique_name("bulk"), datanodes=2, replication=2, disk_mb=8192,
                            disk="paced-rw", disk_read_mbps=args.disk_mbps,
                            hdfs_site={"dfs.block.access.token.enable": "true"},
                            datanode_throttle=datanode_throttle_jar(), ext4_options=args.ext4_options) as hdfs, \
                contextlib.ExitStack() as queues:
            for dn in hdfs.datanodes:
                queues.enter_context(queue_settings(dn.loop_device, args.queue))
            users = {"alice": alice, "bob": bob}
            sources = {}
            for role, user in users.items():
                path = os.path.join(source_dir, f"{role}.bin")
                with open(path, "wb") as f:
                    f.truncate(args.file_mb * MiB)   # sparse: the client reads zeros at memory speed
                os.chmod(path, 0o644)
                sources[role] = path
                if args.direction == "read":
                    hdfs.write_file(f"/{user.name}/bulk.bin", args.file_mb * MiB, as_uid=user.uid,
                                    hdfs_user=user.name)
            read_blocks = block_files(hdfs) if args.direction == "read" else set()
            if args.warm_up:
                print(f"warm-up file written at {warm_up_disks(hdfs, bob.uid, bob.name):.1f} MB/s and deleted",
                      flush=True)
            for user in users.values():
                hdfs.shell("-mkdir", "-p", f"/{user.name}", hdfs_user=user.name)   # -put makes no parent
            for policy in args.policies:
                with governed(hdfs, unique_name("bulkc"), list(users.values()), policy, bw) as cluster, \
                        CacheDropper(read_blocks):
                    run = Run(hdfs, users, args.direction, bw, sources)
                    try:
                        with Trace(args.trace, run, cluster, policy) if args.trace else contextlib.nullcontext(), \
                                CpuSpan(cluster_roles(cluster)) as cpu:
                            r = run.scenario()
                    finally:
                        for name in list(run.clients):
                            run.stop(name)
                    r["control_cpu"] = cpu.shares
                results[policy] = r
                print(f"[{time.monotonic() - started:.0f} s] {policy}: {r}", flush=True)
            dns = [dn.id for dn in hdfs.datanodes]
    finally:
        shutil.rmtree(source_dir, ignore_errors=True)
    report(results, args, dns)
    print(f"\nran {time.monotonic() - started:.0f} s; load average at end: "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
