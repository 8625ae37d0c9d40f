"""Aggregate HDFS read bandwidth with vnode-sync managing VNodes at generous limits, against
no vnode-sync at all, alternating in the same run (target: within 3%).

    sudo .venv/bin/python -m benchmarks.hdfs_overhead [--rounds 10] [--file-mb 512] [--disk paced|zram|loop]

A real HDFS (2 DataNodes, each on a block device of its own) holds one file per user per DataNode. Each trial
drops the DataNodes' page cache and reads all of them at once through the native client,
two users, four readers. "managed": coordinator + one storage agent per DataNode, every
DataXceiver captured into its user's VNode, with node bandwidth --node-gbps (10 GB/s)
shared by Algorithm 1: limits far above what the disk does.
"none": no vnode-sync process running and no VNodes.

--disk paced (the default) is the case a DataNode on real disks is in: the disk is the
bottleneck and CPU is spare. Each DataNode's ext4 sits on a loop device that reads through
a FUSE server pacing reads to --disk-read-mbps (100 MB/s, one queue per disk;
testbed/paced_disk.py), because this VM has no device slower than its CPUs. --disk zram
puts each ext4 on a RAM block device instead: every read still goes through the block
layer, blk-throttle and the blkio counters, but the readers then keep both CPUs busy, so
the figure is CPU time per byte, and vnode-sync's own CPU and any scheduling disturbance
cost bandwidth one for one: the worst case, a CPU-saturated DataNode. --disk loop uses
loop devices over files on the VM's disk, which the host's cache serves at 2-3 GB/s, so
it is CPU-bound too, drifts by 10-30 % between trials, and gives each blkio cgroup a loop
worker of its own (managed > none).
Two figures per trial: the DataNode disks' read rate (from /proc/diskstats every 20 ms)
between the moments 10 % and 90 % of the trial's bytes were read, i.e. while the readers
were all busy, and all bytes over the wall time from starting the readers to the last
one ending (reader JVM start included, the same in both cases). After one unmeasured
warm-up trial, the cases take turns at each position in a round. The figure is the median of the
rounds' own managed/none ratios, with a bootstrap 95 % confidence interval. The summary
also splits each case's wall time in three (to 10 % of the bytes, with the readers' JVM
start; 10-90 %; the last 10 %), to show where a difference in wall time lies.

On this kind of VM two identical trials a minute apart differ by 10-20 %, and the
rate drifts by a factor up to two over a run (CPU time per byte, user and kernel alike,
changes with the host), so a handful of rounds cannot tell a 3 % overhead from noise.
--control adds a second "none" trial to every round: its ratio to the first is the
noise floor, measured in the same run with the same statistics.

--frozen adds a case that splits the managed cost in two: the coordinator and agents
start, set up the VNodes and limits and put the DataXceiverServer thread in the default
VNode, then are stopped (SIGSTOP) for the trial. Every DataXceiver is then born in the
throttled default VNode and stays there: the kernel side of management, without any
agent activity. The agents are continued (SIGCONT) before they are shut down.

--stop-after-capture adds a case stopped later: once each user's VNode on each node holds
a thread (the readers' first connections are captured), so the rest of the trial runs in
the users' VNodes, not the default one, again without agent activity.

Each trial also prints the VM's CPU time from /proc/stat (busy, idle, stolen by the host),
in CPUs: on zram the readers and DataNodes keep both CPUs busy, so the read rate here is
a measure of CPU time per byte, and anything else that runs costs bandwidth one for one.

--variant SECTION.KEY=YAML (repeatable) adds a second managed case, "variant", that differs
from "managed" only in those settings (sections: agent, discovery, policy; or sharing=work-conserving):
two ways of managing compared with each other and with none in the same run, e.g.
--variant discovery.events=poll or --variant sharing=work-conserving (VNodes shared by weight).
"""

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

import yaml

from benchmarks import machine_sample
from benchmarks.bootstrap import median_interval, target_verdict
from benchmarks.scenario_runner import rotated
from vnode_sync.errors import KernelError
from vnode_sync.kernel.backend import DEFAULT_VNODE, vnode_name
from vnode_sync.kernel.devices import scheduler
from vnode_sync.kernel.types import DeviceNumber
from testbed.hdfs_cluster import PACED_READ_MBPS, HdfsCluster, Transfer
from testbed.hdfs_vnode_cluster import node_vnodes, vnode_usage
from testbed.local_cluster import LocalCluster, LocalNode, LocalUser
from testbed.process_cpu import cpu_seconds as process_cpu_seconds
from testbed.processes import exit_once_on_signals

# Before each trial, in both cases: the agents' start-up is not what is measured, steady management is.
SETTLE_SECONDS = 3
MiB = 1 << 20
TARGET = 0.97  # within 3 %
CASE_MEANING = {"frozen": "VNodes and limits, no agent activity", "none again": "the noise floor",
                "stopped after capture": "threads in the users' VNodes, then no agent activity",
                "variant": "managed with the --variant settings"}
SECTIONS = ("agent", "discovery", "policy")
USERS = (LocalUser("bench-a", 64_601, 4), LocalUser("bench-b", 64_602, 8))


@dataclass(frozen=True)
class Management:
    """How a managed case runs vnode-sync: the policy's sharing and the settings of each config section."""
    sharing: str = "static"
    agent: dict = field(default_factory=dict)
    discovery: dict = field(default_factory=dict)
    policy: dict = field(default_factory=dict)

    def changed(self, assignments: list[str], option: str = "--variant") -> "Management":
        """A copy with SECTION.KEY=YAML (or sharing=...) assignments applied; `option` names them in errors."""
        sections = {name: dict(getattr(self, name)) for name in SECTIONS}
        sharing = self.sharing
        for item in assignments:
            key, equals, value = item.partition("=")
            section, _, setting = key.partition(".")
            if key == "sharing" and value in ("static", "work-conserving"):
                sharing = value
            elif equals and section in SECTIONS and setting:
                sections[section][setting] = yaml.safe_load(value)
            else:
                raise SystemExit(f"{option} {item!r}: expected sharing=static|work-conserving or "
                                 f"{{{','.join(SECTIONS)}}}.KEY=YAML")
        return Management(sharing, **sections)

    def describe(self) -> str:
        return f"sharing {self.sharing}, " + ", ".join(f"{name} {getattr(self, name)}" for name in SECTIONS)


@dataclass(frozen=True)
class Trial:
    disks: float         # DataNode disks' bytes/s over the middle 80 % of the trial's bytes
    wall: float          # all bytes / wall time from starting the readers to the last one ending
    in_users: float      # fraction of the bytes the blkio counters put in the users' VNodes
    in_default: float    # ... and in the default VNode
    cpu_seconds: float   # used by the coordinator and agents during the trial
    seconds: float       # the trial's wall time
    machine: dict[str, float]  # the VM's CPU time during the trial by /proc/stat state (busy, idle, steal), in CPUs
    phases: tuple[float, float, float]  # seconds to 10 % of the bytes, 10-90 %, 90 % to the end


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

    def moment(self, fraction: float) -> float:
        """When `fraction` of the bytes read in the sampling had been read (interpolated)."""
        first = self.samples[0][1]
        target = first + fraction * (self.samples[-1][1] - first)
        (t0, b0), (t1, b1) = next((a, b) for a, b in zip(self.samples, self.samples[1:]) if b[1] >= target)
        return t0 + (t1 - t0) * ((target - b0) / (b1 - b0) if b1 > b0 else 1.0)

    def middle_rate(self, low: float = 0.1, high: float = 0.9) -> float:
        """Bytes/s between the moments `low` and `high` of the bytes had been read (JVM start and
        the last reader's tail left out: what the disks delivered while all readers were busy)."""
        total = self.samples[-1][1] - self.samples[0][1]
        return (high - low) * total / (self.moment(high) - self.moment(low))

    def phases(self, started: float, ended: float) -> tuple[float, float, float]:
        """Seconds from `started` to 10 % of the bytes (reader JVM start included), from 10 to
        90 %, and from 90 % to `ended`: where a difference in wall time lies."""
        low, high = self.moment(0.1), self.moment(0.9)
        return low - started, high - low, ended - high


def cpu_seconds(cluster: LocalCluster | None) -> float:
    if cluster is None:
        return 0.0
    return sum(process_cpu_seconds(process.pid) for process in cluster.processes())


def machine_cpu() -> dict[str, float]:
    """The VM's CPU seconds since boot: busy, idle (with iowait) and steal (machine_sample.CpuTicks)."""
    cpu, tick = machine_sample.cpu_ticks(), os.sysconf("SC_CLK_TCK")
    return {"busy": cpu.busy / tick, "idle": cpu.idle / tick, "steal": cpu.steal / tick}


def read_all(hdfs: HdfsCluster, cluster: LocalCluster | None = None) -> Trial:
    hdfs.evict_page_cache()
    time.sleep(SETTLE_SECONDS)
    before, cpu_before, machine_before = charged_bytes(hdfs, cluster), cpu_seconds(cluster), machine_cpu()
    started = time.monotonic()
    with DiskSampler([dn.device_number for dn in hdfs.datanodes]) as disks:
        readers = [hdfs.start_read(f"/{u.name}/on-{dn.id}.bin", as_uid=u.uid, hdfs_user=u.name)
                   for u in USERS for dn in hdfs.datanodes]
        total = sum(Transfer.parse(r.communicate()[0]).bytes for r in readers)
    ended = time.monotonic()
    wall = ended - started
    in_users, in_default = ((after - start) / total for after, start in zip(charged_bytes(hdfs, cluster), before))
    machine = {state: (seconds - machine_before[state]) / wall for state, seconds in machine_cpu().items()}
    return Trial(disks.middle_rate(), total / wall, in_users, in_default, cpu_seconds(cluster) - cpu_before, wall,
                 machine, disks.phases(started, ended))


def charged_bytes(hdfs: HdfsCluster, cluster: LocalCluster | None) -> tuple[int, int]:
    """Bytes read from the DataNodes' disks by threads in the users' VNodes and in the default
    VNode (zero without vnode-sync)."""
    if cluster is None:
        return 0, 0
    def read_by(vnode: str) -> int:
        return sum(vnode_usage(cluster, dn, vnode).read_bytes for dn in hdfs.datanodes)
    return sum(read_by(vnode_name(user.name)) for user in USERS), read_by(DEFAULT_VNODE)


@contextlib.contextmanager
def stopped(cluster: LocalCluster):
    """The coordinator and agents stopped (SIGSTOP) once each agent has put its DataNode's
    DataXceiverServer thread in the default VNode, so every handler is born there."""
    backends = [node_vnodes(cluster, node.node_id) for node in cluster.nodes]
    cluster.wait_for(lambda: all(backend.members(DEFAULT_VNODE) for backend in backends), timeout=20,
                     what="each DataXceiverServer thread in its default VNode")
    processes = cluster.processes()
    signal_all(processes, signal.SIGSTOP)
    try:
        yield
    finally:
        signal_all(processes, signal.SIGCONT)


def signal_all(processes: list[subprocess.Popen], signum: int) -> None:
    for process in processes:
        os.kill(process.pid, signum)


@contextlib.contextmanager
def stopped_once_captured(cluster: LocalCluster):
    """The coordinator and agents stopped (SIGSTOP) as soon as each user's VNode on each node
    holds a thread, i.e. the readers' first connections are captured: the rest of the trial
    runs in the users' VNodes without agent activity."""
    backends = [node_vnodes(cluster, node.node_id) for node in cluster.nodes]
    processes = cluster.processes()
    done = threading.Event()

    def captured() -> bool:
        try:
            return all(backend.members(vnode_name(user.name)) for backend in backends for user in USERS)
        except KernelError:
            return False  # a VNode not made yet

    def stop_when_captured() -> None:
        while not done.wait(0.005):
            if captured():
                signal_all(processes, signal.SIGSTOP)
                return

    watcher = threading.Thread(target=stop_when_captured, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        signal_all(processes, signal.SIGCONT)


def describe(trial: Trial) -> str:
    cpus = " ".join(f"{state} {value:.2f}" for state, value in trial.machine.items())
    return f"{trial.disks / 1e6:6.1f} MB/s ({trial.wall / 1e6:6.1f} wall; CPUs {cpus})"


def main() -> int:
    exit_once_on_signals()  # a kill still stops HDFS and unmounts its disks
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--file-mb", type=int, default=512)
    parser.add_argument("--disk", choices=("paced", "zram", "loop"), default="paced",
                        help="DataNode disks: paced (reads paced like a real disk's: disk-bound), zram (RAM "
                             "block devices: CPU-bound) or loop (files on the VM's disk)")
    parser.add_argument("--disk-read-mbps", type=float, default=PACED_READ_MBPS,
                        help="a paced disk's read rate per DataNode, MB/s")
    parser.add_argument("--node-gbps", type=float, default=10,
                        help="node bandwidth given to the coordinator, GB/s (far above what the disk does)")
    parser.add_argument("--agent-set", action="append", default=[], metavar="KEY=YAML",
                        help="an agent config setting for the managed case, e.g. fast_thread_moves=false")
    parser.add_argument("--discovery-set", action="append", default=[], metavar="KEY=YAML",
                        help="an HDFS discovery setting, e.g. spawner_in_default=false")
    parser.add_argument("--policy-set", action="append", default=[], metavar="KEY=YAML",
                        help="a coordinator policy setting, e.g. default_vnode_fraction=1.0")
    parser.add_argument("--control", action="store_true",
                        help="a second no-vnode-sync trial each round: its ratio to the first is the noise floor")
    parser.add_argument("--frozen", action="store_true",
                        help="a case with vnode-sync set up, then stopped: VNodes and limits without agent activity")
    parser.add_argument("--stop-after-capture", action="store_true",
                        help="a case whose vnode-sync is stopped once the readers' first connections are "
                             "captured: the users' VNodes without agent activity")
    parser.add_argument("--sharing", choices=("static", "work-conserving"), default="static",
                        help="work-conserving: VNodes shared by weight (BFQ; none on a zram disk) or the step's caps")
    parser.add_argument("--variant", action="append", default=[], metavar="SECTION.KEY=YAML",
                        help="a second managed case with this change, e.g. discovery.events=poll, "
                             "agent.fast_thread_moves=false, policy.default_vnode_fraction=1.0, sharing=work-conserving")
    args = parser.parse_args()
    managed = Management(args.sharing)
    for section, items in zip(SECTIONS, (args.agent_set, args.discovery_set, args.policy_set)):
        managed = managed.changed([f"{section}.{item}" for item in items], option=f"--{section}-set")
    managements = {"managed": managed, "frozen": managed, "stopped after capture": managed}
    if args.variant:
        managements["variant"] = managed.changed(args.variant)
    disk_mb = 2 * args.file_mb + 512
    name = f"vnode-sync-bench.overhead.{int(time.time())}"
    cases = (("none", "managed") + (("variant",) if args.variant else ()) + (("frozen",) if args.frozen else ())
             + (("stopped after capture",) if args.stop_after_capture else ())
             + (("none again",) if args.control else ()))
    results: dict[str, list[Trial]] = {case: [] for case in cases}
    with HdfsCluster(name, datanodes=2, disk_mb=disk_mb, disk=args.disk, disk_read_mbps=args.disk_read_mbps) as hdfs:
        for user in USERS:
            for dn in hdfs.datanodes:
                hdfs.write_file(f"/{user.name}/on-{dn.id}.bin", args.file_mb * MiB, as_uid=user.uid,
                                hdfs_user=user.name, on_datanode=dn)
        generous = int(args.node_gbps * 1e9)
        disks = ", ".join(f"{dn.loop_device} (scheduler {scheduler(dn.device_number) or 'none, bio-based'})"
                          for dn in hdfs.datanodes)
        paced = f", reads paced to {args.disk_read_mbps:g} MB/s each" if args.disk == "paced" else ""
        print(f"DataNode disks ({args.disk}{paced}): {disks}; load average {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} CPUs; node bandwidth {args.node_gbps:g} GB/s; managed: {managed.describe()}"
              + (f"; variant: {managements['variant'].describe()}" if args.variant else ""), flush=True)
        read_all(hdfs)  # warm-up: JIT, NameNode caches
        for round_ in range(args.rounds):
            for case in rotated(round_, cases):
                if case not in managements:
                    results[case].append(read_all(hdfs))
                    continue
                how = managements[case]
                nodes = [LocalNode(dn.id, (dn.loop_device,), generous, generous,
                                   {"kind": "hdfs", "pid": dn.pid, **how.discovery}) for dn in hdfs.datanodes]
                with LocalCluster(f"{name}.{round_}", list(USERS), nodes, sharing=how.sharing, agent_settings=how.agent,
                                  coordinator_settings={"policy": how.policy}) as cluster:
                    if case == "frozen":
                        with stopped(cluster):
                            results[case].append(read_all(hdfs, cluster))
                    elif case == "stopped after capture":
                        with stopped_once_captured(cluster):
                            results[case].append(read_all(hdfs, cluster))
                    else:
                        results[case].append(read_all(hdfs, cluster))
            charged = ", ".join(f"{case} {100 * results[case][-1].in_users:.0f} % (default VNode "
                                f"{100 * results[case][-1].in_default:.0f} %)" for case in cases if case in managements)
            print(f"round {round_ + 1:2d}: " + ", ".join(f"{case} {describe(results[case][-1])}" for case in cases)
                  + f"; bytes charged to the users' VNodes: {charged}", flush=True)
    print(f"\naggregate HDFS read over {args.rounds} rounds "
          f"(4 readers, 2 DataNodes, {args.file_mb} MiB files, {args.disk} disks):")
    for label, metric in (("DataNode disks, middle 80 %", "disks"), ("all bytes / wall time", "wall")):
        none = statistics.median(getattr(t, metric) for t in results["none"])
        managed = statistics.median(getattr(t, metric) for t in results["managed"])
        print(f"  {label}: medians none {none / 1e6:.1f} MB/s, managed {managed / 1e6:.1f} MB/s")
        pairs = [(case, "none") for case in cases[1:]] + [("variant", "managed")] * ("variant" in cases)
        for case, base in pairs:
            paired = [getattr(m, metric) / getattr(n, metric) for m, n in zip(results[case], results[base])]
            low, high = median_interval(paired)
            middle = statistics.median(paired)
            verdict = (f"overhead {100 * (1 - middle):+.1f} %, target within 3 %: "
                       f"{target_verdict(middle, low, len(paired), TARGET, 'met')}"
                       if case == "managed" else CASE_MEANING[case])
            print(f"    {case}/{base} per round: median {middle:.3f} (95 % CI {low:.3f} .. {high:.3f}; "
                  f"range {min(paired):.3f} .. {max(paired):.3f}); {verdict}")
    print("  the VM's CPUs during trials, medians (busy CPU seconds per GiB read; CPUs busy, idle, stolen by the host):")
    for case in cases:
        per_gib = statistics.median(t.machine["busy"] / t.wall * (1 << 30) for t in results[case])
        states = ", ".join(f"{state} {statistics.median(t.machine[state] for t in results[case]):.2f}"
                           for state in results[case][0].machine)
        print(f"    {case}: {per_gib:.2f} CPU s/GiB; {states}")
    print("  where the wall time goes, medians (seconds to 10 % of the bytes, incl. reader JVM start; 10-90 %; "
          "last 10 %):")
    for case in cases:
        to_10, middle, last = (statistics.median(t.phases[i] for t in results[case]) for i in range(3))
        print(f"    {case}: {to_10:.2f} + {middle:.2f} + {last:.2f} s")
    lowest = min(t.in_users for t in results["managed"])
    cpu = sum(t.cpu_seconds for t in results["managed"]) / sum(t.seconds for t in results["managed"])
    print(f"  managed trials charged at least {100 * lowest:.0f} % of their bytes to the users' VNodes; "
          f"coordinator + agents used {cpu:.3f} CPUs on average during them ({os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
