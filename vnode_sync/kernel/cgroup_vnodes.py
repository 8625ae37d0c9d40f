"""What cgroup v1 blkio and cgroup v2 io VNodes share: a directory per VNode under the agent's
own cgroup, members moved by writing an id to one file, and limits made exactly as wanted.

A subclass says which file moves members, how limits are read, and how one device's change
is written; the diffing, placement, release and teardown are here once.
"""

import os

from vnode_sync.errors import KernelError, ThreadGone
from vnode_sync.kernel.backend import VNodeUsage, is_vnode_name
from vnode_sync.kernel.cgroupfs import CgroupFS
from vnode_sync.kernel.types import DeviceCapacity, DeviceLimits, DeviceNumber, IoCounters, Shares


class CgroupVNodes:
    name: str
    places_threads: bool
    member_file: str          # "tasks" (v1, one thread) or "cgroup.procs" (v2, one process)
    usage_file: str

    def __init__(self, mount: str, root_name: str, fs: CgroupFS | None = None, sys_root: str = "/sys"):
        self.mount = mount
        self.root = os.path.join(mount, root_name)
        self.fs = fs or CgroupFS()
        self.sys_root = sys_root
        self.placer = self
        self.devices: list[DeviceNumber] = []

    shares_per_node = False   # BFQ weighs each device on its own
    volume_queues = ()      # no dispatcher of its own: the kernel or the file system queues

    @property
    def shares_by_weight(self) -> bool:
        """Whether every device of the node has a per-request weight scheduler for cgroups here."""
        return bool(self.devices) and all(self._weighs(dev) for dev in self.devices)

    def _weighs(self, dev: DeviceNumber) -> bool:
        raise NotImplementedError

    def not_enforcing(self) -> str | None:
        return None

    def degraded(self) -> list[str]:
        return []

    def set_capacities(self, capacities: list[DeviceCapacity]) -> None:
        """The node's devices; capacity itself is the coordinator's business (weights are scale-free)."""
        self.devices = sorted(c.device for c in capacities)

    def _path(self, vnode: str, filename: str = "") -> str:
        return os.path.join(self.root, vnode, filename) if filename else os.path.join(self.root, vnode)

    def limitations(self) -> list[str]:
        raise NotImplementedError

    def setup(self) -> None:
        self.fs.mkdir(self.root)

    def vnodes(self) -> list[str]:
        return [d for d in self.fs.subdirs(self.root) if is_vnode_name(d)]

    def ensure_vnode(self, vnode: str, uid: int | None = None, job: str = "") -> None:
        self.fs.mkdir(self._path(vnode))

    def remove_vnode(self, vnode: str) -> None:
        for member in self.members(vnode):
            self.release(member)
        self.fs.rmdir(self._path(vnode))

    def limits(self, vnode: str) -> dict[DeviceNumber, DeviceLimits]:
        raise NotImplementedError

    def _write_change(self, vnode: str, have: DeviceLimits, want: DeviceLimits) -> None:
        """Write what differs between `have` and `want` for one device."""
        raise NotImplementedError

    def apply_limits(self, vnode: str, limits: list[DeviceLimits], node: Shares = Shares()) -> None:
        """Make the VNode's limits exactly `limits`: set what differs, clear what is not wanted."""
        current = self.limits(vnode)
        wanted = {l.device: l for l in limits}
        for dev in set(current) | set(wanted):
            have = current.get(dev, DeviceLimits(dev))
            want = wanted.get(dev, DeviceLimits(dev))
            if have != want:
                self._write_change(vnode, have, want)

    def commit(self, uids: dict[int, str], connections: dict[tuple[str, int], str]) -> None:
        """Nothing buffered: cgroup files take effect as they are written."""

    def _parse_usage(self, text: str) -> dict[DeviceNumber, IoCounters]:
        raise NotImplementedError

    def counters(self, vnode: str) -> dict[DeviceNumber, IoCounters]:
        """One cgroup's cumulative I/O per device (also a cgroup under the root that is no VNode)."""
        return self._parse_usage(self.fs.read(self._path(vnode, self.usage_file)))

    def usage(self) -> dict[str, VNodeUsage]:
        """Counters of every VNode. A cgroup does not say whether it throttled, so none is 'held'."""
        usage = {}
        for vnode in self.vnodes():
            try:
                usage[vnode] = VNodeUsage(self.counters(vnode))
            except KernelError:
                if self.fs.exists(self._path(vnode)):
                    raise
                # removed between listing and reading
        return usage

    def members(self, vnode: str) -> set[int]:
        return {int(t) for t in self.fs.read(self._path(vnode, self.member_file)).split()}

    def place(self, vnode: str, tid: int) -> None:
        self.fs.write(self._path(vnode, self.member_file), str(tid))

    def _release_target(self) -> str:
        """Where a member goes when it is no longer ours to throttle."""
        return self.root

    def release(self, tid: int) -> None:
        self._move(self._release_target(), tid)

    def _move(self, cgroup: str, tid: int) -> None:
        try:
            self.fs.write(os.path.join(cgroup, self.member_file), str(tid))
        except ThreadGone:
            pass  # exited meanwhile: nothing left to move

    def teardown(self) -> None:
        """Remove every VNode and the agent's root; members go back to the hierarchy's root."""
        for vnode in self.vnodes():
            for member in self.members(vnode):
                self._move(self.mount, member)
            self.fs.rmdir(self._path(vnode))
        if self.fs.exists(self.root):
            for member in self.fs.read(os.path.join(self.root, self.member_file)).split():
                self._move(self.mount, int(member))
            self.fs.rmdir(self.root)
