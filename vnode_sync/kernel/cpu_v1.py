"""cgroup v1 `cpu`: CPU weights per thread. A TID written to a cgroup's `tasks` moves that thread alone,
and CFS shares the cores among sibling groups by their `cpu.shares` (2..262144; a nice-0 task
weighs 1024), each group's share among its own threads (Documentation/scheduler/sched-design-CFS.rst,
admin-guide/cgroup-v1/cgroups.rst). The kernel clamps a value out of range rather than refusing it.

`CpuGroups` keeps one directory, `parent`, inside a process's own cpu cgroup (`home`), and one group a
VNode inside it. Threads leave `home` only for those groups and go back to `home` when released, so
whatever the site set on the process's cgroup (a quota, its own shares) still holds for all of them.
It is one side of the seam in cpu_groups.py; cgroup v2's threaded `cpu` (cpu_v2.py) is the other.
"""

import os

from vnode_sync.errors import KernelError
from vnode_sync.kernel.backend import is_vnode_name
from vnode_sync.kernel.cgroupfs import CgroupFS
from vnode_sync.kernel.cpu_groups import NICE_0_SHARES, ThreadMoves, cgroups_or_error, checked_group, checked_parent

MIN_SHARES = 2
MAX_SHARES = 262_144
__all__ = ["NICE_0_SHARES", "CpuGroups", "cgroup_of", "clamp_shares"]


def clamp_shares(value: float) -> int:
    return max(MIN_SHARES, min(MAX_SHARES, round(value)))


def cgroup_of(pid: int, proc_root: str = "/proc", controller: str = "cpu") -> str:
    """PID's cgroup in the v1 hierarchy of CONTROLLER ('/' for the root), from /proc/PID/cgroup."""
    for controllers, where in cgroups_or_error(pid, proc_root):
        if controller in controllers.split(","):
            return where
    raise KernelError(f"/proc/{pid}/cgroup", f"no v1 {controller} hierarchy holds pid {pid}")


class CpuGroups(ThreadMoves):
    """Per-VNode cpu cgroups under `parent`, whose threads come from and go back to `home`."""

    THREADS = "tasks"

    def __init__(self, home: str, name: str, fs: CgroupFS | None = None):
        self.home = home
        self.parent = os.path.join(home, checked_parent(name))
        self.fs = fs or CgroupFS()

    def refusal(self) -> str | None:
        return None   # v1 places any thread in any group of its hierarchy

    def _path(self, group: str, filename: str = "") -> str:
        group = checked_group(group)
        return os.path.join(self.parent, group, filename) if filename else os.path.join(self.parent, group)

    def set_parent_shares(self, shares: int) -> None:
        self.fs.mkdir(self.parent)
        self.fs.write(os.path.join(self.parent, "cpu.shares"), str(clamp_shares(shares)))

    def ensure(self, group: str, shares: int) -> None:
        """GROUP exists with SHARES (written only when they differ)."""
        self.fs.mkdir(self.parent)
        self.fs.mkdir(self._path(group))
        path = self._path(group, "cpu.shares")
        shares = clamp_shares(shares)
        if self.fs.read(path).strip() != str(shares):
            self.fs.write(path, str(shares))

    def shares(self, group: str) -> int:
        return int(self.fs.read(self._path(group, "cpu.shares")))

    def groups(self) -> list[str]:
        return [g for g in self.fs.subdirs(self.parent) if is_vnode_name(g)] if self.fs.exists(self.parent) else []

    def teardown(self) -> None:
        """Every thread back home, every group and the parent removed."""
        for group in self.groups():
            self.remove(group)
        if self.fs.exists(self.parent):
            for tid in self.fs.read(os.path.join(self.parent, "tasks")).split():
                self.release(int(tid))
            self.fs.rmdir(self.parent)
