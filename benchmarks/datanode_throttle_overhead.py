"""Aggregate HDFS write and read throughput with vnode-sync's DataNode Java agent at limits that
never bind, against DataNodes without it, alternating in the same run (target: within 2 %).

    sudo .venv/bin/python -m benchmarks.datanode_throttle_overhead [--rounds 30] [--file-mb 512]
        [--disk zram|paced|paced-rw] [--block-tokens]

Two real HDFS clusters run side by side, the same but for `-javaagent:` on one's DataNodes:
"agent" (every packet goes through the weighted scheduler as work-conserving sharing runs it:
each user with a local weight (its priority) and a ceiling, the node's capacity --node-gbps, all
above what the node can do, and a UID line per user so every op is charged) and "none": what is
measured is the per-packet cost of the path, each packet dispatched by its volume's dispatcher
(docs/edge.md). Without --block-tokens each op's user is its
client socket's owner, found in /proc/net/tcp (once per connection); with it (on both
clusters), the block token's user. A trial on one cluster: after a sync, so no earlier trial's
dirty pages are written back during it, both users write a file at once through the native
client, then the page cache is dropped and both read it back at once for
--read-seconds (re-reading it); then the files are deleted and the DataNodes' block files
waited for, so no trial pays for freeing another's blocks. A phase's figure is all its bytes over the longest
client's transfer time as the clients measure it (JVM start-up, which varies by more than the
2 % looked for, is left out). The disks are zram (RAM) by default, so neither the VM's drifting
disk nor writeback sets the pace and what remains is CPU per byte, where an agent's overhead
shows most. `--disk paced-rw` is the other regime, a DataNode on real disks: reads and writes
at the disk's pace, and so little dirty page cache per disk that a writer waits for the disk
as it does once a sustained write outgrows a DataNode's RAM (`--disk paced` paces reads only,
and its writes then measure the page cache: single rounds 0.75-1.48).

The cases take turns at each position in a round (hdfs_overhead's round order), and every
--swap-every rounds both clusters' DataNodes restart with the agent moved to the other
cluster, so one JVM instance's own speed (its heap layout and JIT decisions) is not counted as
the agent's. The figure is the median of the rounds' agent/none ratios with a bootstrap 95 %
confidence interval (hdfs_overhead's), and each epoch's median beside it (rounds of one epoch
share JVM instances, so the spread between epochs is the honest width).

Throughput on a 2-core VM shared with other work swings by more than 2 % from trial to trial,
so the DataNodes' own CPU time per byte moved (user + system, every DataNode of the cluster) is
printed beside it: what the agent adds to each byte, which costs throughput wherever the
DataNode's CPU is the bottleneck. It moves far less with other load on the machine. The whole
run is also in a cpu cgroup with the largest cpu.shares (testbed/cpu_priority.py), so other
work on the host takes CPU only when the benchmark leaves some.
"""

import argparse
import concurrent.futures
import contextlib
import os
import threading
import time
import statistics
from dataclasses import dataclass

from hdfs import InsecureClient

from benchmarks.bootstrap import median_interval, target_verdict
from benchmarks.hdfs_overhead import USERS
from benchmarks.scenario_runner import rotated
from testbed.local_cluster import LocalUser
from testbed.hdfs_cluster import DISK_KINDS, PACED_READ_MBPS, HdfsCluster, Transfer, datanode_throttle_jar
from testbed.cpu_priority import MAX_SHARES, cpu_priority
from testbed.names import unique_name
from testbed.process_cpu import cpu_seconds
from testbed.processes import exit_once_on_signals
from vnode_sync.datanode.channel import NodeCapacity, Share, Shares, ThrottleChannel, ThrottleSettings

MiB = 1 << 20
CASES = ("agent", "none")


def aggregate_rate(transfers: list[Transfer]) -> float:
    return sum(t.bytes for t in transfers) / max(t.seconds for t in transfers)


def datanode_cpu_seconds(hdfs: HdfsCluster) -> float:
    return sum(cpu_seconds(dn.pid) for dn in hdfs.datanodes)


@dataclass(frozen=True)
class Phase:
    rate: float           # bytes/s, all users together
    cpu_per_gib: float    # the DataNodes' CPU seconds per GiB moved
    depths: tuple[int, ...] = ()   # the agent's volumes' dispatch depth, sampled over the phase (none: empty)

    def depth_range(self) -> str:
        return f"{min(self.depths)}-{max(self.depths)}" if self.depths else "-"


def depth_samples(hdfs: HdfsCluster, done: threading.Event, every: float = 0.1) -> list[int]:
    """Every volume's depth every EVERY seconds until DONE (nothing where no agent answers)."""
    channels = [ThrottleChannel(hdfs.throttle_socket(dn)) for dn in hdfs.datanodes]
    seen: list[int] = []
    while not done.wait(every):
        for channel in channels:
            with contextlib.suppress(Exception):   # no agent (none), or a busy socket: no sample
                seen += [v.depth for v in channel.stats().volumes]
    return seen


def measured(hdfs: HdfsCluster, run) -> Phase:
    done, depths = threading.Event(), []
    sampler = threading.Thread(target=lambda: depths.extend(depth_samples(hdfs, done)))
    sampler.start()
    cpu_before = datanode_cpu_seconds(hdfs)
    try:
        transfers = run()
    finally:
        done.set()
        sampler.join()
    cpu = datanode_cpu_seconds(hdfs) - cpu_before
    return Phase(aggregate_rate(transfers), cpu / (sum(t.bytes for t in transfers) / (1 << 30)), tuple(depths))


def user_file(user: LocalUser) -> str:
    return f"/{user.name}/overhead.bin"


def block_files(hdfs: HdfsCluster) -> int:
    return sum(1 for dn in hdfs.datanodes for _, _, files in os.walk(dn.data_dir)
               for f in files if f.startswith("blk_") and not f.endswith(".meta"))


def remove_all(hdfs: HdfsCluster, baseline: int, timeout: float = 60) -> None:
    """Delete the trial's files (WebHDFS: no client JVM to start) and wait until the DataNodes have
    deleted their blocks, so freeing them is no later phase's CPU nor its competitor."""
    url = f"http://{hdfs.namenode.http_address}"
    for u in USERS:
        InsecureClient(url, user=u.name).delete(user_file(u))
    deadline = time.monotonic() + timeout
    while block_files(hdfs) > baseline:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{hdfs.name}: blocks of deleted files still on the DataNodes after {timeout:.0f} s")
        time.sleep(0.2)


def write_all(hdfs: HdfsCluster, size: int) -> Phase:
    # Every write starts with no dirty pages, so no trial pays for writing back another's data
    # (24 GiB of RAM: a trial's 512 MiB stays under the kernel's background writeback threshold).
    os.sync()

    def run():
        with concurrent.futures.ThreadPoolExecutor(len(USERS)) as pool:
            return list(pool.map(lambda u: hdfs.write_file(
                user_file(u), size, as_uid=u.uid, hdfs_user=u.name), USERS))
    return measured(hdfs, run)


def read_all(hdfs: HdfsCluster, seconds: float) -> Phase:
    hdfs.evict_page_cache()

    def run():
        readers = [hdfs.start_read(user_file(u), as_uid=u.uid, hdfs_user=u.name, seconds=seconds)
                   for u in USERS]
        return [Transfer.parse(r.communicate()[0]) for r in readers]
    return measured(hdfs, run)


TARGET = 0.98  # within 2 %


def summary(name: str, ratios: list[float], verdict: bool = True) -> str:
    low, high = median_interval(ratios)
    median = statistics.median(ratios)
    return (f"{name}: agent/none median {median:.3f}, 95 % CI [{low:.3f}, {high:.3f}] over {len(ratios)} rounds"
            + (f"; {target_verdict(median, low, len(ratios), TARGET, 'within 2 %')}" if verdict else ""))


def epoch_medians(ratios: list[float], swap_every: int) -> str:
    """Each DataNode JVM pair's own median: rounds of one epoch share JVM instances, so their
    ratios are not independent, and a spread between epochs widens what the rounds' CI says."""
    epochs = [ratios[i:i + swap_every] for i in range(0, len(ratios), swap_every)]
    return ", ".join(f"{statistics.median(e):.3f}" for e in epochs)


def swap_agent(pair: list[HdfsCluster], epoch: int, jar: str, rate: int) -> dict[str, HdfsCluster]:
    """Restart both clusters' DataNodes, the agent in one of them (the other one each epoch)."""
    clusters = {"agent": pair[epoch % 2], "none": pair[1 - epoch % 2]}
    clusters["agent"].restart_datanodes(jar)
    clusters["none"].restart_datanodes(None)
    for dn in clusters["agent"].datanodes:
        def share(weight: float) -> Shares:
            return Shares(Share(weight, 0, rate), Share(weight, 0, rate))
        ThrottleChannel(clusters["agent"].throttle_socket(dn)).apply(ThrottleSettings(
            1, share(1), {u.name: share(u.priority) for u in USERS}, {u.uid: u.name for u in USERS},
            node=NodeCapacity(rate, rate)))
    return clusters


def main() -> int:
    exit_once_on_signals()  # a kill still stops HDFS and unmounts its disks
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--file-mb", type=int, default=512, help="MiB each user writes per trial")
    parser.add_argument("--read-seconds", type=float, default=4, help="how long each user reads per trial")
    parser.add_argument("--datanodes", type=int, default=1, help="per cluster")
    parser.add_argument("--disk", choices=DISK_KINDS, default="zram",
                        help="paced-rw: reads and writes at the disk's pace (the disk-bound regime for both)")
    parser.add_argument("--swap-every", type=int, default=5,
                        help="rounds between restarts that move the agent to the other cluster")
    parser.add_argument("--node-gbps", type=float, default=10, help="every user's (non-binding) rate, GB/s")
    parser.add_argument("--block-tokens", action="store_true",
                        help="block access tokens on (both clusters): ops are charged to the token's user")
    args = parser.parse_args()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    with cpu_priority(unique_name("dntover-cpu")) as group:
        print(f"CPU priority: {'cpu.shares ' + str(MAX_SHARES) + ' in ' + group if group else 'none'}", flush=True)
        try:
            return measure(args)
        finally:
            print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)


def measure(args: argparse.Namespace) -> int:
    size, rate = args.file_mb * MiB, int(args.node_gbps * 1e9)
    jar = datanode_throttle_jar()
    site = {"dfs.block.access.token.enable": "true"} if args.block_tokens else {}
    pair = [HdfsCluster(unique_name(f"dntover-{side}"), datanodes=args.datanodes, disk=args.disk,
                        disk_mb=max(1024, 4 * args.file_mb * len(USERS)), disk_read_mbps=PACED_READ_MBPS,
                        hdfs_site=site)
            for side in ("a", "b")]
    rate_ratios: dict[str, list[float]] = {"write": [], "read": []}
    cpu_ratios: dict[str, list[float]] = {"write": [], "read": []}
    try:
        for hdfs in pair:
            hdfs.start()
        baseline = {hdfs.name: block_files(hdfs) for hdfs in pair}
        for round_ in range(args.rounds):
            if round_ % args.swap_every == 0:
                clusters = swap_agent(pair, round_ // args.swap_every, jar, rate)
                for case in CASES:  # warm-up (the JIT), unmeasured
                    write_all(clusters[case], size)
                    read_all(clusters[case], args.read_seconds)
                    remove_all(clusters[case], baseline[clusters[case].name])
            got: dict[str, dict[str, Phase]] = {}
            for case in rotated(round_, CASES):
                got[case] = {"write": write_all(clusters[case], size),
                             "read": read_all(clusters[case], args.read_seconds)}
                remove_all(clusters[case], baseline[clusters[case].name])
            line = []
            for direction in ("write", "read"):
                agent, none = got["agent"][direction], got["none"][direction]
                rate_ratios[direction].append(agent.rate / none.rate)
                cpu_ratios[direction].append(agent.cpu_per_gib / none.cpu_per_gib)
                line.append(f"{direction} agent {agent.rate / 1e6:.1f} none {none.rate / 1e6:.1f} MB/s "
                            f"(DataNode CPU {agent.cpu_per_gib:.2f} / {none.cpu_per_gib:.2f} s/GiB, "
                            f"depth {agent.depth_range()})")
            print(f"round {round_} (agent in {clusters['agent'].name.split('.')[-3]}): " + ", ".join(line), flush=True)
        if args.rounds:
            for direction in ("write", "read"):
                print(summary(f"{direction} throughput", rate_ratios[direction]))
                print(f"  by epoch: {epoch_medians(rate_ratios[direction], args.swap_every)}")
                print(summary(f"{direction} DataNode CPU per byte", cpu_ratios[direction], verdict=False))
                print(f"  by epoch: {epoch_medians(cpu_ratios[direction], args.swap_every)}")
    finally:
        for hdfs in pair:
            hdfs.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
