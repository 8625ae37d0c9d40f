"""Which groups a host offers for single threads' CPU weights: cgroup v1 `cpu` where it is mounted (as
blkio is taken before io), else a cgroup2 mount offering `cpu` (threaded), else none. Apart from
cpu_groups.py, the seam both sides import, so that neither imports the other's chooser."""

import os

from vnode_sync.errors import Unsupported
from vnode_sync.kernel import cpu_v1, cpu_v2
from vnode_sync.kernel.backend import HostCgroups
from vnode_sync.kernel.cgroupfs import CgroupFS
from vnode_sync.kernel.cpu_groups import ThreadCpuGroups


def unavailable(host: HostCgroups) -> str | None:
    """Why this host cannot give threads CPU weights at all, or None."""
    if host.has_cpu_v1() or host.cpu_v2_mount() is not None:
        return None
    return (f"CPU shares: no cpu controller mounted under {host.root} (neither cgroup v1 cpu nor a cgroup2 "
            f"offering cpu): transfer threads share the cores as CFS does, not by weight")


def cpu_groups_for(host: HostCgroups, pid: int, name: str, proc_root: str = "/proc",
                   fs: CgroupFS | None = None) -> ThreadCpuGroups:
    """The groups for process PID's threads, in the hierarchy the host has (Unsupported if none)."""
    if host.has_cpu_v1():
        home = os.path.join(host.cpu_v1, cpu_v1.cgroup_of(pid, proc_root).lstrip("/"))
        return cpu_v1.CpuGroups(home, name, fs)
    mount = host.cpu_v2_mount()
    if mount is not None:
        return cpu_v2.ThreadedCpuGroups(os.path.join(mount, cpu_v2.unified_cgroup_of(pid, proc_root).lstrip("/")),
                                        name, fs, mount=mount)
    raise Unsupported(unavailable(host))
