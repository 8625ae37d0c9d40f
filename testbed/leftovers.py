"""Find, and with --remove delete, what a crashed test, demo or benchmark left behind.

Everything this project's tests, demos and benchmarks make carries a run name in its
name: one of PREFIXES followed by dot-separated fields, usually the owner's pid
(`vnode-sync-test.hdfs.4711.9f3c2a1b`, `vnode-sync-bench.mpiio.4711.fig3`). Cgroup subtrees,
loop-device backing files, mount points, work dirs, daemons' command lines (a ZooKeeper
ensemble's JVMs name their config in the run's work dir), network namespaces, tracefs instances
(testbed/tracefs.py) and holds on early background writeback (testbed/early_writeback.py) are
found by it. A run is live while its owner pid runs or, for a named HDFS testbed without one
(`hdfs_cluster up --name demo`), while its daemons run; a name that records neither cannot be
shown dead and counts as live. What a live run owns is listed but kept unless --include-live.
Production agents' subtrees (`vnode-sync.<node>`) never match.

    python -m testbed.leftovers                      # list
    python -m testbed.leftovers --remove             # remove what no live run owns
    python -m testbed.leftovers --remove --run vnode-sync-bench --include-live
"""

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

import psutil

from testbed import early_writeback, tracefs
from testbed.loopdev import detach, loops, mounts, unmount
from testbed.processes import stop_processes
from vnode_sync.errors import KernelError

PREFIXES = ("vnode-sync-test", "vnode-sync-demo", "vnode-sync-bench", "vnode-sync-hdfs")
BLKIO = "/sys/fs/cgroup/blkio"
CPU = "/sys/fs/cgroup/cpu"   # benchmarks' CPU-priority groups (testbed/cpu_priority.py)
HIERARCHIES = (BLKIO, CPU)
_RUN = re.compile(r"(?:%s)[A-Za-z0-9._-]*" % "|".join(map(re.escape, PREFIXES)))


@dataclass(frozen=True)
class Leftover:
    kind: str      # "process", "mount", "loop device", "cgroup", "network namespace", "trace instance",
                   # "work dir", "early writeback"
    what: str      # the pid, path, device or name to remove
    run: str       # the run name it carries
    live: bool

    def __str__(self) -> str:
        return f"{self.kind}: {self.what}" + (" (live run, kept)" if self.live else "")


def run_of(text: str) -> str | None:
    """The first run name in a path or command line (up to the next '/', space or '=')."""
    match = _RUN.search(text)
    return match.group(0) if match else None


def _alive(pid: int) -> bool:
    return pid > 0 and os.path.exists(f"/proc/{pid}")


def run_is_live(run: str, tmp: str = tempfile.gettempdir()) -> bool:
    """Whether a run may still own what carries its name. A name that records no owner (no pid
    field, no HDFS testbed state) cannot be shown dead, e.g. another tool's `/dev/vnode-sync-bench`
    or a tempdir named `vnode-sync-testX.abc`, so it counts as live: removing it takes --include-live."""
    # pids have at most 7 digits (pid_max <= 2^22), so an 8-digit hex suffix is never taken for one
    owners = [int(field) for field in run.split(".") if field.isdigit() and len(field) <= 7]
    if owners:
        return any(_alive(pid) for pid in owners)
    try:
        with open(os.path.join(tmp, run, "cluster.json")) as f:  # an HDFS testbed started by name
            state = json.load(f)
    except OSError:
        return True
    except ValueError:
        return False  # a state file cut short by a crash
    daemons = [state.get("namenode") or {}, *state.get("datanodes", [])]
    return any(_alive(d.get("pid") or 0) for d in daemons)


def holder_is_live(name: str) -> bool:
    """Whether the run a holder file (testbed/early_writeback.py) is named by may still run."""
    run = run_of(name)
    return run is not None and run_is_live(run)


def _processes() -> list[tuple[str, str]]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "testbed.leftovers" not in cmdline:
            found.append((entry, cmdline))
    return found


def _candidates(hierarchies: tuple[str, ...], tmp: str, writeback_dir: str | None) -> list[tuple[str, str, str]]:
    """(kind, what, text that names the run) of everything that may be a run's."""
    found: list[tuple[str, str, str]] = [("process", pid, cmdline) for pid, cmdline in _processes()]
    found += [("mount", m, m) for m in mounts()]  # latest first: the order to unmount in
    found += [("loop device", device, backing) for device, backing in loops()]
    for hierarchy in hierarchies:
        if os.path.isdir(hierarchy):
            found += [("cgroup", os.path.join(hierarchy, d), d) for d in sorted(os.listdir(hierarchy))
                      if os.path.isdir(os.path.join(hierarchy, d))]
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    found += [("network namespace", line.split()[0], line.split()[0]) for line in out.splitlines() if line.strip()]
    found += [("trace instance", path, os.path.basename(path)) for path in tracefs.instances()]
    found += [("work dir", os.path.join(tmp, d), d) for d in sorted(os.listdir(tmp))
              if os.path.isdir(os.path.join(tmp, d))]
    writeback_dir = writeback_dir or early_writeback.HOLDERS_DIR
    found += [("early writeback", os.path.join(writeback_dir, h), h) for h in early_writeback.holders(writeback_dir)]
    return found


def find(part: str = "", hierarchies: tuple[str, ...] = HIERARCHIES, tmp: str = tempfile.gettempdir(),
         writeback_dir: str | None = None) -> list[Leftover]:
    """Everything made by a run whose name starts with one of PREFIXES (and contains `part`)."""
    leftovers, live = [], {}
    for kind, what, text in _candidates(hierarchies, tmp, writeback_dir):
        run = run_of(text)
        if run is None or part not in run:
            continue
        if run not in live:
            live[run] = run_is_live(run, tmp)
        leftovers.append(Leftover(kind, what, run, live[run]))
    return leftovers


def _remove_cgroup(path: str) -> None:
    """A run's cgroup sits at the top of its hierarchy; its tasks go back to that hierarchy's root."""
    hierarchy = os.path.dirname(path)
    for dirpath, _, _ in sorted(os.walk(path), key=lambda w: -w[0].count("/")):
        with open(os.path.join(dirpath, "tasks")) as f:
            tids = f.read().split()
        for tid in tids:
            try:
                with open(os.path.join(hierarchy, "tasks"), "w") as f:
                    f.write(tid)
            except OSError:
                pass  # exited meanwhile
        os.rmdir(dirpath)


def _remove_zram(workdir: str) -> None:
    from testbed.zramdev import ZRAM_MARKER, remove_marked
    for directory, _, files in os.walk(workdir):
        if ZRAM_MARKER in files:
            remove_marked(os.path.join(directory, ZRAM_MARKER))


def remove(leftovers: list[Leftover]) -> None:
    """Processes first, then mounts (latest first), loops, cgroups, namespaces, trace instances and work dirs."""
    order = ["process", "mount", "loop device", "cgroup", "network namespace", "trace instance", "work dir",
             "early writeback"]
    processes = []
    for item in leftovers:
        if item.kind == "process":
            with contextlib.suppress(psutil.NoSuchProcess):
                processes.append(psutil.Process(int(item.what)))
    stop_processes(processes)
    for item in sorted(leftovers, key=lambda l: order.index(l.kind)):
        if item.kind == "mount":
            with contextlib.suppress(KernelError):  # gone meanwhile, or busy even for a lazy unmount
                unmount(item.what)
        elif item.kind == "loop device":
            detach(item.what)
        elif item.kind == "cgroup":
            _remove_cgroup(item.what)
        elif item.kind == "network namespace":
            from testbed.compute_host import ComputeHost
            ComputeHost(item.what).stop()
        elif item.kind == "trace instance":
            tracefs.remove_instance(item.what)
        elif item.kind == "work dir":
            _remove_zram(item.what)
            shutil.rmtree(item.what, ignore_errors=True)
        elif item.kind == "early writeback":
            early_writeback.release(item.what, holder_is_live, os.path.dirname(item.what))


def remove_crashed(part: str) -> list[Leftover]:
    """Remove what runs whose name contains `part` left and no longer own; returns it."""
    crashed = [item for item in find(part) if not item.live]
    remove(crashed)
    return crashed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testbed.leftovers", description=__doc__.splitlines()[0])
    parser.add_argument("--remove", action="store_true", help="remove what is listed")
    parser.add_argument("--run", default="", help="only runs whose name contains this")
    parser.add_argument("--include-live", action="store_true", help="also what a live run owns")
    args = parser.parse_args(argv)
    if args.run and not re.fullmatch(r"[A-Za-z0-9._-]+", args.run):
        print(f"leftovers: error: --run {args.run!r} must be letters, digits, '.', '_' or '-'", file=sys.stderr)
        return 2
    found = find(args.run)
    for item in found:
        print(item)
    targets = [item for item in found if args.include_live or not item.live]
    if not found:
        print("no leftovers")
    if not targets:
        return 0
    if not args.remove:
        return 1
    remove(targets)
    print(f"removed {len(targets)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
