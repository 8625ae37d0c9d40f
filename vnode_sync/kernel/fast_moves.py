"""Thread moves without an RCU grace period: the kernel's cgroup `favordynmods` mode.

Writing a TID to `tasks` takes the kernel's one global cgroup_threadgroup_rwsem for
writing, which first waits for an RCU grace period (8-16 ms measured on these VMs, far
more under load), so a captured handler reads unattributed for that long. With some
cgroup hierarchy mounted `favordynmods` (Linux >= 6.0) the semaphore stays in its slow
read mode instead: a move costs about 0.2 ms and fork/exit pay a shared atomic, on
every hierarchy. The option belongs to a hierarchy but the semaphore is global, so the
agent mounts an empty named v1 hierarchy of its own with it rather than remounting the
host's blkio; unmounting the last mount of that hierarchy switches the mode off again.
"""

import logging
import os
import subprocess

from vnode_sync.errors import KernelError

log = logging.getLogger(__name__)

HIERARCHY_NAME = "vnode-sync-fast-moves"
OPTION = "favordynmods"


def _mounts(mountinfo_path: str) -> list[tuple[str, str, list[str]]]:
    """(mount point, file system type, super options) of every line of a mountinfo file."""
    found = []
    with open(mountinfo_path) as f:
        for line in f:
            _, _, after = line.partition(" - ")
            fstype, _, super_options = (after.split() + ["", "", ""])[:3]
            found.append((line.split()[4], fstype, super_options.split(",")))
    return found


def favoured_by(mountinfo_path: str = "/proc/self/mountinfo") -> list[str]:
    """Mount points of cgroup hierarchies mounted with favordynmods."""
    return [point for point, fstype, options in _mounts(mountinfo_path)
            if fstype in ("cgroup", "cgroup2") and OPTION in options]


class FastMoves:
    """Keeps favordynmods on while the agent runs, through a mount of its own at `mountpoint`."""

    def __init__(self, mountpoint: str, mountinfo_path: str = "/proc/self/mountinfo"):
        self.mountpoint = mountpoint
        self.mountinfo_path = mountinfo_path

    def enable(self) -> str:
        """Turn the mode on; returns how (for the log). Raises KernelError if the kernel cannot.

        The agent always mounts its own, even when another mount already has the option:
        that one may go away while the agent runs (another agent on the host exiting).
        """
        if self._is_mounted():  # left by this agent's killed predecessor: one mount, not a stack
            return f"on (hierarchy {HIERARCHY_NAME} still mounted at {self.mountpoint})"
        try:
            os.makedirs(self.mountpoint, exist_ok=True)
        except OSError as e:  # e.g. a read-only /run
            raise KernelError(self.mountpoint, f"cannot make the mount point: {e.strerror}") from None
        done = subprocess.run(["mount", "-t", "cgroup", "-o", f"none,name={HIERARCHY_NAME},{OPTION}",
                               "cgroup", self.mountpoint], capture_output=True, text=True)
        if done.returncode == 0:
            return f"on (hierarchy {HIERARCHY_NAME} mounted at {self.mountpoint} with {OPTION})"
        os.rmdir(self.mountpoint)
        others = favoured_by(self.mountinfo_path)
        if others:
            return f"on while {others[0]} stays mounted with {OPTION} (own mount failed: {done.stderr.strip()})"
        raise KernelError(self.mountpoint, f"cannot mount a cgroup hierarchy with {OPTION} "
                          f"(needs Linux >= 6.0 and cgroup v1): {done.stderr.strip()}")

    def disable(self) -> None:
        """Unmount the agent's hierarchy, also one left by a killed agent (`vnode-agent --teardown`)."""
        if not self._is_mounted():
            return
        done = subprocess.run(["umount", self.mountpoint], capture_output=True, text=True)
        if done.returncode != 0:
            log.warning("cannot unmount %s: %s", self.mountpoint, done.stderr.strip())
            return
        os.rmdir(self.mountpoint)

    def _is_mounted(self) -> bool:
        return any(point == self.mountpoint for point, _, _ in _mounts(self.mountinfo_path))
