"""One storage agent per node and cgroup subtree on a host.

Two agents on one subtree would each reconcile the VNodes the other made (and one's teardown would
remove the other's). The first agent holds an flock on `<run_dir>/<subtree>.agent.lock` for its
life and removes the file at exit; the kernel drops the lock when the process ends however it ends,
so a killed agent (which leaves the file) never blocks the next. The subtree is
`vnode-sync.<node_id>` unless the config names another (both validated as one path component).
Agents with one node id on different subtrees or hosts are told apart by the coordinator, which
flags a node with two live streams.
"""

import fcntl
import os

from vnode_sync.errors import VNodeSyncError


class NodeTaken(VNodeSyncError):
    """Another storage agent on this host holds the node's cgroup subtree."""


class NodeLock:
    def __init__(self, path: str, fd: int):
        self.path, self.fd = path, fd

    def release(self) -> None:
        """Remove the lock file while still holding it, then let go (a waiter re-checks the path)."""
        if self.fd < 0:
            return
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        os.close(self.fd)
        self.fd = -1


def hold_node_lock(run_dir: str, subtree: str, node_id: str) -> NodeLock:
    """Take the subtree's lock, or raise NodeTaken naming the agent that holds it."""
    os.makedirs(run_dir, mode=0o755, exist_ok=True)
    path = os.path.join(run_dir, f"{subtree}.agent.lock")
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise NodeTaken(f"node {node_id} (cgroup subtree {subtree}) is already served by another vnode-agent "
                            f"on this host (pid {holder}, lock {path}); stop it first") from None
        try:   # the holder before us may have removed the file since we opened it: the lock is the one at `path`
            held = os.fstat(fd)
            current = os.stat(path)
            if (held.st_dev, held.st_ino) == (current.st_dev, current.st_ino):
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return NodeLock(path, fd)
