"""cgroup v2 `cpu` on single threads: a threaded subtree inside a process's own cgroup
(Documentation/admin-guide/cgroup-v2.rst, "Threads" and "CPU").

`cpu` is a threaded controller: inside a threaded subtree the threads of one process may sit in different
cgroups, and CFS shares the cores among sibling groups by `cpu.weight` (1..10000). The kernel maps a weight w
to w * 1024 / 100 of v1's shares (kernel/sched/core.c), so 100 weighs what one nice-0 thread does. With `home`
the process's cgroup:

    home/                  the subtree's threaded domain ("domain threaded") while the subtree exists
    home/PARENT/           threaded; cpu.weight from the parent's shares (cpu_groups.py)
    home/PARENT/VNODE/     threaded; cpu.weight from the user's weight; its threads in cgroup.threads

A thread leaves home and comes back through `cgroup.threads`, which moves one thread within its threaded
domain. When the subtree goes, the agent disables the `cpu` it enabled for home's children, and home is a
plain domain again.

The kernel lets home become a threaded domain only if it is a valid domain, enables no domain controller
(memory, io) for its children and has no populated child that is not threaded (kernel/cgroup/cgroup.c:
cgroup_enable_threaded, cgroup_can_be_thread_root); and `cpu` must be passed down to home to be passed on.
(Home holds the process, so no domain controller can be on for its children: no internal processes.)
On a systemd host the unit whose cgroup home is must delegate it (Delegate=yes): systemd owns every other
unit's cgroup alone, and marks a delegated one with the xattr trusted.delegate (user.delegate from a user's
manager; systemd's docs/CGROUP_DELEGATION.md). `refusal` says which of these fails and what the admin sets,
before anything is written.
"""

import os

from vnode_sync.errors import KernelError
from vnode_sync.kernel.backend import is_vnode_name
from vnode_sync.kernel.cgroupfs import CgroupFS
from vnode_sync.kernel.cpu_groups import NICE_0_SHARES, ThreadMoves, cgroups_or_error, checked_group, checked_parent

MIN_WEIGHT = 1
MAX_WEIGHT = 10_000
NICE_0_WEIGHT = 100
UNIT_SUFFIXES = (".service", ".scope")          # the systemd units whose cgroups hold processes
DELEGATE_XATTRS = ("trusted.delegate", "user.delegate")


def weight_of_shares(shares: float) -> int:
    """cpu.weight for SHARES in v1's unit, clamped to what the kernel takes."""
    return max(MIN_WEIGHT, min(MAX_WEIGHT, round(shares * NICE_0_WEIGHT / NICE_0_SHARES)))


def unified_cgroup_of(pid: int, proc_root: str = "/proc") -> str:
    """PID's cgroup in the cgroup2 hierarchy ('/' for the root), from the `0::` line of /proc/PID/cgroup."""
    for controllers, where in cgroups_or_error(pid, proc_root):
        if not controllers:
            return where
    raise KernelError(f"/proc/{pid}/cgroup", f"no cgroup2 line ('0::') for pid {pid}")


class ThreadedCpuGroups(ThreadMoves):
    """Per-VNode threaded cpu groups under `parent`, whose threads come from and go back to `home`."""

    THREADS = "cgroup.threads"

    def __init__(self, home: str, name: str, fs: CgroupFS | None = None, mount: str | None = None):
        self.home = home.rstrip("/") or "/"
        self.parent = os.path.join(self.home, checked_parent(name))
        self.mount = (mount or self.home).rstrip("/") or "/"   # the hierarchy's root: no cgroup.type, mixable
        self.fs = fs or CgroupFS()
        self._made = False

    def _path(self, group: str, filename: str = "") -> str:
        path = os.path.join(self.parent, checked_group(group))
        return os.path.join(path, filename) if filename else path

    def _read(self, cgroup: str, filename: str) -> str:
        return self.fs.read(os.path.join(cgroup, filename)).strip()

    def refusal(self) -> str | None:
        reasons = []
        kind = "root" if self.home == self.mount else self._read(self.home, "cgroup.type")
        if kind == "domain invalid":
            reasons.append(f"{self.home} is an invalid domain (the child of a threaded cgroup): run the DataNode "
                           f"in a domain cgroup")
        if "cpu" not in self._read(self.home, "cgroup.controllers").split():
            reasons.append(f"cpu is not passed down to {self.home} (not in its cgroup.controllers): enable it in "
                           f"its parent's cgroup.subtree_control (systemd: CPUAccounting=yes on the DataNode's unit)")
        unit = self._unit()
        if unit is not None and not self._delegated(unit):
            reasons.append(f"{self.home} belongs to systemd unit {os.path.basename(unit)}, which does not delegate "
                           f"it: set Delegate=yes on the unit (a service's: in a drop-in's [Service] section) and restart it")
        if kind == "domain":
            crowded = [os.path.basename(c) for c in self._children(self.home)
                       if c != self.parent and self._read(c, "cgroup.type") != "threaded"
                       and "populated 1" in self._read(c, "cgroup.events").splitlines()]
            if crowded:
                reasons.append(f"{self.home} has processes in child cgroups that are not threaded "
                               f"({', '.join(crowded)}), which a threaded domain cannot: move them out")
        if not reasons:
            return None
        return "the DataNode's cgroup cannot hold a threaded cpu subtree: " + "; ".join(reasons)

    def _children(self, cgroup: str) -> list[str]:
        return [os.path.join(cgroup, d) for d in self.fs.subdirs(cgroup)]

    def _unit(self) -> str | None:
        """The nearest cgroup from home up that is a systemd unit's (service or scope), if any."""
        path = self.home
        while len(path) > len(self.mount):
            if path.endswith(UNIT_SUFFIXES):
                return path
            path = os.path.dirname(path)
        return None

    def _delegated(self, cgroup: str) -> bool:
        return any(self.fs.xattr(cgroup, name) == "1" for name in DELEGATE_XATTRS)

    def _enable_cpu(self, cgroup: str) -> None:
        if "cpu" not in self._read(cgroup, "cgroup.subtree_control").split():
            self.fs.write(os.path.join(cgroup, "cgroup.subtree_control"), "+cpu")

    def _make_threaded(self, cgroup: str) -> None:
        self.fs.mkdir(cgroup)
        if self._read(cgroup, "cgroup.type") != "threaded":
            self.fs.write(os.path.join(cgroup, "cgroup.type"), "threaded")

    def _ensure_parent(self) -> None:
        if self._made:
            return
        self._make_threaded(self.parent)   # home becomes the subtree's threaded domain
        self._enable_cpu(self.home)
        self._enable_cpu(self.parent)
        self._made = True

    def set_parent_shares(self, shares: int) -> None:
        self._ensure_parent()
        self.fs.write(os.path.join(self.parent, "cpu.weight"), str(weight_of_shares(shares)))

    def ensure(self, group: str, shares: int) -> None:
        self._ensure_parent()
        path = self._path(group)
        self._make_threaded(path)
        weight = str(weight_of_shares(shares))
        if self._read(path, "cpu.weight") != weight:
            self.fs.write(os.path.join(path, "cpu.weight"), weight)

    def weight(self, group: str) -> int:
        return int(self._read(self._path(group), "cpu.weight"))

    def groups(self) -> list[str]:
        return [g for g in self.fs.subdirs(self.parent) if is_vnode_name(g)] if self.fs.exists(self.parent) else []

    def teardown(self) -> None:
        """Every thread back home, every group and the parent removed, home a plain domain again."""
        made = self._made or self.fs.exists(self.parent)
        for group in self.groups():
            self.remove(group)
        if self.fs.exists(self.parent):
            for tid in self._read(self.parent, "cgroup.threads").split():
                self.release(int(tid))
            self.fs.rmdir(self.parent)
        self._made = False
        # With cpu on for its children and threads of its own, home would stay a threaded domain and refuse
        # domain children; nothing else of home's uses it once no child is left.
        if made and self.home != self.mount and not self.fs.subdirs(self.home) \
                and "cpu" in self._read(self.home, "cgroup.subtree_control").split():
            self.fs.write(os.path.join(self.home, "cgroup.subtree_control"), "-cpu")
