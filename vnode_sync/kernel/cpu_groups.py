"""The seam for CPU weights on single threads: one protocol, two kernels (chosen in cpu_hierarchy.py).

cgroup v1 `cpu` (cpu_v1.py) places any thread in any group; cgroup v2's `cpu` is a threaded controller
(cpu_v2.py) and places threads only inside a threaded subtree of their process's own cgroup. Both keep
one directory, `parent`, inside the process's cgroup (`home`), and one group a VNode inside it; threads
go back to `home` when released. Weights cross the seam as CFS shares, v1's unit, in which a nice-0
thread weighs 1024 (v2 maps them to cpu.weight as the kernel does). v1 is taken where both are mounted
(a hybrid host), as backend.py takes blkio before io.

Every group name and TID is checked here before it reaches a path: a VNode name of a valid user, a
positive thread id.
"""

import os
import re
from typing import Protocol

from vnode_sync.errors import InvalidArgument, KernelError, ThreadGone
from vnode_sync.kernel.backend import is_vnode_name, user_of_vnode
from vnode_sync.kernel.cgroupfs import CgroupFS
from vnode_sync.kernel.procfs import cgroups_of
from vnode_sync.validation import vnode_name

NICE_0_SHARES = 1024
_PARENT_NAME = re.compile(r"[^/.\x00][^/\x00]{0,254}")   # one directory name, as the agent's cgroup_name


class ThreadCpuGroups(Protocol):
    """Per-VNode CPU groups for single threads of one process."""

    home: str      # the process's own cgroup, where released threads go
    parent: str    # the directory of the VNodes' groups, inside home

    # Why this process's threads cannot be given groups here, and what the admin must set; None if they can.
    def refusal(self) -> str | None: ...
    def set_parent_shares(self, shares: int) -> None: ...
    def ensure(self, group: str, shares: int) -> None: ...    # exists with SHARES (written only when they differ)
    def shares(self, group: str) -> int: ...
    def groups(self) -> list[str]: ...
    def members(self, group: str) -> set[int]: ...
    def place(self, group: str, tid: int) -> bool: ...        # False if the thread has exited meanwhile
    def release(self, tid: int) -> bool: ...
    def remove(self, group: str) -> None: ...
    def teardown(self) -> None: ...                           # every thread home, every group and parent gone


def cgroups_or_error(pid: int, proc_root: str = "/proc") -> list[tuple[str, str]]:
    """PID's (controllers, path) per hierarchy; KernelError if the process is gone or hidden."""
    found = cgroups_of(proc_root, pid)
    if found is None:
        raise KernelError(f"{proc_root}/{pid}/cgroup", "cannot read: the process is gone or hidden")
    return found


class ThreadMoves:
    """Moving single threads between `home` and the VNodes' groups: the same on both kernels but for the
    file that lists a group's threads (`THREADS`). A class that uses it has `fs`, `home` and `_path`."""

    THREADS: str
    fs: CgroupFS
    home: str

    def _path(self, group: str, filename: str = "") -> str:
        raise NotImplementedError

    def members(self, group: str) -> set[int]:
        return {int(t) for t in self.fs.read(self._path(group, self.THREADS)).split()}

    def place(self, group: str, tid: int) -> bool:
        """Moves TID into GROUP; False if the thread has exited meanwhile."""
        return self._move(self._path(group), tid)

    def release(self, tid: int) -> bool:
        return self._move(self.home, tid)

    def _move(self, cgroup: str, tid: int) -> bool:
        try:
            self.fs.write(os.path.join(cgroup, self.THREADS), str(checked_tid(tid)))
            return True
        except ThreadGone:
            return False

    def remove(self, group: str) -> None:
        for tid in self.members(group):
            self.release(tid)
        self.fs.rmdir(self._path(group))


def checked_group(name: str) -> str:
    """NAME if it is a VNode's group name (vnode-default, or vnode. and a valid VNode: a user's or a job's)."""
    if not isinstance(name, str) or not is_vnode_name(name):
        raise InvalidArgument(f"invalid CPU group {name!r}: use vnode-default or vnode.VNODE")
    vnode = user_of_vnode(name)
    if vnode is not None:
        vnode_name(vnode)
    return name


def checked_parent(name: str) -> str:
    if not isinstance(name, str) or not _PARENT_NAME.fullmatch(name) or name.startswith("cgroup."):
        raise InvalidArgument(f"invalid CPU groups directory {name!r}: a single directory name of 1-255 characters, "
                              f"not starting with '.' or 'cgroup.'")
    return name


def checked_tid(tid: int) -> int:
    if isinstance(tid, bool) or not isinstance(tid, int) or tid <= 0:
        raise InvalidArgument(f"invalid thread id {tid!r}: a positive whole number")
    return tid
