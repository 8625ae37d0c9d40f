"""What giving transfer threads CPU by weight costs per op (docs/edge.md G10), on this host's kernel.

    sudo .venv/bin/python -m benchmarks.cpu_shares_cost [--rounds 2000]

- In the DataNode: OpThreads.started + ended in the op's own thread (OpThreadsCost, compiled by
  scripts/setup.d/datanode-throttle.sh), with no watcher, with one, and on a new thread.
- In the storage agent: one op's line taken (`CpuShares.take`: the /proc check and, when the thread is
  in another group, the write to `tasks`), for a thread that moves between two users' groups at every
  op (the worst case: a connection whose ops alternate users) and for one whose user stays (no move).
  Real cgroup v1 cpu groups under this process's own, removed at the end; median and p99 microseconds.
  The move's cost depends on the kernel's cgroup favordynmods mode (vnode_sync/kernel/fast_moves.py),
  which the storage agent turns on: it is reported as found.
"""

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time

from testbed.names import unique_name
from vnode_sync.datanode.cpu_shares import CpuShares, OpThread
from vnode_sync.kernel.backend import HostCgroups
from vnode_sync.kernel.fast_moves import favoured_by

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEST_CLASSES = os.path.join(REPO, "agents", "datanode-throttle", "target", "test-classes")


def java_side(rounds: int) -> int:
    from testbed.hdfs_cluster import datanode_throttle_jar   # imported only for a run: it is slow to load

    result = subprocess.run(["java", "-cp", f"{datanode_throttle_jar()}:{TEST_CLASSES}",
                             "org.vnodesync.dnthrottle.OpThreadsCost", str(rounds * 10)], capture_output=True, text=True)
    print(result.stdout, end="")
    if result.returncode != 0:
        print(result.stderr.strip()[-2000:], file=sys.stderr)
    return result.returncode


def agent_side(rounds: int) -> None:
    release = threading.Event()
    worker = threading.Thread(target=release.wait, daemon=True)
    worker.start()
    cpu = CpuShares("/nonexistent", unique_name("cpu-cost"), HostCgroups())
    cpu.attach(os.getpid())
    cpu.set_weights({None: 1.0, "alice": 8.0, "bob": 4.0})
    try:
        for label, users in (("moves between two users' groups at each op", ("alice", "bob")),
                             ("stays in its user's group (no move)", ("alice",))):
            took = []
            for i in range(rounds):
                began = time.perf_counter()
                cpu.take(OpThread(worker.native_id, users[i % len(users)]))
                took.append((time.perf_counter() - began) * 1e6)
                cpu.take(OpThread(worker.native_id, idle=True))
            print(f"{label:<46} median {statistics.median(took):8.1f} us, p99 {statistics.quantiles(took, n=100)[98]:8.1f} us")
    finally:
        cpu.teardown()
        release.set()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args(argv)
    if not 10 <= args.rounds <= 1_000_000:
        print(f"cpu_shares_cost: --rounds {args.rounds}: allowed 10-1000000", file=sys.stderr)
        return 2
    if os.geteuid() != 0 or not HostCgroups().has_cpu_v1():
        print("cpu_shares_cost: needs root and a cgroup v1 cpu controller at /sys/fs/cgroup/cpu", file=sys.stderr)
        return 2
    rc = java_side(args.rounds)
    print(f"storage agent, one op's line taken ({args.rounds} ops; favordynmods on: "
          f"{', '.join(favoured_by()) or 'no hierarchy'}):")
    agent_side(args.rounds)
    return rc


if __name__ == "__main__":
    sys.exit(main())
