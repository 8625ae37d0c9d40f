"""Run inside the cgroup-v2 guest: two users' transfer threads share the CPU 2:1 by their threaded cpu groups.

This process stands in for a DataNode: it moves itself into a cgroup of its own and starts four busy threads,
two for alice and two for bob (hashing, which runs outside the GIL, so the kernel decides who runs). A stand-in
Java agent names them over a real Unix socket (`WATCH threads`), and the storage agent's CpuShares, with
weights alice 2 and bob 1, moves them into their users' threaded groups. Each thread's CPU time comes from its
own CPU clock: first with no groups (the split is 1:1), then in the groups (2:1, within 10 %).
"""

import hashlib
import os
import sys
import threading
import time

from testbed.names import unique_name
from tests.datanode.test_cpu_shares import StandInAgent
from vnode_sync.datanode.cpu_shares import CpuShares
from vnode_sync.kernel.backend import HostCgroups
from vnode_sync.kernel.cgroupfs import CgroupFS

MOUNT = "/sys/fs/cgroup"
BASELINE_SECONDS = 2.0
MEASURED_SECONDS = 3.0
USERS = ("alice", "alice", "bob", "bob")


def burn(stop: threading.Event) -> None:
    block = os.urandom(1 << 20)
    while not stop.is_set():
        hashlib.sha256(block).digest()


def cpu_seconds(threads: list[threading.Thread]) -> list[float]:
    return [time.clock_gettime(time.pthread_getcpuclockid(t.ident)) for t in threads]


def split(threads: list[threading.Thread], seconds: float) -> tuple[float, float]:
    """CPU seconds alice's and bob's threads got over SECONDS."""
    before = cpu_seconds(threads)
    time.sleep(seconds)
    used = [after - b for after, b in zip(cpu_seconds(threads), before)]
    return sum(u for u, user in zip(used, USERS) if user == "alice"), sum(u for u, user in zip(used, USERS) if user == "bob")


def main() -> int:
    fs = CgroupFS()
    cpu_was_on = "cpu" in fs.read(f"{MOUNT}/cgroup.subtree_control").split()
    if not cpu_was_on:
        fs.write(f"{MOUNT}/cgroup.subtree_control", "+cpu")
    home = os.path.join(MOUNT, unique_name("datanode"))
    fs.mkdir(home)
    fs.write(f"{home}/cgroup.procs", str(os.getpid()))
    stop = threading.Event()
    threads = [threading.Thread(target=burn, args=(stop,), daemon=True) for _ in USERS]
    for t in threads:
        t.start()
    socket_path = f"/dev/shm/{unique_name('dn')}.sock"
    agent = StandInAgent(socket_path, [f"THREAD tid={t.native_id} user={u}" for t, u in zip(threads, USERS)])
    cpu = CpuShares(socket_path, unique_name("cpu-v2"), HostCgroups(MOUNT))
    cpu.set_weights({None: 1.0, "alice": 2.0, "bob": 1.0})
    try:
        alice0, bob0 = split(threads, BASELINE_SECONDS)
        cpu.follow(threading.Event())   # the stand-in names the four threads, then hangs up
        weights = {u: fs.read(f"{cpu.groups.parent}/vnode.{u}/cpu.weight").strip() for u in ("alice", "bob")}
        placed = {u: sorted(cpu.groups.members(f"vnode.{u}")) for u in ("alice", "bob")}
        alice, bob = split(threads, MEASURED_SECONDS)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        cpu.teardown()
        agent.close()
        fs.write(f"{MOUNT}/cgroup.procs", str(os.getpid()))
        fs.rmdir(home)
        if not cpu_was_on:
            fs.write(f"{MOUNT}/cgroup.subtree_control", "-cpu")
        os.unlink(socket_path)
    ratio = alice / bob if bob else float("inf")
    print(f"CPU_V2 vcpus={os.cpu_count()} without groups alice={alice0:.2f}s bob={bob0:.2f}s ratio={alice0 / bob0:.3f}; "
          f"weights alice 2 bob 1 (cpu.weight {weights['alice']} / {weights['bob']}, threads {placed}): "
          f"alice={alice:.2f}s bob={bob:.2f}s ratio={ratio:.3f} over {MEASURED_SECONDS:.0f} s")
    return 0 if abs(ratio / 2 - 1) <= 0.10 and len(placed["alice"]) == len(placed["bob"]) == 2 else 1


if __name__ == "__main__":
    sys.exit(main())
