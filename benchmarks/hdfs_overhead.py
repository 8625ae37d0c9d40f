"""Aggregate HDFS read bandwidth with vnode-sync managing VNodes at generous limits, against
no vnode-sync at all, alternating in the same run (target: within 3%).

    sudo .venv/bin/python benchmarks/hdfs_overhead.py [--rounds 10] [--file-mb 512] [--disk zram|loop]

A real HDFS (2 DataNodes, each on a block device of its own) holds one file per user per DataNode. Each trial
drops the DataNodes' page cache and reads all of them at once through the native client,
two users, four readers. "managed": coordinator + one storage agent per DataNode, every
DataXceiver captured into its user's VNode, with node bandwidth --node-gbps (10 GB/s)
shared by Algorithm 1: limits far above what the disk does.
"none": no vnode-sync process running and no VNodes.

--disk zram (the default) puts each DataNode's ext4 on a zram device: a block device in
RAM, so every read still goes through the block layer, blk-throttle and the blkio
counters, but at a speed that does not drift, and vnode-sync's own costs weigh more
against it than against a disk. --disk loop uses the testbed's usual loop devices over
files on the VM's disk; two things skew those here: the VM disk's throughput drifts by
10-30 % between trials, and a loop device runs one worker per blkio cgroup, so reads
spread over VNodes get more parallel service than reads from one cgroup (managed > none).
Two figures per trial: the DataNode disks' read rate (from /proc/diskstats every 20 ms)
between the moments 10 % and 90 % of the trial's bytes were read, i.e. while the readers
were all busy, and all bytes over the wall time from starting the readers to the last
one ending (reader JVM start included, the same in both cases). Rounds alternate which
case goes first, after one unmeasured warm-up trial; the ratio is of the medians,
managed/none, and each round's own managed/none ratio is printed as well (their spread
is the noise of the measurement).
"""

import argparse
import os
import signal
import statistics
import sys
import threading
import time
from dataclasses import dataclass

import psutil
import yaml

from vnode_sync.kernel.backend import vnode_name
from vnode_sync.kernel.devices import scheduler
from vnode_sync.kernel.types import DeviceNumber
from vnode_sync.testbed.hdfs_cluster import HdfsCluster, Transfer
from vnode_sync.testbed.hdfs_vnode_cluster import vnode_usage
from vnode_sync.testbed.local_cluster import LocalCluster, LocalNode, LocalUser

# Before each trial, in both cases: the agents' start-up is not what is measured, steady management is.
SETTLE_SECONDS = 3
MiB = 1 << 20
USERS = (LocalUser("bench-a", 64_601, 4), LocalUser("bench-b", 64_602, 8))


@dataclass(frozen=True)
class Trial:
    disks: float         # DataNode disks' bytes/s over the middle 80 % of the trial's bytes
    wall: float          # all bytes / wall time from starting the readers to the last one ending
    charged: float       # fraction of the bytes the blkio counters put in the users' VNodes
    cpu_seconds: float   # used by the coordinator and agents during the trial
    seconds: float       # the trial's wall time


class DiskSampler:
    """Bytes read from some block devices, sampled from /proc/diskstats every 20 ms in a thread."""

    def __init__(self, devices: list[DeviceNumber]):
        self.devices = {(d.major, d.minor) for d in devices}
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _read(self) -> int:
        with open("/proc/diskstats") as f:
            return sum(int(fields[5]) * 512 for fields in (line.split() for line in f)
                       if (int(fields[0]), int(fields[1])) in self.devices)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), self._read()))
            self._stop.wait(0.02)

    def __enter__(self) -> "DiskSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append((time.monotonic(), self._read()))

    def middle_rate(self, low: float = 0.1, high: float = 0.9) -> float:
        """Bytes/s between the moments `low` and `high` of the bytes had been read (JVM start and
        the last reader's tail left out: what the disks delivered while all readers were busy)."""
        first = self.samples[0][1]
        total = self.samples[-1][1] - first
        moments = []
        for fraction in (low, high):
            target = first + fraction * total
            (t0, b0), (t1, b1) = next((a, b) for a, b in zip(self.samples, self.samples[1:]) if b[1] >= target)
            moments.append(t0 + (t1 - t0) * ((target - b0) / (b1 - b0) if b1 > b0 else 1.0))
        return (high - low) * total / (moments[1] - moments[0])


def cpu_seconds(cluster: LocalCluster | None) -> float:
    if cluster is None:
        return 0.0
    total = 0.0
    for process in [cluster.coordinator, *cluster.agents.values()]:
        times = psutil.Process(process.pid).cpu_times()
        total += times.user + times.system
    return total


def read_all(hdfs: HdfsCluster, cluster: LocalCluster | None = None) -> Trial:
    hdfs.evict_page_cache()
    time.sleep(SETTLE_SECONDS)
    before, cpu_before = charged_bytes(hdfs, cluster), cpu_seconds(cluster)
    started = time.monotonic()
    with DiskSampler([dn.device_number for dn in hdfs.datanodes]) as disks:
        readers = [hdfs.start_read(f"/{u.name}/on-{dn.id}.bin", as_uid=u.uid, hdfs_user=u.name)
                   for u in USERS for dn in hdfs.datanodes]
        total = sum(Transfer.parse(r.communicate()[0]).bytes for r in readers)
    wall = time.monotonic() - started
    charged = (charged_bytes(hdfs, cluster) - before) / total if cluster else 0.0
    return Trial(disks.middle_rate(), total / wall, charged, cpu_seconds(cluster) - cpu_before, wall)


def charged_bytes(hdfs: HdfsCluster, cluster: LocalCluster | None) -> int:
    """Bytes read from the DataNodes' disks by threads in the users' VNodes (0 without vnode-sync)."""
    if cluster is None:
        return 0
    return sum(vnode_usage(cluster, dn, vnode_name(user.name)).read_bytes for dn in hdfs.datanodes for user in USERS)


def main() -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a kill still stops HDFS and unmounts
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--file-mb", type=int, default=512)
    parser.add_argument("--disk", choices=("zram", "loop"), default="zram",
                        help="DataNode disks: zram (RAM block devices, steady) or loop (files on the VM's disk)")
    parser.add_argument("--node-gbps", type=float, default=10,
                        help="node bandwidth given to the coordinator, GB/s (far above what the disk does)")
    parser.add_argument("--agent-set", action="append", default=[], metavar="KEY=YAML",
                        help="an agent config setting for the managed case, e.g. fast_thread_moves=false")
    parser.add_argument("--discovery-set", action="append", default=[], metavar="KEY=YAML",
                        help="an HDFS discovery setting, e.g. spawner_in_default=false")
    parser.add_argument("--policy-set", action="append", default=[], metavar="KEY=YAML",
                        help="a coordinator policy setting, e.g. default_vnode_fraction=1.0")
    parser.add_argument("--policy-mode", choices=("throttle", "weight"), default="throttle",
                        help="weight: VNodes with BFQ weights instead of throttles (none on a zram disk)")
    args = parser.parse_args()
    agent_settings, discovery_settings, policy = (
        {key: yaml.safe_load(value) for key, _, value in (item.partition("=") for item in items)}
        for items in (args.agent_set, args.discovery_set, args.policy_set))
    disk_mb = 2 * args.file_mb + 512
    name = f"vnode-sync-bench.overhead.{int(time.time())}"
    results: dict[str, list[Trial]] = {"none": [], "managed": []}
    with HdfsCluster(name, datanodes=2, disk_mb=disk_mb, disk=args.disk) as hdfs:
        for user in USERS:
            for dn in hdfs.datanodes:
                hdfs.write_file(f"/{user.name}/on-{dn.id}.bin", args.file_mb * MiB, as_uid=user.uid,
                                hdfs_user=user.name, on_datanode=dn)
        generous = int(args.node_gbps * 1e9)
        nodes = [LocalNode(dn.id, (dn.loop_device,), generous, generous,
                           {"kind": "hdfs", "pid": dn.pid, **discovery_settings}) for dn in hdfs.datanodes]
        disks = ", ".join(f"{dn.loop_device} (scheduler {scheduler(dn.device_number) or 'none, bio-based'})"
                          for dn in hdfs.datanodes)
        print(f"DataNode disks ({args.disk}): {disks}; "
              f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; agent settings {agent_settings}, "
              f"discovery {discovery_settings}, policy {args.policy_mode} {policy}, node bandwidth "
              f"{args.node_gbps:g} GB/s",
              flush=True)
        read_all(hdfs)  # warm-up: JIT, NameNode caches
        for round_ in range(args.rounds):
            for case in (("none", "managed") if round_ % 2 == 0 else ("managed", "none")):
                if case == "none":
                    results["none"].append(read_all(hdfs))
                else:
                    with LocalCluster(f"{name}.{round_}", list(USERS), nodes, mode=args.policy_mode,
                                      agent_settings=agent_settings,
                                      coordinator_settings={"policy": policy}) as cluster:
                        results["managed"].append(read_all(hdfs, cluster))
            none, managed = results["none"][-1], results["managed"][-1]
            print(f"round {round_ + 1:2d}: none {none.disks / 1e6:6.1f} MB/s ({none.wall / 1e6:6.1f} wall), "
                  f"managed {managed.disks / 1e6:6.1f} MB/s ({managed.wall / 1e6:6.1f} wall, "
                  f"{100 * managed.charged:.0f} % of bytes charged to the users' VNodes)", flush=True)
    print(f"\naggregate HDFS read, median of {args.rounds} rounds "
          f"(4 readers, 2 DataNodes, {args.file_mb} MiB files, {args.disk} disks):")
    for label, metric in (("DataNode disks, middle 80 %", "disks"), ("all bytes / wall time", "wall")):
        none = statistics.median(getattr(t, metric) for t in results["none"])
        managed = statistics.median(getattr(t, metric) for t in results["managed"])
        paired = [getattr(m, metric) / getattr(n, metric) for m, n in zip(results["managed"], results["none"])]
        print(f"  {label}: none {none / 1e6:.1f} MB/s, managed {managed / 1e6:.1f} MB/s, "
              f"ratio {managed / none:.3f} (overhead {100 * (1 - managed / none):+.1f} %, target within 3 %); "
              f"per-round ratios median {statistics.median(paired):.3f}, {min(paired):.3f} .. {max(paired):.3f}")
    lowest = min(t.charged for t in results["managed"])
    cpu = sum(t.cpu_seconds for t in results["managed"]) / sum(t.seconds for t in results["managed"])
    print(f"  managed trials charged at least {100 * lowest:.0f} % of their bytes to the users' VNodes; "
          f"coordinator + agents used {cpu:.3f} CPUs on average during them ({os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
