"""File operations on a cgroup file system, kept behind one small class.

Every OSError becomes a vnode-sync error here, and only here (`refused`, which the fake
cgroupfs raises too): ThreadGone when the TID or PID to move has exited (ESRCH), else a
KernelError naming the path, the refused value, the kernel's reason and what the file
allows. Callers catch those, never builtins such as ProcessLookupError.

Control files are not ordinary files: writing "7:0 0" to a throttle file removes the
entry, writing a TID to `tasks` moves a thread. Tests substitute a class with the same
methods that emulates those semantics on a temp dir (tests/fakes/cgroupfs.py).
"""

import errno
import os

from vnode_sync.errors import KernelError, ThreadGone


_MEMBER_FILES = ("tasks", "cgroup.procs", "cgroup.threads")

# What a file takes, for EINVAL (cgroup-v1/blkio-controller.rst, cgroup-v2.rst).
_FORMATS = {
    "tasks": "one TID of a live thread",
    "cgroup.procs": "one PID (or TID: its whole process moves) of a live process",
    "cgroup.threads": "one TID of a thread of a process in the same threaded domain",
    "blkio.bfq.weight_device": "'MAJ:MIN WEIGHT' with WEIGHT 1..1000, for a device whose scheduler is bfq",
    "io.max": "'MAJ:MIN rbps=N wbps=N riops=N wiops=N' (each N a whole number or max) for a whole disk",
    "io.weight": "'MAJ:MIN WEIGHT' or 'default WEIGHT' with WEIGHT 1..10000",
    "cgroup.subtree_control": "'+CONTROLLER' or '-CONTROLLER' for controllers in cgroup.controllers",
    "cgroup.type": "'threaded'",
}
_THROTTLE_FORMAT = "'MAJ:MIN VALUE' for a whole disk (not a partition), VALUE a whole number, 0 removes the rule"


def _allowed(path: str, code: int) -> str:
    name = os.path.basename(path)
    if code in (errno.EINVAL, errno.ERANGE):
        return _FORMATS.get(name, _THROTTLE_FORMAT if name.startswith("blkio.throttle.") else "a value of its format")
    if code == errno.EBUSY:
        if name in _MEMBER_FILES:
            return ("a non-root cgroup that enables a domain controller (io) for its children cannot hold "
                    "processes (no-internal-process rule): move them to a leaf cgroup")
        if name == "cgroup.subtree_control":
            return "a non-root cgroup holding processes cannot enable a domain controller: move them to a leaf first"
        return "no members and no child cgroups (to remove a cgroup)"
    if code == errno.ENOENT:
        if name == "cgroup.subtree_control":
            return "a controller can be enabled only if the parent passes it down (it is in cgroup.controllers)"
        return "an existing cgroup and device MAJ:MIN (the cgroup may have been removed meanwhile)"
    if code == errno.EOPNOTSUPP:
        return ("BFQ weights need bfq as the device's scheduler; io cannot be enabled in a threaded subtree; "
                "cgroup.threads moves a thread only into a threaded cgroup")
    if code in (errno.EPERM, errno.EACCES):
        return "root, or a cgroup delegated to the agent's user"
    if code == errno.ENODEV:
        return "a block device that exists on this host"
    return "see the kernel's cgroup documentation for this file"


def refused(path: str, code: int, value: str | None = None, action: str = "write") -> KernelError:
    """The vnode-sync error for errno `code` from `action` on `path` (writing `value`)."""
    if code == errno.ESRCH and value is not None and value.strip().isdigit():
        return ThreadGone(path, int(value))
    what, label = (f"kernel refused {value.strip()!r}", "allowed") if value is not None else (f"cannot {action}", "needs")
    return KernelError(path, f"{what}: {os.strerror(code)}; {label}: {_allowed(path, code)}",
                       value=value, code=code)


class CgroupFS:
    """Direct reads and writes against a mounted cgroup hierarchy."""

    def read(self, path: str) -> str:
        try:
            with open(path) as f:
                return f.read()
        except OSError as e:
            raise refused(path, e.errno, action="read") from e

    def write(self, path: str, text: str) -> None:
        # One write() call per value: the kernel parses each write on its own.
        try:
            fd = os.open(path, os.O_WRONLY)
        except OSError as e:
            raise refused(path, e.errno, action=f"open for writing {text.strip()!r}") from e
        try:
            os.write(fd, text.encode())
        except OSError as e:
            raise refused(path, e.errno, text) from e
        finally:
            os.close(fd)

    def mkdir(self, path: str) -> None:
        try:
            os.mkdir(path)
        except FileExistsError:
            pass
        except OSError as e:
            raise refused(path, e.errno, action="create cgroup") from e

    def rmdir(self, path: str) -> None:
        try:
            os.rmdir(path)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise refused(path, e.errno, action="remove cgroup") from e

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def xattr(self, path: str, name: str) -> str | None:
        """The extended attribute NAME of a cgroup directory (systemd marks delegation so), None if unset."""
        try:
            return os.getxattr(path, name).decode(errors="replace")
        except OSError:
            return None

    def subdirs(self, path: str) -> list[str]:
        try:
            return sorted(e.name for e in os.scandir(path) if e.is_dir(follow_symlinks=False))
        except FileNotFoundError:
            return []
