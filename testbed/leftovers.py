"""Find, and with --remove delete, what a crashed test, demo or benchmark left behind.

Everything this project's tests, demos and benchmarks make carries one of the
prefixes below in its name: cgroup subtrees, loop-device backing files, mount
points, work dirs of daemons, network namespaces. Production agents' subtrees (`vnode-sync.<node>`) are
never touched.

    python -m testbed.leftovers            # list
    python -m testbed.leftovers --remove   # remove
"""

import argparse
import os
import signal
import subprocess
import sys

PREFIXES = ("vnode-sync-test", "vnode-sync-demo", "vnode-sync-bench", "vnode-sync-hdfs")
BLKIO = "/sys/fs/cgroup/blkio"


def _ours(text: str) -> bool:
    return any(p in text for p in PREFIXES)


def cgroups(hierarchy: str = BLKIO) -> list[str]:
    try:
        return sorted(os.path.join(hierarchy, d) for d in os.listdir(hierarchy)
                      if _ours(d) and os.path.isdir(os.path.join(hierarchy, d)))
    except FileNotFoundError:
        return []


def loop_devices() -> list[tuple[str, str]]:
    out = subprocess.run(["losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE"],
                         capture_output=True, text=True).stdout
    return [(name, back) for name, _, back in (line.strip().partition(" ") for line in out.splitlines())
            if _ours(back)]


def mounts() -> list[str]:
    with open("/proc/mounts") as f:
        return [line.split()[1] for line in f if _ours(line.split()[1])]


def network_namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip() and _ours(line.split()[0])]


def processes() -> list[tuple[int, str]]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if _ours(cmdline) and "testbed.leftovers" not in cmdline:
            found.append((int(entry), cmdline.strip()[:160]))
    return found


def _remove_cgroup(path: str) -> None:
    for dirpath, dirnames, _ in sorted(os.walk(path), key=lambda w: -w[0].count("/")):
        with open(os.path.join(dirpath, "tasks")) as f:
            tids = f.read().split()
        for tid in tids:
            try:
                with open(os.path.join(BLKIO, "tasks"), "w") as f:
                    f.write(tid)
            except OSError:
                pass
        os.rmdir(dirpath)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--remove", action="store_true")
    args = parser.parse_args(argv)
    found = {"processes": processes(), "mounts": mounts(), "loop devices": loop_devices(), "cgroups": cgroups(),
             "network namespaces": network_namespaces()}
    for kind, items in found.items():
        for item in items:
            print(f"{kind}: {item}")
    if not any(found.values()):
        print("no leftovers")
        return 0
    if not args.remove:
        return 1
    for pid, _ in found["processes"]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for mount in sorted(found["mounts"], reverse=True):
        subprocess.run(["umount", "-l", mount], check=False)
    for name, _ in found["loop devices"]:
        subprocess.run(["losetup", "-d", name], check=False)
    for path in found["cgroups"]:
        _remove_cgroup(path)
    for netns in found["network namespaces"]:
        from testbed.compute_host import ComputeHost
        ComputeHost(netns).stop()
    print("removed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
