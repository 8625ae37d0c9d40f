"""benchmarks.machine_sample: steal, iowait, reclaim and the DataNodes' GC CPU read from a /proc tree."""

import os

from benchmarks import machine_sample
from benchmarks.machine_sample import Sample, describe, take


def write_proc(root, steal, iowait, allocstall, gc_utime, other_utime):
    (root / "stat").write_text(f"cpu  100 0 50 1000 {iowait} 0 3 {steal} 0 0\ncpu0 1 2 3\n")
    (root / "vmstat").write_text(f"nr_dirty 500\nallocstall_normal {allocstall}\ncompact_stall 1\n"
                                 "pgscan_direct_throttle 7\n")
    for tid, comm, utime in ((11, "GC Thread#0", gc_utime), (12, "DataXceiver for", other_utime)):
        task = root / "10" / "task" / str(tid)
        task.mkdir(parents=True, exist_ok=True)
        # utime and stime are fields 14 and 15; a name may hold spaces and parentheses
        task.joinpath("stat").write_text(f"{tid} ({comm}) S 1 1 1 0 -1 0 0 0 0 0 {utime} 2 0 0 20 0 1 0\n")


def test_a_sample_reads_steal_iowait_reclaim_and_only_the_gc_threads_cpu(tmp_path):
    write_proc(tmp_path, steal=222, iowait=267, allocstall=4, gc_utime=30, other_utime=900)
    assert take([10, 99999], proc=str(tmp_path)) == Sample(steal_ticks=222, iowait_ticks=267, reclaim=5,
                                                             gc_ticks=32)


def test_describe_prints_what_grew_in_milliseconds(tmp_path):
    write_proc(tmp_path, steal=222, iowait=267, allocstall=4, gc_utime=30, other_utime=900)
    before = take([10], proc=str(tmp_path))
    write_proc(tmp_path, steal=232, iowait=267, allocstall=6, gc_utime=35, other_utime=5000)
    tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
    assert describe(before, take([10], proc=str(tmp_path))) == (
        f"machine: steal {10 * tick_ms:.0f} ms, iowait 0 ms, direct reclaim/compaction 2, "
        f"DataNode GC {5 * tick_ms:.0f} ms CPU")


def test_cpu_ticks_sum_busy_and_idle_states(tmp_path):
    write_proc(tmp_path, steal=222, iowait=267, allocstall=4, gc_utime=30, other_utime=900)
    # cpu user nice system idle iowait irq softirq steal
    assert machine_sample.cpu_ticks(str(tmp_path)) == machine_sample.CpuTicks(busy=153, idle=1267, iowait=267,
                                                                               steal=222)


def test_the_running_machine_can_be_sampled():
    sample = take([os.getpid()])
    assert sample.steal_ticks >= 0 and sample.gc_ticks >= 0 and machine_sample.RECLAIM_COUNTERS
