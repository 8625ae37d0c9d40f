"""File operations on a cgroup file system, kept behind one small class.

Every OSError becomes a vnode-sync error here, and only here: KernelError naming the path
and the refused value, or ThreadGone when the TID or PID to move has exited (ESRCH).

Control files are not ordinary files: writing "7:0 0" to a throttle file removes the
entry, writing a TID to `tasks` moves a thread. Tests substitute a class with the same
methods that emulates those semantics on a temp dir (tests/fakes/cgroupfs.py).
"""

import errno
import os

from vnode_sync.errors import KernelError, ThreadGone


class CgroupFS:
    """Direct reads and writes against a mounted cgroup hierarchy."""

    def read(self, path: str) -> str:
        try:
            with open(path) as f:
                return f.read()
        except OSError as e:
            raise KernelError(path, f"cannot read: {e.strerror}") from e

    def write(self, path: str, text: str) -> None:
        # One write() call per value: the kernel parses each write on its own.
        try:
            fd = os.open(path, os.O_WRONLY)
        except OSError as e:
            raise KernelError(path, f"cannot open for writing: {e.strerror}") from e
        try:
            os.write(fd, text.encode())
        except OSError as e:
            if e.errno == errno.ESRCH:
                raise ThreadGone(path, int(text)) from e
            raise KernelError(path, f"kernel refused {text.strip()!r}: {e.strerror}") from e
        finally:
            os.close(fd)

    def mkdir(self, path: str) -> None:
        try:
            os.mkdir(path)
        except FileExistsError:
            pass
        except OSError as e:
            raise KernelError(path, f"cannot create cgroup: {e.strerror}") from e

    def rmdir(self, path: str) -> None:
        try:
            os.rmdir(path)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise KernelError(path, f"cannot remove cgroup: {e.strerror}") from e

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def subdirs(self, path: str) -> list[str]:
        try:
            return sorted(e.name for e in os.scandir(path) if e.is_dir(follow_symlinks=False))
        except FileNotFoundError:
            return []
