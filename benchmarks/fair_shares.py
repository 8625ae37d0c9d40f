"""Work-conserving, cluster-wide weighted max-min vs Algorithm 1's static caps, in the same run.

    sudo .venv/bin/python -m benchmarks.fair_shares [--disk-mbps 60] [--steady-seconds 30] [--fig6-rounds 5]

A real HDFS (NameNode and 2 DataNode JVMs), each DataNode on a paced disk serving reads at
--disk-mbps (60 MB/s), the coordinator configured with the same node BW, one storage agent per
DataNode (blkio-v1: the agents capture each DataNode's DataXceiver threads into the users'
VNodes and write the throttles), and readers through Hadoop's own client library (a
DistributedFileSystem from hadoop-hdfs-client 3.4.2 in a small Java main,
testbed/hdfs_cluster/VnodeSyncHdfsStream.java; one JVM per reader, reading its file once; files
are dropped from the page cache before readers start, so they read the disk). Every scenario
runs under the static policy and then under the work-conserving one, on the same HDFS and
files. Rates are what the kernel charged to each user's VNode on each DataNode's disk,
sampled every 0.25 s; each policy's section also prints the throttle an agent wrote.

Scenarios (the issue's list):
- steady: alice (priority 8) and bob (4) read from both DataNodes for --steady-seconds; each
  user's rate per second, its coefficient of variation, and allocation updates/s per node.
- lending: bob's readers stop; how soon alice has >= 90 % of each node's BW, and her rate 3-6 s after.
- reclaim: bob's readers start again; from bob's first bytes, how soon he has 90 % of his weighted share.
- skew: alice reads dn0 only, bob both; each user's total against the cluster-wide weighted
  max-min, found here by brute force over alice's part of dn0 (not by the coordinator's code).
- reservation: three priority-8 users saturate dn0, a priority-2 user with a 15 MB/s reservation reads too.
- fig6: a priority-50 reader reads 256 MiB alone --fig6-rounds times, then as often against two
  priority-1 background readers; the median of its contended times against the median alone, and
  what the background readers get of the BW it leaves while it runs (from its launch to its exit,
  and, stricter, from the first to the last byte the kernel charged it).
"""

import argparse
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Iterator

from vnode_sync.kernel.backend import vnode_name
from testbed.cpu_priority import cpu_priority
from testbed.hdfs_cluster import HdfsCluster
from testbed.hdfs_cluster.daemons import Transfer
from testbed.hdfs_vnode_cluster import node_vnodes, vnode_usage
from testbed.local_cluster import LocalCluster, LocalNode, LocalUser
from testbed.names import unique_name
from testbed.processes import exit_once_on_signals

MB = 1_000_000
MiB = 1 << 20
SAMPLE_SECONDS = 0.25
# Agents report usage every 0.25 s (default 1 s) and the control loop ticks every 0.5 s (default 1 s),
# both policies alike: an interactive reader of a few seconds must get its share in a fraction of that.
REPORT_SECONDS = 0.25
CONTROL_SECONDS = 0.5
POLICIES = ("static", "work-conserving")
FIG6_ROUNDS = 5

USERS = [LocalUser("alice", 64_701, 8, False), LocalUser("bob", 64_702, 4, False),
         LocalUser("carol", 64_703, 8, False), LocalUser("dave", 64_704, 8, False),
         LocalUser("frank", 64_705, 8, False), LocalUser("erin", 64_706, 2, False),
         LocalUser("ivy", 64_707, 50, False), LocalUser("bg1", 64_708, 1, False),
         LocalUser("bg2", 64_709, 1, False)]
UID = {u.name: u.uid for u in USERS}


def skew_max_min(capacity: float, weights: dict[str, float], step: float = 0.01 * MB) -> dict[str, float]:
    """alice (dn0 only) and bob (dn0 and dn1), each node `capacity`: the weighted max-min of their totals,
    by brute force over alice's part of dn0 (bob takes the rest of dn0 and all of dn1)."""
    best, best_key = None, None
    for i in range(int(capacity / step) + 1):
        totals = {"alice": i * step, "bob": capacity - i * step + capacity}
        key = sorted(totals[u] / weights[u] for u in totals)   # lexicographic max-min
        if best_key is None or key > best_key:
            best, best_key = totals, key
    return best


class Rates:
    """Per (user, DataNode) bytes charged by the kernel, sampled on demand."""

    def __init__(self, hdfs: HdfsCluster, cluster: LocalCluster):
        self.hdfs, self.cluster = hdfs, cluster

    def counters(self, users: list[str]) -> dict[tuple[str, str], int]:
        return {(u, dn.id): vnode_usage(self.cluster, dn, vnode_name(u)).read_bytes
                for u in users for dn in self.hdfs.datanodes}

    def series(self, users: list[str], seconds: float, until=None) -> list[tuple[float, dict]]:
        """[(t, {(user, dn): bytes/s over the last sample})], for `seconds` or until `until(series)`."""
        out, last, t_last = [], self.counters(users), time.monotonic()
        start = t_last
        while time.monotonic() - start < seconds:
            time.sleep(SAMPLE_SECONDS)
            now, t = self.counters(users), time.monotonic()
            out.append((t - start, {k: (now[k] - last[k]) / (t - t_last) for k in now}))
            last, t_last = now, t
            if until is not None and until(out):
                break
        return out

    def mean(self, users: list[str], seconds: float) -> dict[tuple[str, str], float]:
        before, t0 = self.counters(users), time.monotonic()
        time.sleep(seconds)
        after, t1 = self.counters(users), time.monotonic()
        return {k: (after[k] - before[k]) / (t1 - t0) for k in after}


def window(series, end_index: int, samples: int) -> dict:
    """Mean rates of the `samples` samples ending at `end_index`."""
    chunk = series[max(0, end_index - samples + 1):end_index + 1]
    return {k: sum(s[k] for _, s in chunk) / len(chunk) for k in chunk[0][1]}


class Bench:
    def __init__(self, hdfs: HdfsCluster, cluster: LocalCluster, policy: str, capacity: float):
        self.hdfs, self.cluster, self.policy, self.capacity = hdfs, cluster, policy, capacity
        self.rates = Rates(hdfs, cluster)
        self.readers: dict[str, list] = {}
        self.results: dict[str, object] = {}
        self.verbose = False

    def trace(self, rates: dict) -> None:
        """One line: each (user, node)'s measured MB/s and, under work-conserving, allocation and demand."""
        given = {}
        if self.policy == "work-conserving":
            for u in self.cluster.status()["users"]:
                for n in u["nodes"]:
                    if n.get("allocated_read_bps"):
                        demand = n["demand_read_bps"]
                        given[(u["name"], n["node_id"])] = (n["allocated_read_bps"] / MB,
                                                            "inf" if demand is None else f"{demand / MB:.1f}")
        print("  " + "  ".join(f"{u}@{dn} {v / MB:5.1f}" + (" [%.1f d=%s]" % given[(u, dn)] if (u, dn) in given else "")
                               for (u, dn), v in sorted(rates.items())), flush=True)

    def activate(self, names: list[str]) -> None:
        status = self.cluster.status()
        for user in status["users"]:
            want = user["name"] in names
            if user["active"] != want:
                self.cluster.vnodectl("activate" if want else "deactivate", user["name"])

    def start(self, user: str, dns: list[str]) -> None:
        """Readers that read their file once, from the disk (it is dropped from the page cache first)."""
        self.hdfs.evict_page_cache()
        for dn in dns:
            self.readers.setdefault(user, []).append(
                self.hdfs.start_read(f"/{user}/on-{dn}.bin", as_uid=UID[user], hdfs_user=user))

    def stop(self, user: str | None = None) -> None:
        for name in [user] if user else list(self.readers):
            for reader in self.readers.pop(name, []):
                reader.kill()
                reader.wait()

    def wait_reading(self, pairs: list[tuple[str, str]], timeout: float = 60) -> None:
        """Until every (user, dn) moves bytes: reader JVMs take seconds to start on 2 loaded cores."""
        users = sorted({u for u, _ in pairs})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rates = self.rates.mean(users, 0.5)
            if all(rates[p] > 0.5 * MB for p in pairs):
                return
        raise RuntimeError(f"{self.policy}: readers {pairs} did not all start reading within {timeout} s")

    # ---- scenarios -----------------------------------------------------------

    def steady_lending_reclaim(self, steady_seconds: float) -> None:
        dns = [dn.id for dn in self.hdfs.datanodes]
        self.activate(["alice", "bob"])
        self.start("alice", dns)
        self.start("bob", dns)
        self.wait_reading([(u, dn) for u in ("alice", "bob") for dn in dns])
        time.sleep(6)   # every reader past its start
        updates_before = self.updates()
        t0 = time.monotonic()
        per_second = []
        for _ in range(int(steady_seconds)):
            per_second.append(self.rates.mean(["alice", "bob"], 1.0))
            if self.verbose:
                self.trace(per_second[-1])
        elapsed = time.monotonic() - t0
        updates_after = self.updates()
        cv = {}
        for user in ("alice", "bob"):
            totals = [sum(v for (u, _), v in s.items() if u == user) for s in per_second]
            cv[user] = (statistics.pstdev(totals) / statistics.mean(totals), statistics.mean(totals))
        self.results["steady"] = {"cv": cv, "updates_per_s": {n: (updates_after[n] - updates_before[n]) / elapsed
                                                              for n in updates_after}}
        # lending
        self.stop("bob")
        series = self.rates.series(["alice"], 8.0)
        self.results["enforced"] = self.throttles("alice")
        lent_at = next((t for i, (t, _) in enumerate(series)
                        if all(v >= 0.9 * self.capacity for v in window(series, i, 2).values())), None)
        later = [s for t, s in series if 3.0 <= t <= 6.0]
        after = {dn: sum(s[("alice", dn)] for s in later) / len(later) for dn in dns}
        self.results["lending"] = {"seconds_to_90": lent_at, "alice_3_6s": after}
        # reclaim
        self.start("bob", dns)
        self.wait_first_bytes("bob", dns)
        share = self.capacity * 4 / 12
        series = self.rates.series(["alice", "bob"], 6.0)
        reached = next((t for i, (t, _) in enumerate(series)
                        if all(window(series, i, 2)[("bob", dn)] >= 0.9 * share for dn in dns)), None)
        later = [s for t, s in series if 2.0 <= t <= 5.0]
        self.results["reclaim"] = {"seconds_to_90": reached, "share": share,
                                   "bob_2_5s": {dn: sum(s[("bob", dn)] for s in later) / len(later) for dn in dns}}
        # What the counter counts: allocations pushed while shares moved (lending and reclaim).
        self.results["updates_moving"] = {n: after - updates_after[n] for n, after in self.updates().items()}
        self.stop()

    def updates(self) -> dict[str, int]:
        """Allocations the coordinator has pushed to each node since it started (vnodectl nodes --json)."""
        return {n["node_id"]: n.get("allocation_updates", 0) for n in self.cluster.status()["nodes"]}

    def throttles(self, user: str) -> dict[str, int]:
        """The read throttle (bytes/s) an agent wrote in `user`'s VNode on each DataNode's disk."""
        out = {}
        for dn in self.hdfs.datanodes:
            limits = node_vnodes(self.cluster, dn.id).limits(vnode_name(user))
            out[dn.id] = limits[dn.device_number].read_bps if dn.device_number in limits else 0
        return out

    def wait_first_bytes(self, user: str, dns: list[str], timeout: float = 60) -> None:
        """Until `user` moves bytes on every DataNode (its reader JVMs have started): the clock starts here."""
        start = self.rates.counters([user])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            time.sleep(0.05)
            now = self.rates.counters([user])
            if all(now[(user, dn)] > start[(user, dn)] for dn in dns):
                return
        raise RuntimeError(f"{user}'s readers did not start within {timeout} s")

    def skew(self) -> None:
        dns = [dn.id for dn in self.hdfs.datanodes]
        self.activate(["alice", "bob"])
        self.start("alice", dns[:1])
        self.start("bob", dns)
        self.wait_reading([("alice", dns[0])] + [("bob", dn) for dn in dns])
        time.sleep(4)
        rates = self.rates.mean(["alice", "bob"], 8.0)
        self.results["skew"] = {u: sum(v for (x, _), v in rates.items() if x == u) for u in ("alice", "bob")}
        self.stop()

    def reservation(self) -> None:
        dn = self.hdfs.datanodes[0].id
        users = ["carol", "dave", "frank", "erin"]
        self.activate(users)
        if self.policy == "work-conserving":   # the static policy has no floors: it refuses them
            self.cluster.vnodectl("set-reservation", "erin", "15MB/s")
        for user in users:
            self.start(user, [dn])
        self.wait_reading([(u, dn) for u in users])
        time.sleep(4)
        rates = self.rates.mean(users, 8.0)
        self.results["reservation"] = {u: rates[(u, dn)] for u in users}
        self.stop()
        self.cluster.vnodectl("set-reservation", "erin", "none")

    def fig6(self, rounds: int) -> None:
        dn = self.hdfs.datanodes[0].id
        self.activate(["ivy"])
        time.sleep(3)
        alone = [self.interactive_read(dn) for _ in range(rounds)]
        self.activate(["ivy", "bg1", "bg2"])
        for user in ("bg1", "bg2"):
            self.start(user, [dn])
        self.wait_reading([("bg1", dn), ("bg2", dn)])
        time.sleep(4)
        contended = [self.interactive_read(dn) for _ in range(rounds)]
        tail = self.rates.mean(["bg1", "bg2"], 5.0)     # after the interactive reader is done
        self.results["fig6"] = {"alone": alone, "contended": contended,
                                "background_after": sum(tail[(u, dn)] for u in ("bg1", "bg2"))}
        self.stop()

    def interactive_read(self, dn: str) -> dict:
        """ivy reads her file once from the disk; the kernel's counters are sampled every 0.05 s from her
        launch to her exit, so what everyone got is known over her run and over her transfer alone.
        Her time is the client's own (from its open to its last byte, JVM start excluded)."""
        users = ["ivy", "bg1", "bg2"]
        self.hdfs.evict_page_cache()
        samples = [(time.monotonic(), self.rates.counters(users))]
        reader = self.hdfs.start_read(f"/ivy/on-{dn}.bin", as_uid=UID["ivy"], hdfs_user="ivy")
        while reader.poll() is None:
            time.sleep(0.05)
            samples.append((time.monotonic(), self.rates.counters(users)))
        out, _ = reader.communicate(timeout=300)
        samples.append((time.monotonic(), self.rates.counters(users)))
        transfer = Transfer.parse(out)
        # Her transfer as the disk saw it: from the first to the last byte the kernel charged her.
        first, last = samples[0][1][("ivy", dn)], samples[-1][1][("ivy", dn)]
        begin = next(t0 for (t0, _), (_, c1) in zip(samples, samples[1:]) if c1[("ivy", dn)] > first)
        end = next(t for t, c in samples if c[("ivy", dn)] >= last)

        def moved(user: str, since: float, until: float) -> float:
            return _at(samples, until, (user, dn)) - _at(samples, since, (user, dn))

        record = {"seconds": transfer.seconds, "run_s": samples[-1][0] - samples[0][0]}
        for window, since, until in (("run", samples[0][0], samples[-1][0]), ("transfer", begin, end)):
            span = until - since
            ivy = moved("ivy", since, until)
            left = self.capacity * span - ivy
            background = moved("bg1", since, until) + moved("bg2", since, until)
            record[f"background_of_left_{window}"] = background / left if left > 0 else float("nan")
        time.sleep(3)   # ivy idle again (work-conserving: back at her probe) before the next round
        return record


def _at(samples: list[tuple[float, dict]], when: float, key) -> float:
    """A cumulative counter at `when`, linear between the samples around it."""
    for (t0, c0), (t1, c1) in zip(samples, samples[1:]):
        if t0 <= when <= t1:
            return c0[key] + (c1[key] - c0[key]) * ((when - t0) / (t1 - t0) if t1 > t0 else 0.0)
    return samples[0][1][key] if when < samples[0][0] else samples[-1][1][key]


# What each user's reader reads, once per scenario, MiB: enough for the longest scenario it is in at
# the most it can get (alice: 30 s steady at 40 + lending at 58 + reclaim at 40 MB/s, and slack; bg1 and
# bg2: about 30 MB/s between and after fig6's contended rounds).
FILE_MB = {"alice": 2600, "bob": 1300, "ivy": 256, "bg1": 1200, "bg2": 1200}


def write_files(hdfs: HdfsCluster, file_mb_scale: float) -> None:
    """alice and bob read from both DataNodes, everyone else from dn0 only."""
    for user in USERS:
        for dn in hdfs.datanodes if user.name in ("alice", "bob") else hdfs.datanodes[:1]:
            size = int(FILE_MB.get(user.name, 600) * file_mb_scale) * MiB
            hdfs.write_file(f"/{user.name}/on-{dn.id}.bin", size, as_uid=user.uid, hdfs_user=user.name,
                            on_datanode=dn)
    hdfs.evict_page_cache()


@contextlib.contextmanager
def governed(hdfs: HdfsCluster, name: str, policy: str, node_bw: int) -> Iterator[LocalCluster]:
    nodes = [LocalNode(dn.id, (dn.loop_device,), node_bw, node_bw, {"kind": "hdfs", "pid": dn.pid})
             for dn in hdfs.datanodes]
    settings = {"sharing": policy}
    if policy == "work-conserving":
        settings.update({"control_seconds": CONTROL_SECONDS})
    with LocalCluster(f"{name}-{policy[:2]}", USERS, nodes, agent_settings={"report_seconds": REPORT_SECONDS},
                      coordinator_settings={"policy": settings}) as cluster:
        yield cluster


def seconds(value: float | None, watched: float) -> str:
    return f"{value:.2f} s" if value is not None else f"never (watched {watched:.0f} s)"


def mbs(value: float) -> str:
    return f"{value / MB:5.1f}"


def report(results: dict[str, dict], capacity: float) -> None:
    print()
    print(f"node BW {capacity / MB:.0f} MB/s per DataNode, 2 DataNodes; rates from the VNodes' blkio counters; "
          f"agents report every {REPORT_SECONDS} s, control loop every {CONTROL_SECONDS} s")
    for policy, r in results.items():
        print(f"\n== {policy}")
        s = r["steady"]
        print("steady (alice 8, bob 4, both DataNodes): " + ", ".join(
            f"{u} {mbs(mean)} MB/s CV {cv * 100:.1f}%" for u, (cv, mean) in s["cv"].items())
            + "; allocation updates/s per node: " + ", ".join(f"{n} {v:.2f}" for n, v in s["updates_per_s"].items()))
        if policy == "work-conserving":
            print("  allocation updates pushed during lending and reclaim (14 s): "
                  + ", ".join(f"{n} {v}" for n, v in r["updates_moving"].items()))
        lend = r["lending"]
        share = min(lend["alice_3_6s"].values()) / capacity
        print(f"lending (bob idle): alice reaches 90% of every node in "
              f"{seconds(lend['seconds_to_90'], 8)}; 3-6 s after: "
              + ", ".join(f"{dn} {mbs(v)}" for dn, v in lend["alice_3_6s"].items()) + f" MB/s (min {share * 100:.0f}% of BW)")
        print("  alice's read throttle as the agents wrote it then: "
              + ", ".join(f"{dn} {mbs(v)} MB/s" for dn, v in r["enforced"].items()))
        rec = r["reclaim"]
        print(f"reclaim (bob back): bob reaches 90% of his share {mbs(rec['share'])} MB/s per node in "
              f"{seconds(rec['seconds_to_90'], 6)}; 2-5 s after: "
              + ", ".join(f"{dn} {mbs(v)}" for dn, v in rec["bob_2_5s"].items()) + " MB/s")
        sk = r["skew"]
        fair = skew_max_min(capacity, {"alice": 8, "bob": 4})
        print("skew (alice dn0 only, bob both): " + ", ".join(
            f"{u} {mbs(v)} MB/s ({(v / fair[u] - 1) * 100:+.0f}% vs max-min {mbs(fair[u])})" for u, v in sk.items()))
        res = r["reservation"]
        print("reservation (erin 2, 15 MB/s reserved; carol, dave, frank 8 on dn0): "
              + ", ".join(f"{u} {mbs(v)}" for u, v in res.items()) + " MB/s")
        f6 = r["fig6"]
        alone = statistics.median(x["seconds"] for x in f6["alone"])
        contended = statistics.median(x["seconds"] for x in f6["contended"])
        run = statistics.median(x["background_of_left_run"] for x in f6["contended"])
        during = statistics.median(x["background_of_left_transfer"] for x in f6["contended"])
        print(f"fig6 (ivy 50 vs bg1, bg2 1; medians of {len(f6['contended'])} reads): ivy {contended:.2f} s vs "
              f"{alone:.2f} s alone ({contended / alone:.2f}x); background got {run * 100:.0f}% of the BW ivy left "
              f"from her launch to her exit ({during * 100:.0f}% from her first to her last byte on disk); after ivy: "
              f"{mbs(f6['background_after'])} MB/s")
        print("  alone:     " + " ".join(f"{x['seconds']:.2f}" for x in f6["alone"]) + " s")
        print("  contended: " + " ".join(f"{x['seconds']:.2f}" for x in f6["contended"]) + " s; background of left "
              "(run/transfer): " + " ".join(f"{x['background_of_left_run'] * 100:.0f}/"
                                            f"{x['background_of_left_transfer'] * 100:.0f}%" for x in f6["contended"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--disk-mbps", type=float, default=60.0, help="paced disk read rate = node BW, MB/s")
    parser.add_argument("--steady-seconds", type=int, default=30)
    parser.add_argument("--fig6-rounds", type=int, default=FIG6_ROUNDS, help="interactive reads alone and contended")
    parser.add_argument("--file-scale", type=float, default=1.0, help="scale the files (for a short --steady-seconds)")
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--only", default="", help="comma-separated scenarios (steady,skew,reservation,fig6)")
    parser.add_argument("--verbose", action="store_true", help="print rates (and allocations) every second")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("fair_shares: needs root (cgroups, loop devices, FUSE)", file=sys.stderr)
        return 2
    exit_once_on_signals()   # a kill or Ctrl-C, even twice, still unwinds every `with` and `finally` below
    capacity = int(args.disk_mbps * MB)
    only = set(filter(None, args.only.split(",")))
    name = unique_name("fair")
    results: dict[str, dict] = {}
    started = time.monotonic()
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    # On a shared host, other work takes CPU only when this run leaves some (both policies alike).
    with cpu_priority(unique_name("fair-cpu")), \
            HdfsCluster(name, datanodes=2, disk_mb=12288, disk="paced", disk_read_mbps=args.disk_mbps) as hdfs:
        write_files(hdfs, args.file_scale)
        print(f"[{time.monotonic() - started:.0f} s] HDFS up, files written", flush=True)
        for policy in args.policies.split(","):
            with governed(hdfs, name, policy, capacity) as cluster:
                bench = Bench(hdfs, cluster, policy, capacity)
                bench.verbose = args.verbose
                try:
                    for scenario, run in (("steady", lambda: bench.steady_lending_reclaim(args.steady_seconds)),
                                          ("skew", bench.skew), ("reservation", bench.reservation),
                                          ("fig6", lambda: bench.fig6(args.fig6_rounds))):
                        if not only or scenario in only:
                            run()
                            print(f"[{time.monotonic() - started:.0f} s] {policy} {scenario} done", flush=True)
                finally:
                    bench.stop()
                results[policy] = bench.results
    if not only:
        report(results, capacity)
    print(f"\nran {time.monotonic() - started:.0f} s; load average at end: "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
