"""Drawn scenarios for the DataNode edge on a real HDFS: for each seed a mix of users, run under no
vnode-sync, static caps and work-conserving shares, interleaved on one cluster (issue 58, item 3).

    sudo .venv/bin/python -m benchmarks.edge_scenarios --seeds 0-11 --profile paced
        [--minutes-per-policy 0.7] [--json FILE] [--testbed-defaults]
    .venv/bin/python -m benchmarks.edge_scenarios --summarize FILE [--profile P]   # the report again, from --json's cells

The draw (`draw`, seeded): 2-6 users; weights 1-16, and in half the scenarios the first two users a
far-apart pair (1-2 beside 9-16); each user a bulk reader, bulk writer, interactive reader or
interactive writer (each equally likely; a scenario without a bulk user gets one, so every scenario
has a backlogged user to share with); an interactive user moves files of 1, 2, 4, ... 64 MiB
(log-uniform) with a gap drawn log-uniform in 0.2-5 s between them. The weight is the user's
priority at the coordinator (one DataNode: its local weight).

One DataNode with the Java agent (replication 1), the profile's disk, and the profile's configured
capacity given to the coordinator (static caps are Algorithm 1's of it; work-conserving shares use
it for ceilings only). Clients are Hadoop's: bulk writers `hdfs dfs -put` a sparse local file,
bulk readers re-read a 256 MiB file and interactive users move one file after another through the
HDFS client library in one JVM (testbed/hdfs_cluster/VnodeSyncHdfsStream.java `read`, `reads`,
`writes`); the DataNode loads Hadoop's native library as production DataNodes do (its read-ahead, and its
drop-behind keeping every re-read the disk's: dfs.datanode.drop.cache.behind.reads). Per cell (one policy of one
scenario): the users start together, WARM_UP_SECONDS pass, then the window: each interactive
transfer that started and ended in it (the client's own time, open to last byte or close), each
bulk user's client-side rate (/proc/PID/io rchar: the socket read, or the local file -put read),
the node's throughput (what the Java agent counted for every user and DEFAULT, reads and writes),
and the machine's steal (benchmarks.machine_sample).

Policies: none (no vnode-sync: an APPLY with no shares, every user DEFAULT, not scheduled), static
(allocation static: ceilings), wc (allocation work-conserving: the Java agent's weights, and each
transfer thread in its user's cpu group: docs/edge.md G10); on request (--policies) wc-nocpu, wc
without the cpu groups (the edge before them). The order rotates with the seed so that none of them
always runs first (benchmarks.scenario_runner.rotated).

--scenario KIND:WEIGHT,... runs one given scenario of bulk users instead of drawn ones (KIND
bulk-reader or bulk-writer), e.g. `--scenario bulk-reader:8,bulk-reader:4,bulk-reader:1`, once per
seed: there the seed only rotates the policies' order.

Judged (`judge`), per scenario: each interactive user's p50 and p99 against static's (target <= 1.2,
all <= 1.5); each backlogged user's rate against its weighted share of what the backlogged users
moved together (w_i / sum of their weights, target within 10 %; on a profile whose link binds, the
readers and the writers apart, since a link's two ways are two bottlenecks); the node's throughput against
none's (target >= 0.95); lend and reclaim times from the agent's per-user counters, sampled every
0.1 s (benchmarks.lend_reclaim, target 1 s).
An interactive miss is told apart by whether it is past the target beyond chance (the bootstrap
interval of its ratio, benchmarks.bootstrap).

Profiles (issue 58, item 2), with the docs' settings for hosts with interactive users (ext4
`nodelalloc`, the disk's queue at 4 requests, a turned-down close retried after 2 ms) unless
--testbed-defaults:
- paced: a paced disk (reads and writes from one queue, DiskModel.streaming) at 60 MB/s, 60 configured;
- paced-quarter / paced-4x: the same disk configured at 15 / 240 MB/s;
- hdd: the paced disk with a seek cost on each request that does not continue the last (DiskModel:
  a constant, not growing with the distance);
- three-dirs: three data dirs on paced disks of 60, 30 and 15 MB/s, their sum configured;
- fast: the loop disk, unpaced (~280 MB/s reads), 60 configured;
- cpu: a secure HDFS (Kerberos, SASL privacy with AES/CTR) on the loop disk: the CPU binds;
- net: the DataNode in a network namespace whose veth is shaped (tc tbf) to 40 MB/s each way, on the
  loop disk.
"""

import argparse
import contextlib
import dataclasses
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator

import psutil
from dataclasses import asdict, dataclass, field

from benchmarks import machine_sample
from benchmarks import lend_reclaim
from benchmarks.bootstrap import p50, p99, ratio_interval
from benchmarks.bulk_shares import governed
from benchmarks.interactive_shares import WRITE_SITE
from benchmarks.scenario_runner import parse_seeds, rotated
from testbed.cpu_priority import CPU_HIERARCHY, cpu_priority
from testbed.hdfs_cluster import HdfsCluster, datanode_throttle_jar
from testbed.hdfs_cluster.daemons import Transfer
from testbed.local_cluster import LocalUser
from testbed.loopdev import queue_settings
from testbed.names import unique_name
from testbed.processes import exit_once_on_signals
from testbed.share_watch import ClientBytes
from testbed.unix_users import local_users
from vnode_sync.datanode.channel import Shares, ThrottleChannel, ThrottleSettings
from vnode_sync.kernel.cpu_v1 import cgroup_of

MB = 1_000_000
MiB = 1 << 20
POLICIES = ("none", "static", "wc")
OPTIONAL_POLICIES = ("wc-nocpu",)   # wc without per-user cpu groups: the edge before them
KINDS = ("bulk reader", "bulk writer", "interactive reader", "interactive writer")
BULK = ("bulk reader", "bulk writer")
MAX_USERS = 6
SIZES_MIB = (1, 2, 4, 8, 16, 32, 64)
GAP_SECONDS = (0.2, 5.0)
WEIGHTS = (1, 16)
# Past the clients' JVM start and first blocks before the window opens.
WARM_UP_SECONDS = 5.0
BULK_READ_MIB = 256
BULK_PUT_MIB = 64 * 1024        # sparse: read at memory speed; no cell writes this much
INTERACTIVE_READ_FILES = 4      # re-read in turn, kept out of the page cache
INTERACTIVE_WRITE_NAMES = 4     # each write replaces one of these
SAMPLE_SECONDS = lend_reclaim.STEP   # the agent's counters and volumes, sampled in the window
# Issue 58's targets.
LATENCY_TARGET, LATENCY_LIMIT = 1.2, 1.5
SHARE_TOLERANCE = 0.10
THROUGHPUT_TARGET = 0.95
DOCS_QUEUE = {"nr_requests": "4"}   # docs/fair-shares.md: hosts with interactive users bound the disk's queue
DOCS_EXT4 = ("nodelalloc",)


@dataclass(frozen=True)
class Profile:
    disk: str
    disk_mbps: float
    configured_mbps: float
    kerberos: bool = False
    what: str = ""
    more_disks_mbps: tuple[float, ...] = ()   # further data dirs of the DataNode, each on its own paced disk
    link_mbps: float = 0.0                    # the DataNode behind a link shaped to this, each way

    @property
    def shared_by_direction(self) -> bool:
        """Whether readers and writers meet at different bottlenecks (a link's two ways, neither the
        disk): then weighted max-min shares each way among its own users (G2), not the two together."""
        return self.link_mbps > 0


PROFILES = {
    "paced": Profile("paced-rw", 60, 60, what="one paced disk, 60 MB/s reads and writes from one queue, 60 configured"),
    "paced-quarter": Profile("paced-rw", 60, 15, what="the paced 60 MB/s disk configured at a quarter: 15 MB/s"),
    "paced-4x": Profile("paced-rw", 60, 240, what="the paced 60 MB/s disk configured at four times: 240 MB/s"),
    "hdd": Profile("hdd", 60, 60, what="the paced 60 MB/s disk with a seek on each non-sequential request, 60 configured"),
    "three-dirs": Profile("paced-rw", 60, 105, more_disks_mbps=(30, 15),
                          what="three data dirs on paced disks of 60, 30 and 15 MB/s (one queue each), 105 configured"),
    "fast": Profile("loop", 0, 60, what="the loop disk (~280 MB/s reads, the host's virtio disk beneath it), 60 configured: "
                                      "a disk several times faster than configured, as an SSD beside an HDD's figure"),
    "net": Profile("loop", 0, 60, link_mbps=40,
                   what="the DataNode in a network namespace, its veth shaped to 40 MB/s each way, on the loop "
                        "disk (~280 MB/s reads): network-bound; 60 configured"),
    "cpu": Profile("loop", 0, 60, kerberos=True,
                   what="secure HDFS (Kerberos, SASL privacy, AES/CTR) on the loop disk: CPU-bound; 60 configured"),
}


@dataclass(frozen=True)
class ScenarioUser:
    slot: int               # which of the run's Unix users plays it
    weight: int
    kind: str
    transfer_mib: int = 0   # interactive users: each file's size
    gap_seconds: float = 0.0

    @property
    def interactive(self) -> bool:
        return self.kind not in BULK

    def describe(self) -> str:
        what = f"u{self.slot} w{self.weight} {self.kind}"
        return what + (f" {self.transfer_mib} MiB gap {self.gap_seconds:g} s" if self.interactive else "")


@dataclass(frozen=True)
class Scenario:
    seed: int
    users: tuple[ScenarioUser, ...]

    def describe(self) -> str:
        return f"{len(self.users)} users: " + "; ".join(u.describe() for u in self.users)


def draw(seed: int) -> Scenario:
    """The scenario of SEED (the module's docstring states the distribution)."""
    rng = random.Random(seed)
    count = rng.randint(2, MAX_USERS)
    weights = [rng.randint(*WEIGHTS) for _ in range(count)]
    if rng.random() < 0.5:
        weights[0], weights[1] = rng.randint(1, 2), rng.randint(9, WEIGHTS[1])
    kinds = [rng.choice(KINDS) for _ in range(count)]
    if not any(kind in BULK for kind in kinds):
        kinds[rng.randrange(count)] = rng.choice(BULK)
    users = []
    for slot, (weight, kind) in enumerate(zip(weights, kinds)):
        if kind in BULK:
            users.append(ScenarioUser(slot, weight, kind))
        else:
            gap = math.exp(rng.uniform(math.log(GAP_SECONDS[0]), math.log(GAP_SECONDS[1])))
            users.append(ScenarioUser(slot, weight, kind, rng.choice(SIZES_MIB), round(gap, 2)))
    return Scenario(seed, tuple(users))


def parse_policies(text: str) -> tuple[str, ...]:
    policies = tuple(p.strip() for p in text.split(",") if p.strip())
    unknown = [p for p in policies if p not in POLICIES + OPTIONAL_POLICIES]
    if unknown or not policies or len(set(policies)) != len(policies):
        raise argparse.ArgumentTypeError(f"policies {text!r}: give distinct ones of "
                                         f"{', '.join(POLICIES + OPTIONAL_POLICIES)}")
    return policies


def parse_scenario(text: str, seed: int = 0) -> Scenario:
    """'bulk-reader:8,bulk-writer:4' -> a Scenario of those bulk users (slots in order)."""
    users = []
    for slot, part in enumerate(p.strip() for p in text.split(",")):
        kind, _, weight = part.partition(":")
        kind = kind.replace("-", " ")
        if kind not in BULK or not weight.isdigit() or not WEIGHTS[0] <= int(weight) <= 100:
            raise argparse.ArgumentTypeError(f"scenario user {part!r}: give bulk-reader:W or bulk-writer:W, W 1-100")
        users.append(ScenarioUser(slot, int(weight), kind))
    if not 1 <= len(users) <= MAX_USERS:
        raise argparse.ArgumentTypeError(f"scenario {text!r}: 1-{MAX_USERS} users")
    return Scenario(seed, tuple(users))


@dataclass
class Cell:
    """One policy of one scenario, as measured."""
    seed: int
    policy: str
    window_seconds: float
    transfers: dict[int, list[float]] = field(default_factory=dict)   # interactive slot -> seconds each
    rates: dict[int, float] = field(default_factory=dict)             # bulk slot -> client bytes/s
    node_bps: float = 0.0
    steal_seconds: float = 0.0
    cpu_busy: float = 0.0   # the machine's CPUs busy over the window, 0..1 (benchmarks.machine_sample.cpu_ticks)
    cpu_groups: list[str] = field(default_factory=list)   # at the window's end: each user's cpu group, threads, shares
    datanode_cpu: float = 0.0   # the DataNode JVM's CPU over the window, cores (user + system)
    # The Java agent's view over the window: each user's packets' wait in the volume's dispatcher
    # (seconds per second, summed over its threads; under none every user is DEFAULT: slot -1), and
    # each volume's depth, waiting packets and slots lent, sampled every SAMPLE_SECONDS.
    waited: dict[int, float] = field(default_factory=dict)
    volumes: list[str] = field(default_factory=list)
    # Lend and reclaim (benchmarks.lend_reclaim): each user's bytes at the DataNode every SAMPLE_SECONDS
    # (seconds into the window, {slot: bytes}; empty where the agent names no user), and each
    # interactive user's transfers as (start, end) seconds into the window.
    timeline: list[tuple[float, dict[int, int]]] = field(default_factory=list)
    spans: dict[int, list[tuple[float, float]]] = field(default_factory=dict)

    def lend_and_reclaim(self) -> tuple[list[float], list[float]]:
        if not self.timeline:
            return [], []
        return lend_reclaim.cell_times(self.timeline, self.spans, sorted(self.timeline[0][1]), self.window_seconds)


# ---- the summary's maths (no HDFS) ----

@dataclass(frozen=True)
class Verdict:
    """One policy of one scenario against static (latency), the weighted shares and none (throughput)."""
    latency: dict[int, tuple[float, float] | None]   # interactive slot -> p50, p99 over static's (None: no transfers)
    shares: dict[int, float]                          # bulk slot -> rate over its weighted share
    throughput: float | None                          # node's over none's
    # interactive slot -> the larger low end of its p50's and p99's 95 % intervals (bootstrap, both sides
    # resampled): above the target, the miss is more than drawing the same transfers again would move.
    latency_low: dict[int, float] = field(default_factory=dict)
    lend: list[float] = field(default_factory=list)       # seconds, every idle time timed (lend_reclaim)
    reclaim: list[float] = field(default_factory=list)    # seconds, every transfer timed

    def worst_latency(self) -> float | None:
        values = [max(pair) for pair in self.latency.values() if pair]
        return max(values) if values else None

    def worst_latency_low(self) -> float | None:
        return max(self.latency_low.values(), default=None)

    def worst_share(self) -> float | None:
        return max((abs(r - 1) for r in self.shares.values()), default=None)

    def misses(self) -> float:
        """How far past its targets (0: all met): the largest of each figure over its target, less 1."""
        over = [0.0]
        if self.worst_latency() is not None:
            over.append(self.worst_latency() / LATENCY_TARGET - 1)
        if self.worst_share() is not None:
            over.append(self.worst_share() / SHARE_TOLERANCE - 1)
        if self.throughput:
            over.append(THROUGHPUT_TARGET / self.throughput - 1)
        return max(over)


def weighted_shares(scenario: Scenario, rates: dict[int, float], by_direction: bool = False) -> dict[int, float]:
    """Each bulk user's rate over w_i / sum(w) of what the bulk users that share its bottleneck moved
    together (all of them, or BY_DIRECTION the readers and the writers apart); none for a user alone at
    its bottleneck (its share is all they moved: 1 by definition, it says nothing)."""
    bulk = [u for u in scenario.users if not u.interactive and u.slot in rates]
    groups = [[u for u in bulk if u.kind == kind] for kind in BULK] if by_direction else [bulk]
    shares = {}
    for group in groups:
        total, weights = sum(rates[u.slot] for u in group), sum(u.weight for u in group)
        if total > 0 and len(group) >= 2:
            shares.update({u.slot: rates[u.slot] / (total * u.weight / weights) for u in group})
    return shares


def judge(scenario: Scenario, cells: dict[str, Cell], by_direction: bool = False) -> dict[str, Verdict]:
    """Each policy's Verdict; latency against static's cell, throughput against none's; shares as
    weighted_shares (BY_DIRECTION: Profile.shared_by_direction)."""
    static, none = cells.get("static"), cells.get("none")
    verdicts = {}
    for policy, cell in cells.items():
        latency, low = {}, {}
        for user in scenario.users:
            if not user.interactive:
                continue
            mine, base = cell.transfers.get(user.slot), static.transfers.get(user.slot) if static else None
            latency[user.slot] = (p50(mine) / p50(base), p99(mine) / p99(base)) if mine and base else None
            if mine and base:
                low[user.slot] = max(ratio_interval(mine, base, statistic).low for statistic in (p50, p99))
        throughput = cell.node_bps / none.node_bps if none and none.node_bps > 0 else None
        verdicts[policy] = Verdict(latency, weighted_shares(scenario, cell.rates, by_direction), throughput, low,
                                   *cell.lend_and_reclaim())
    return verdicts


def spread(values: list[float]) -> str:
    """'min / median / max' of VALUES, or '-'."""
    if not values:
        return "-"
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def share_of(values: list[bool]) -> str:
    return f"{sum(values)} of {len(values)}" if values else "-"


def distribution(verdicts: dict[int, dict[str, Verdict]], policy: str) -> list[str]:
    """Lines of POLICY's figures over the scenarios: each target's count met and the spread. A scenario
    whose interactive figure misses the target is told apart by whether it misses beyond chance (its
    interval's low end above the target too): a p99 of a few transfers is their slowest, and moves far
    when they are drawn again."""
    mine = [v[policy] for v in verdicts.values() if policy in v]
    judged = [v for v in mine if v.worst_latency() is not None]
    latencies = [v.worst_latency() for v in judged]
    beyond_chance = [v.worst_latency_low() is not None and v.worst_latency_low() > LATENCY_TARGET
                     for v in judged if v.worst_latency() > LATENCY_TARGET]
    shares = [v.worst_share() for v in mine if v.worst_share() is not None]
    throughputs = [v.throughput for v in mine if v.throughput is not None]
    return [
        f"  interactive, worst user's max(p50, p99) over static's: <= {LATENCY_TARGET} in "
        f"{share_of([x <= LATENCY_TARGET for x in latencies])} scenarios, <= {LATENCY_LIMIT} in "
        f"{share_of([x <= LATENCY_LIMIT for x in latencies])}; min / median / max {spread(latencies)}",
        f"    of those past {LATENCY_TARGET}, past it beyond chance (95 % interval's low end above it): "
        f"{share_of(beyond_chance)}",
        f"  backlogged, worst user's |rate / weighted share - 1|: <= {SHARE_TOLERANCE} in "
        f"{share_of([x <= SHARE_TOLERANCE for x in shares])} scenarios; min / median / max {spread(shares)}",
        f"  node's throughput over none's: >= {THROUGHPUT_TARGET} in "
        f"{share_of([x >= THROUGHPUT_TARGET for x in throughputs])} scenarios; min / median / max {spread(throughputs)}",
        *[f"  {what}, the scenario's longest (s): <= {lend_reclaim.TARGET_SECONDS:g} in "
          f"{share_of([x <= lend_reclaim.TARGET_SECONDS for x in longest])} scenarios; min / median / max "
          f"{spread(longest)}"
          for what, longest in (("lend", [max(v.lend) for v in mine if v.lend]),
                                ("reclaim", [max(v.reclaim) for v in mine if v.reclaim])) if longest],
    ]


def describe_edge(cell: Cell) -> str:
    """The Java agent's view: who waited in its dispatcher (s/s) and the volumes' depths over the window."""
    waited = " ".join(f"{'DEFAULT' if slot < 0 else f'u{slot}'} {w:.2f}" for slot, w in sorted(cell.waited.items()))
    return (f"waited {waited or '-'}; volumes {'; '.join(cell.volumes) or '-'}"
            + (f"; cpu groups {'; '.join(cell.cpu_groups)}" if cell.cpu_groups else ""))


def cell_line(scenario: Scenario, cell: Cell, verdict: Verdict) -> str:
    parts = []
    for user in scenario.users:
        if user.interactive:
            times = cell.transfers.get(user.slot) or []
            ratio = verdict.latency.get(user.slot)
            parts.append(f"u{user.slot} " + (f"{p50(times) * 1000:.0f}/{p99(times) * 1000:.0f} ms" if times else "-")
                         + (f" ({ratio[0]:.2f}x/{ratio[1]:.2f}x, low {verdict.latency_low[user.slot]:.2f})"
                            if ratio else "") + f" n={len(times)}")
        else:
            share = verdict.shares.get(user.slot)
            parts.append(f"u{user.slot} {cell.rates.get(user.slot, 0) / MB:.1f} MB/s"
                         + (f" ({share:.2f} of share)" if share is not None else ""))
    node = f"node {cell.node_bps / MB:.1f} MB/s" + (f" ({verdict.throughput:.2f} of none)" if verdict.throughput else "")
    for what, times in (("lend", verdict.lend), ("reclaim", verdict.reclaim)):
        if times:
            node += f" | {what} {statistics.median(times):.1f}/{max(times):.1f} s n={len(times)}"
    return (f"  {cell.policy:<8} | {' | '.join(parts)} | {node} | cpu {cell.cpu_busy:.0%}, DataNode {cell.datanode_cpu:.2f} cores | steal {cell.steal_seconds:.1f} s\n"
            f"         edge: {describe_edge(cell)}")


def report(scenarios: dict[int, Scenario], cells: dict[int, dict[str, Cell]], out=sys.stdout,
           by_direction: bool = False) -> None:
    """Per scenario one line per policy, then the distribution over the seeds and the worst scenario."""
    verdicts = {seed: judge(scenarios[seed], by_policy, by_direction) for seed, by_policy in cells.items()}
    for seed, by_policy in cells.items():
        print_scenario(scenarios[seed], by_policy, verdicts[seed], out)
    print(f"\ndistribution over {len(cells)} scenarios (seeds {', '.join(map(str, cells))}):", file=out)
    for policy in ("wc", *OPTIONAL_POLICIES, "none"):
        if not any(policy in v for v in verdicts.values()):
            continue
        print(f" {policy}:", file=out)
        for line in distribution(verdicts, policy):
            print(line, file=out)
    scored = [(v["wc"].misses(), seed) for seed, v in verdicts.items() if "wc" in v]
    if scored:
        miss, seed = max(scored)
        print(f"\nworst scenario under wc: seed {seed} ({'every target met' if miss <= 0 else f'{miss:.2f} past its target'})",
              file=out)
        print_scenario(scenarios[seed], cells[seed], verdicts[seed], out)


def print_scenario(scenario: Scenario, by_policy: dict[str, Cell], verdicts: dict[str, Verdict], out) -> None:
    print(f"seed {scenario.seed}: {scenario.describe()}; ran {', '.join(by_policy)}", file=out)
    for policy in POLICIES + OPTIONAL_POLICIES:
        if policy in by_policy:
            print(cell_line(scenario, by_policy[policy], verdicts[policy]), file=out)


# ---- the run on HDFS ----

class Client:
    """One user's running client: its process, its bytes so far, and (interactive) its transfers as they end."""

    def __init__(self, process: subprocess.Popen, interactive: bool):
        self.process = process
        self.bytes = ClientBytes(process.pid, "rchar")
        self.done: list[tuple[float, Transfer]] = []   # (monotonic end, transfer)
        self._thread = threading.Thread(target=self._collect, daemon=True) if interactive else None
        if self._thread:
            self._thread.start()

    def _collect(self) -> None:
        for line in self.process.stdout:
            if line.startswith("{"):
                self.done.append((time.monotonic(), Transfer.parse(line)))

    def transfers_within(self, start: float, end: float) -> list[float]:
        return [t.seconds for at, t in self.done if at - t.seconds >= start and at <= end]

    def spans_within(self, start: float, end: float) -> list[tuple[float, float]]:
        """Each transfer's (start, end), seconds from START, of those the window holds whole."""
        return [(at - t.seconds - start, at - start) for at, t in self.done if at - t.seconds >= start and at <= end]

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()
        if self._thread:
            self._thread.join(timeout=5)


class Testbed:
    """The run's HDFS, its Unix users and the files each scenario reads."""

    def __init__(self, hdfs: HdfsCluster, users: tuple[LocalUser, ...], profile: Profile, source: str):
        self.hdfs, self.users, self.profile, self.source = hdfs, users, profile, source
        self.dn = hdfs.datanodes[0]
        self.channel = ThrottleChannel(hdfs.throttle_socket(self.dn))
        self.bulk_read_written: set[int] = set()
        self.generation = 1 << 40   # the "none" APPLYs' own range

    def user(self, slot: int, weight: int = 1) -> LocalUser:
        unix = self.users[slot]
        return LocalUser(unix.name, unix.uid, weight)

    def prepare(self, scenario: Scenario) -> None:
        """The files the scenario's readers read, written now and dropped from the page cache."""
        for u in scenario.users:
            user = self.user(u.slot)
            if u.kind == "bulk reader" and u.slot not in self.bulk_read_written:
                self.hdfs.write_file(f"/u{u.slot}/bulk-read.bin", BULK_READ_MIB * MiB, as_uid=user.uid,
                                     hdfs_user=user.name)
                self.bulk_read_written.add(u.slot)
            elif u.kind == "interactive reader":
                for i in range(INTERACTIVE_READ_FILES):
                    self.hdfs.write_file(self.read_file(scenario, u, i), u.transfer_mib * MiB, as_uid=user.uid,
                                         hdfs_user=user.name)
        self.hdfs.evict_page_cache()

    @staticmethod
    def read_file(scenario: Scenario, u: ScenarioUser, i: int) -> str:
        return f"/u{u.slot}/read-{scenario.seed}-{i}.bin"

    def start(self, scenario: Scenario, u: ScenarioUser, cell: str) -> Client:
        user, hdfs = self.user(u.slot), self.hdfs
        ids = {"as_uid": user.uid, "hdfs_user": user.name}
        if u.kind == "bulk reader":
            return Client(hdfs.start_read(f"/u{u.slot}/bulk-read.bin", seconds=3600, **ids), False)
        if u.kind == "bulk writer":
            return Client(hdfs.start_shell("-put", "-f", self.source, f"/u{u.slot}/put-{cell}.bin", **ids), False)
        count = 1000   # more than any window lets it move
        if u.kind == "interactive reader":
            files = [self.read_file(scenario, u, i % INTERACTIVE_READ_FILES) for i in range(count)]
            return Client(hdfs.start_interactive(files, u.gap_seconds, **ids), True)
        names = [f"/u{u.slot}/write-{cell}-{i % INTERACTIVE_WRITE_NAMES}.bin" for i in range(count)]
        return Client(hdfs.start_interactive(names, u.gap_seconds, write_bytes=u.transfer_mib * MiB, **ids), True)

    def node_bytes(self) -> int:
        stats = self.channel.stats()
        return sum(c.read_bytes + c.write_bytes for c in (stats.default, *stats.users.values()))

    def waits_ns(self, scenario: Scenario) -> dict[int, int]:
        """Slot (-1: DEFAULT) -> ns its threads have waited in the dispatchers so far."""
        stats = self.channel.stats()
        by_name = {self.users[u.slot].name: u.slot for u in scenario.users}
        waits = {by_name[name]: c.read_wait_ns + c.write_wait_ns for name, c in stats.users.items() if name in by_name}
        return {-1: stats.default.read_wait_ns + stats.default.write_wait_ns, **waits}

    def sample_window(self, scenario: Scenario, seconds: float, step: float = SAMPLE_SECONDS
                      ) -> tuple[list[str], list[tuple[float, dict[int, int]]]]:
        """Sleeps SECONDS, sampling the agent every STEP: each volume's depth, waiting packets and MB/s as
        'min-max' spans, and the timeline of each scenario user's bytes (Cell.timeline)."""
        seen: dict[str, dict[str, list[float]]] = {}
        timeline: list[tuple[float, dict[int, int]]] = []
        by_name = {self.users[u.slot].name: u.slot for u in scenario.users}
        start = time.monotonic()
        deadline = start + seconds
        while (left := deadline - time.monotonic()) > 0:
            time.sleep(min(step, left))
            with contextlib.suppress(Exception):   # a busy socket costs a sample, not the cell
                stats = self.channel.stats()
                at = time.monotonic() - start
                moved = {by_name[name]: c.read_bytes + c.write_bytes for name, c in stats.users.items()
                         if name in by_name}
                if moved:
                    timeline.append((at, moved))
                for v in stats.volumes:
                    # lent: slots lent to the queue since start (agents that lend: edge 2c63089; later ones do not)
                    sample = {"depth": v.depth, "waiting": v.waiting, "MB/s": v.moved_bytes_per_second / MB,
                              **({"lent": v.lent} if hasattr(v, "lent") else {})}
                    for key, value in sample.items():
                        seen.setdefault(v.volume[-6:], {}).setdefault(key, []).append(value)
        volumes = [f"{volume} depth {min(f['depth']):.0f}-{max(f['depth']):.0f} (median {statistics.median(f['depth']):.0f}), "
                   f"waiting {statistics.median(f['waiting']):.0f} median {max(f['waiting']):.0f} max, "
                   f"{statistics.median(f['MB/s']):.1f} MB/s median"
                   + (f", lent {max(f['lent']) - min(f['lent']):.0f}" if "lent" in f else "")
                   for volume, f in sorted(seen.items())]
        # A user that moved nothing yet has no counter: zero, so every sample names every user.
        slots = {slot for _, moved in timeline for slot in moved}
        return volumes, [(at, {slot: moved.get(slot, 0) for slot in slots}) for at, moved in timeline]

    def datanode_cpu_seconds(self) -> float:
        times = psutil.Process(self.dn.pid).cpu_times()
        return times.user + times.system

    def cpu_groups(self) -> list[str]:
        """The DataNode's per-user cpu groups (docs/edge.md G10) as 'group: N threads, S shares'."""
        home = os.path.join(CPU_HIERARCHY, cgroup_of(self.dn.pid).lstrip("/"))
        found = []
        for directory, _, files in os.walk(home):
            name = os.path.basename(directory)
            if directory != home and "tasks" in files:
                with contextlib.suppress(OSError):
                    threads = len(open(os.path.join(directory, "tasks")).read().split())
                    shares = open(os.path.join(directory, "cpu.shares")).read().strip()
                    found.append(f"{name}: {threads} threads, {shares} shares")
        return found

    def lift_shares(self) -> None:
        """No vnode-sync: every user DEFAULT, with no weight, floor or ceiling (the agent's teardown)."""
        self.generation += 1
        self.channel.apply(ThrottleSettings(self.generation, Shares()))

    def clean_up(self, scenario: Scenario, cell: str) -> None:
        """Delete what the cell wrote (one FsShell), so the disk does not fill over a run."""
        paths = [f"/u{u.slot}/{'put' if u.kind == 'bulk writer' else 'write'}-{cell}*"
                 for u in scenario.users if u.kind in ("bulk writer", "interactive writer")]
        if paths:
            self.hdfs.shell("-rm", "-r", "-f", "-skipTrash", *paths, check=False)


@contextlib.contextmanager
def policy_in_force(bed: Testbed, scenario: Scenario, policy: str) -> Iterator[None]:
    if policy == "none":
        bed.lift_shares()
        yield
        return
    users = [bed.user(u.slot, u.weight) for u in scenario.users]
    bw = int(bed.profile.configured_mbps * MB)
    with governed(bed.hdfs, unique_name("edgesc"), users, "static" if policy == "static" else "wc-weights", bw,
                  cpu_shares=policy != "wc-nocpu"):
        yield


def busiest_others(seconds: float = 1.0, count: int = 5) -> str:
    """The processes outside this run that took the most CPU over SECONDS: what else ran on the machine."""
    mine = {os.getpid(), *(p.pid for p in psutil.Process().children(recursive=True))}
    processes = [p for p in psutil.process_iter(["name", "cmdline"]) if p.pid not in mine]
    for p in processes:
        with contextlib.suppress(psutil.Error):
            p.cpu_percent()
    time.sleep(seconds)
    used = []
    for p in processes:
        with contextlib.suppress(psutil.Error):
            used.append((p.cpu_percent(), p.pid, " ".join(p.info["cmdline"] or [p.info["name"] or "?"])[:70]))
    return "; ".join(f"{cpu:.0f} % pid {pid} {what}" for cpu, pid, what in sorted(used, reverse=True)[:count])


def run_cell(bed: Testbed, scenario: Scenario, policy: str, window: float) -> Cell:
    cell_name = f"{scenario.seed}-{policy}"
    cell = Cell(scenario.seed, policy, window)
    with policy_in_force(bed, scenario, policy):
        clients = {}
        try:
            for u in scenario.users:
                clients[u.slot] = bed.start(scenario, u, cell_name)
            time.sleep(WARM_UP_SECONDS)
            before_bytes = {slot: c.bytes() for slot, c in clients.items()}
            before_node, before_machine, before_waits = bed.node_bytes(), machine_sample.take(), bed.waits_ns(scenario)
            before_cpu, before_dn = machine_sample.cpu_ticks(), bed.datanode_cpu_seconds()
            start = time.monotonic()
            cell.volumes, cell.timeline = bed.sample_window(scenario, window)
            cell.cpu_groups = bed.cpu_groups()
            end = time.monotonic()
            after_node, after_machine, after_waits = bed.node_bytes(), machine_sample.take(), bed.waits_ns(scenario)
            after_cpu, after_dn = machine_sample.cpu_ticks(), bed.datanode_cpu_seconds()
            cell.datanode_cpu = (after_dn - before_dn) / (end - start)
            busy, idle = after_cpu.busy - before_cpu.busy, after_cpu.idle - before_cpu.idle
            cell.cpu_busy = busy / (busy + idle) if busy + idle > 0 else 0.0
            cell.waited = {slot: (after_waits[slot] - before_waits.get(slot, 0)) / 1e9 / (end - start)
                           for slot in after_waits}
            for u in scenario.users:
                client = clients[u.slot]
                if u.interactive:
                    cell.transfers[u.slot] = client.transfers_within(start, end)
                    cell.spans[u.slot] = client.spans_within(start, end)
                else:
                    cell.rates[u.slot] = (client.bytes() - before_bytes[u.slot]) / (end - start)
            cell.node_bps = (after_node - before_node) / (end - start)
            tick = 1 / os.sysconf("SC_CLK_TCK")
            cell.steal_seconds = (after_machine.steal_ticks - before_machine.steal_ticks) * tick
            for u in scenario.users:
                if clients[u.slot].process.poll() not in (None, -9):
                    print(f"    warning: u{u.slot}'s client exited {clients[u.slot].process.returncode}: "
                          f"{clients[u.slot].process.stderr.read()[-500:]!r}", flush=True)
        finally:
            for client in clients.values():
                client.stop()
    bed.clean_up(scenario, cell_name)
    bed.hdfs.evict_page_cache()   # the cell's dirty pages reach the disk before the next cell
    return cell


@contextlib.contextmanager
def testbed(profile: Profile, docs_settings: bool) -> Iterator[Testbed]:
    site = {"dfs.block.access.token.enable": "true", "dfs.datanode.drop.cache.behind.reads": "true",
            **(WRITE_SITE if docs_settings else {})}
    paced = {"disk_read_mbps": profile.disk_mbps} if profile.disk_mbps else {}
    source_dir = tempfile.mkdtemp(prefix=unique_name("edgesc-src") + ".")
    try:
        os.chmod(source_dir, 0o755)
        source = os.path.join(source_dir, "bulk.bin")
        with open(source, "wb") as f:
            f.truncate(BULK_PUT_MIB * MiB)
        os.chmod(source, 0o644)
        with local_users("vse", (1,) * MAX_USERS, first_uid=64_801) as users, \
                cpu_priority(unique_name("edgesc-cpu")), \
                HdfsCluster(unique_name("edgesc"), datanodes=1, disk_mb=12288, disk=profile.disk, hdfs_site=site,
                            datanode_throttle=datanode_throttle_jar(), kerberos=profile.kerberos,
                            ext4_options=DOCS_EXT4 if docs_settings else (), more_disks_mbps=profile.more_disks_mbps,
                            datanode_link_mbps=profile.link_mbps, native=True,
                            **paced) as hdfs, \
                contextlib.ExitStack() as queues:
            for device in hdfs.datanodes[0].loop_devices:
                queues.enter_context(queue_settings(device, DOCS_QUEUE if docs_settings else {}))
            for user in users:
                if profile.kerberos:
                    hdfs.add_user(user.name, user.uid)
                hdfs.shell("-mkdir", "-p", f"/u{users.index(user)}", hdfs_user=user.name)
            yield Testbed(hdfs, users, profile, source)
    finally:
        with contextlib.suppress(OSError):
            for name in os.listdir(source_dir):
                os.unlink(os.path.join(source_dir, name))
            os.rmdir(source_dir)


def cells_to_json(scenario: Scenario, cells: dict[str, Cell]) -> str:
    return json.dumps({"scenario": asdict(scenario), "cells": [asdict(c) for c in cells.values()]})


def cells_from_json(line: str) -> tuple[Scenario, dict[str, Cell]]:
    entry = json.loads(line)
    scenario = Scenario(entry["scenario"]["seed"], tuple(ScenarioUser(**u) for u in entry["scenario"]["users"]))
    cells = {}
    for c in entry["cells"]:
        c["transfers"] = {int(k): v for k, v in c["transfers"].items()}
        c["rates"] = {int(k): v for k, v in c["rates"].items()}
        c["waited"] = {int(k): v for k, v in c.get("waited", {}).items()}
        c["timeline"] = [(at, {int(k): v for k, v in moved.items()}) for at, moved in c.get("timeline", [])]
        c["spans"] = {int(k): [tuple(span) for span in v] for k, v in c.get("spans", {}).items()}
        cells[c["policy"]] = Cell(**c)
    return scenario, cells


def summarize(path: str, by_direction: bool = False) -> int:
    scenarios, cells = {}, {}
    with open(path) as f:
        for line in f:
            if line.strip():
                scenario, by_policy = cells_from_json(line)
                scenarios[scenario.seed], cells[scenario.seed] = scenario, by_policy
    report(scenarios, cells, by_direction=by_direction)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-11"), help="e.g. 0-11 or 0,4,7-9")
    parser.add_argument("--profile", default="paced", help=f"one of {', '.join(PROFILES)}")
    parser.add_argument("--minutes-per-policy", type=float, default=0.7, help="each cell's window")
    parser.add_argument("--json", metavar="FILE", help="append each scenario's cells to FILE (one JSON line each)")
    parser.add_argument("--summarize", metavar="FILE", help="print the report of a --json FILE and exit (no HDFS)")
    parser.add_argument("--policies", type=parse_policies, default=POLICIES,
                        help=f"comma-separated, of {', '.join(POLICIES + OPTIONAL_POLICIES)}")
    parser.add_argument("--scenario", type=parse_scenario, default=None,
                        help="one scenario of bulk users, e.g. bulk-reader:8,bulk-reader:4, instead of drawn ones: "
                             "run once per seed, each seed rotating the policies' order")
    parser.add_argument("--testbed-defaults", action="store_true",
                        help="without the docs' settings for interactive hosts (nodelalloc, queue of 4, close retry 2 ms)")
    args = parser.parse_args(argv)
    if args.profile not in PROFILES:
        print(f"edge_scenarios: unknown profile {args.profile!r}; known: {', '.join(PROFILES)}", file=sys.stderr)
        return 2
    if args.summarize:
        return summarize(args.summarize, PROFILES[args.profile].shared_by_direction)
    if not 0.05 <= args.minutes_per_policy <= 30:
        print(f"edge_scenarios: --minutes-per-policy {args.minutes_per_policy}: allowed 0.05-30", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("edge_scenarios: needs root (loop devices, FUSE, Unix users, cgroups)", file=sys.stderr)
        return 2
    exit_once_on_signals()   # a kill or Ctrl-C still unwinds every `with` below
    profile = PROFILES[args.profile]
    started = time.monotonic()
    window = args.minutes_per_policy * 60
    print(f"command: {' '.join(['python -m benchmarks.edge_scenarios', *(argv if argv is not None else sys.argv[1:])])}")
    print(f"other processes at start (CPU over 1 s): {busiest_others()}")
    print(f"profile {args.profile}: {profile.what}; "
          + ("testbed defaults" if args.testbed_defaults else
             f"docs' settings: ext4 {','.join(DOCS_EXT4)}, disk queue {DOCS_QUEUE}, "
             f"close retry {WRITE_SITE['dfs.client.block.write.locateFollowingBlock.initial.delay.ms']} ms")
          + f"; window {window:.0f} s after {WARM_UP_SECONDS:.0f} s warm-up; load average at start "
          + " ".join(f"{v:.2f}" for v in os.getloadavg()), flush=True)
    scenarios, cells = {}, {}
    with testbed(profile, not args.testbed_defaults) as bed:
        print(f"[{time.monotonic() - started:.0f} s] HDFS up", flush=True)
        for seed in args.seeds:
            # A given scenario runs once per seed: the seed only rotates the policies' order.
            scenario = dataclasses.replace(args.scenario, seed=seed) if args.scenario else draw(seed)
            scenarios[seed] = scenario
            bed.prepare(scenario)
            by_policy = {}
            for policy in rotated(seed, args.policies):
                by_policy[policy] = run_cell(bed, scenario, policy, window)
                print(f"[{time.monotonic() - started:.0f} s] seed {seed} {policy} done", flush=True)
            cells[seed] = {p: by_policy[p] for p in rotated(seed, args.policies)}
            print_scenario(scenario, cells[seed], judge(scenario, cells[seed], profile.shared_by_direction), sys.stdout)
            sys.stdout.flush()
            if args.json:
                with open(args.json, "a") as f:
                    f.write(cells_to_json(scenario, cells[seed]) + "\n")
    print("\n==== report ====")
    report(scenarios, cells, by_direction=profile.shared_by_direction)
    print(f"other processes at end (CPU over 1 s): {busiest_others()}")
    print(f"\nran {time.monotonic() - started:.0f} s; load average at end: "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
