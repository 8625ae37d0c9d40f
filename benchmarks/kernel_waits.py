"""Where a process's transfer threads sleep in the kernel: their wchan every few ms, for a benchmark to print.

A DataNode thread that writes a block can be paused by the kernel (balance_dirty_pages: the device's
dirty page cache is over its limit, and the kernel paces every writer of the device alike), wait
for the block layer (rq_qos_wait) or for the journal (do_get_write_access); none of that is the
DataNode's scheduler's, which counts only its own waits. The sampler reads /proc/PID/task/*/stat
and wchan of the threads whose name starts with a prefix ("DataXceiver" in a DataNode), and counts,
per thread, the samples it was seen in and those it slept uninterruptibly (D) in each kernel function.
Reading every thread's files every SAMPLE_SECONDS costs a fair part of a core: a diagnostic, not a
measurement of speed.
"""

import collections
import os
import threading
import time
from dataclasses import dataclass, field

SAMPLE_SECONDS = 0.005
SHORT_SECONDS = 1.0   # a thread seen for less than this served one short transfer


@dataclass
class ThreadWaits:
    first: float
    last: float
    samples: int = 0
    sleeps: collections.Counter = field(default_factory=collections.Counter)   # wchan -> samples in D
    states: collections.Counter = field(default_factory=collections.Counter)   # R (on or waiting for a core), S, D


class KernelWaits:
    """Samples PID's threads named PREFIX... in a thread of its own while the `with` block runs."""

    def __init__(self, pid: int, prefix: str = "DataXceiver"):
        self.pid, self.prefix = pid, prefix
        self.threads: dict[int, ThreadWaits] = {}
        self._done = threading.Event()
        self._sampler = threading.Thread(target=self._sample, name="kernel-waits", daemon=True)

    def __enter__(self) -> "KernelWaits":
        self._sampler.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._sampler.join()

    def _sample(self) -> None:
        tasks = f"/proc/{self.pid}/task"
        while not self._done.wait(SAMPLE_SECONDS):
            now = time.monotonic()
            try:
                tids = os.listdir(tasks)
            except OSError:
                return   # the process is gone
            for tid in tids:
                try:
                    with open(f"{tasks}/{tid}/stat") as f:
                        stat = f.read()
                    name = stat[stat.index("(") + 1:stat.rindex(")")]
                    if not name.startswith(self.prefix):
                        continue
                    state = stat[stat.rindex(")") + 2]
                    wchan = ""
                    if state == "D":
                        with open(f"{tasks}/{tid}/wchan") as f:
                            wchan = f.read().strip()
                        wchan = "" if wchan == "0" else wchan   # woken between the two reads
                except (OSError, ValueError):
                    continue   # the thread ended between the listing and the read
                waits = self.threads.setdefault(int(tid), ThreadWaits(now, now))
                waits.last = now
                waits.samples += 1
                waits.states[state] += 1
                if wchan:
                    waits.sleeps[wchan] += 1

    def summary(self) -> str:
        """Per kind of thread (short-lived: one short transfer each; long-lived), the share of its
        samples asleep in each kernel function, most first."""
        lines = []
        for kind, short in (("short-lived (< 1 s: one short transfer each)", True), ("long-lived", False)):
            chosen = [w for w in self.threads.values() if (w.last - w.first < SHORT_SECONDS) == short]
            samples = sum(w.samples for w in chosen)
            if not samples:
                continue
            sleeps = sum((w.sleeps for w in chosen), collections.Counter())
            asleep = ", ".join(f"{name} {100 * n / samples:.0f}%" for name, n in sleeps.most_common(4)) or "none"
            lines.append(f"{kind} threads: {len(chosen)}, {samples} samples; asleep in the kernel: {asleep}")
        return "\n".join(lines)

    def longest_short_lived(self, count: int) -> str:
        """The COUNT short-lived threads seen longest (the slow transfers'), each with its samples by
        state (R: running or waiting for a core; S: asleep, e.g. on its socket or parked by the
        DataNode's scheduler; D: in the kernel, by function)."""
        short = [w for w in self.threads.values() if w.last - w.first < SHORT_SECONDS]
        lines = []
        for w in sorted(short, key=lambda w: w.last - w.first, reverse=True)[:count]:
            states = " ".join(f"{state} {n}" for state, n in sorted(w.states.items()))
            asleep = ", ".join(f"{name} {n}" for name, n in w.sleeps.most_common(3))
            lines.append(f"seen {1000 * (w.last - w.first):.0f} ms, {w.samples} samples: {states}"
                         + (f" (D in {asleep})" if asleep else ""))
        return "\n".join(lines)
