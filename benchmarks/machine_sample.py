"""What the machine did over a stretch of a benchmark, besides the benchmark: CPU the hypervisor took
from the VM (steal), time the CPUs waited on the disk, the kernel's direct reclaim and compaction, and
the CPU the DataNodes' JVMs spent in garbage collection.

A slow pass of an interactive benchmark that no scheduler wait explains had to lose its time somewhere
(docs/edge.md); sampled before and after each cell, these say whether it was the machine.
All of it is read from /proc, so sampling costs no process of its own.
"""

import os
from collections.abc import Iterable
from dataclasses import dataclass

# /proc/vmstat counters that grow while an allocation waits for memory.
RECLAIM_COUNTERS = ("allocstall_normal", "allocstall_movable", "pgscan_direct", "compact_stall")
# Thread names of HotSpot's collectors (G1, Parallel, Serial) and of the VM thread that runs their pauses.
GC_THREAD_PREFIXES = ("GC Thread", "G1 ", "VM Thread", "Parallel GC")


@dataclass(frozen=True)
class Sample:
    steal_ticks: int
    iowait_ticks: int
    reclaim: int
    gc_ticks: int


@dataclass(frozen=True)
class CpuTicks:
    """The VM's CPU time since boot, summed over the CPUs, in clock ticks."""
    busy: int     # user, nice, system, interrupts
    idle: int     # with iowait
    iowait: int
    steal: int    # the host ran something else while this VM wanted a CPU


def cpu_ticks(proc: str = "/proc") -> CpuTicks:
    with open(f"{proc}/stat", encoding="ascii") as f:
        user, nice, system, idle, iowait, irq, softirq, steal = (int(v) for v in f.readline().split()[1:9])
    return CpuTicks(busy=user + nice + system + irq + softirq, idle=idle + iowait, iowait=iowait, steal=steal)


def reclaim_events(proc: str = "/proc") -> int:
    total = 0
    with open(f"{proc}/vmstat", encoding="ascii") as f:
        for line in f:
            name, _, value = line.partition(" ")
            if name in RECLAIM_COUNTERS:
                total += int(value)
    return total


def gc_ticks(pids: Iterable[int], proc: str = "/proc") -> int:
    """User and system ticks of PIDS' garbage-collector threads; a process that is gone counts 0."""
    total = 0
    for pid in pids:
        try:
            tids = os.listdir(f"{proc}/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"{proc}/{pid}/task/{tid}/stat", encoding="ascii", errors="replace") as f:
                    stat = f.read()
            except OSError:
                continue   # the thread ended between the listing and the read
            comm = stat[stat.index("(") + 1:stat.rindex(")")]
            if comm.startswith(GC_THREAD_PREFIXES):
                after_comm = stat[stat.rindex(")") + 2:].split()
                total += int(after_comm[11]) + int(after_comm[12])   # utime, stime (fields 14, 15)
    return total


def take(jvm_pids: Iterable[int] = (), proc: str = "/proc") -> Sample:
    cpu = cpu_ticks(proc)
    return Sample(cpu.steal, cpu.iowait, reclaim_events(proc), gc_ticks(jvm_pids, proc))


def describe(before: Sample, after: Sample) -> str:
    tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
    return (f"machine: steal {(after.steal_ticks - before.steal_ticks) * tick_ms:.0f} ms, "
            f"iowait {(after.iowait_ticks - before.iowait_ticks) * tick_ms:.0f} ms, "
            f"direct reclaim/compaction {after.reclaim - before.reclaim}, "
            f"DataNode GC {(after.gc_ticks - before.gc_ticks) * tick_ms:.0f} ms CPU")
