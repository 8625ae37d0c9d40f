"""The kernel-waits sampler: it follows the threads a name prefix picks, tells short-lived ones (one
short transfer each) from long-lived ones, and counts their uninterruptible sleeps by kernel function."""

import collections
import subprocess
import sys
import time

from benchmarks.kernel_waits import KernelWaits, ThreadWaits

# A child with two named threads: "DataXceiver a" lives 0.2 s, "DataXceiver b" until stdin closes.
CHILD = r"""
import ctypes, sys, threading, time
libc = ctypes.CDLL(None)
def named(name, seconds):
    libc.prctl(15, name.encode(), 0, 0, 0)   # PR_SET_NAME: the thread's comm
    time.sleep(seconds)
threading.Thread(target=named, args=("DataXceiver a", 0.2)).start()
threading.Thread(target=named, args=("DataXceiver b", 3600), daemon=True).start()
threading.Thread(target=named, args=("Other thread", 3600), daemon=True).start()
print("ready", flush=True)
sys.stdin.read()
"""


def test_it_follows_only_the_prefixed_threads_and_tells_short_lived_from_long_lived():
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        with KernelWaits(child.pid) as waits:
            time.sleep(1.5)
    finally:
        child.stdin.close()
        child.wait(10)
    lived = sorted(w.last - w.first for w in waits.threads.values())
    assert len(lived) == 2, f"two DataXceiver threads, not the other one: {lived}"
    assert lived[0] < 0.3 and lived[1] > 1.2
    assert "short-lived (< 1 s: one short transfer each) threads: 1" in waits.summary()
    assert "long-lived threads: 1" in waits.summary()


def test_its_summary_gives_each_kernel_function_its_share_of_the_samples():
    waits = KernelWaits(pid=0)
    waits.threads = {
        1: ThreadWaits(0.0, 0.1, samples=10, sleeps=collections.Counter(balance_dirty_pages=4)),
        2: ThreadWaits(0.0, 0.2, samples=10, sleeps=collections.Counter(balance_dirty_pages=2, rq_qos_wait=1)),
        3: ThreadWaits(0.0, 5.0, samples=100, sleeps=collections.Counter(do_get_write_access=5)),
    }
    lines = waits.summary().splitlines()
    assert lines[0].endswith("threads: 2, 20 samples; asleep in the kernel: balance_dirty_pages 30%, rq_qos_wait 5%")
    assert lines[1] == "long-lived threads: 1, 100 samples; asleep in the kernel: do_get_write_access 5%"


def test_the_longest_short_lived_threads_come_first_with_their_samples_by_state():
    waits = KernelWaits(pid=0)
    waits.threads = {
        1: ThreadWaits(0.0, 0.040, samples=8, states=collections.Counter(R=8)),
        2: ThreadWaits(0.0, 0.125, samples=21, sleeps=collections.Counter(wait_transaction_locked=15),
                       states=collections.Counter(D=15, R=3, S=3)),
        3: ThreadWaits(0.0, 5.0, samples=900, states=collections.Counter(S=900)),   # long-lived: not listed
    }
    assert waits.longest_short_lived(5).splitlines() == [
        "seen 125 ms, 21 samples: D 15 R 3 S 3 (D in wait_transaction_locked 15)",
        "seen 40 ms, 8 samples: R 8",
    ]
