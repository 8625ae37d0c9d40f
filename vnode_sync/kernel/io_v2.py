"""cgroup v2 io: per-process VNodes (Documentation/admin-guide/cgroup-v2.rst, "IO").

`io` is a domain controller, not a threaded one: every thread of a process shares its
io cgroup, so writing a TID to cgroup.threads cannot separate one DataXceiver from its
DataNode. This backend therefore moves whole processes (cgroup.procs) and says so.

The kernel's "no internal process" rule shapes the layout: the agent's root enables +io for
its children, so it cannot hold processes itself. VNodes are leaves under it, and a released
process goes to the leaf `unplaced`, never to the root. +io must be enabled on every cgroup
from the mount down to the agent's root; setup writes only that (and only where it is missing)
and never disables it again, since other users of the hierarchy may rely on it.
"""

import logging
import os

from vnode_sync.kernel.backend import is_vnode_name
from vnode_sync.kernel.cgroupfs import CgroupFS
from vnode_sync.kernel.types import DeviceLimits, DeviceNumber, IoCounters, IoMaxLine, parse_io_stat

log = logging.getLogger(__name__)

UNPLACED = "unplaced"  # the leaf that holds processes released from a VNode

_FIELD_OF_KEY = {"rbps": "read_bps", "wbps": "write_bps", "riops": "read_iops", "wiops": "write_iops"}


class IoV2Backend:
    name = "io-v2"
    places_threads = False
    moves_cgroup_tasks = True

    def __init__(self, mount: str, root_name: str, fs: CgroupFS | None = None):
        self.mount = mount
        self.root = os.path.join(mount, root_name)
        self.fs = fs or CgroupFS()

    def limitations(self) -> list[str]:
        return ["cgroup v2 io is not threaded: placing a handler thread moves its whole process, "
                "so one process serving many users (an HDFS DataNode) cannot be split per user",
                f"+io is enabled on every cgroup from {self.mount} down to {self.root} "
                "(those cgroups cannot hold processes) and left enabled at teardown"]

    def _path(self, vnode: str, filename: str = "") -> str:
        return os.path.join(self.root, vnode, filename) if filename else os.path.join(self.root, vnode)

    def _enable_io(self, cgroup: str) -> None:
        control = os.path.join(cgroup, "cgroup.subtree_control")
        if "io" not in self.fs.read(control).split():
            log.info("enabling +io in %s", control)
            self.fs.write(control, "+io")

    def setup(self) -> None:
        relative = os.path.relpath(self.root, self.mount)
        cgroup = self.mount
        for part in relative.split(os.sep):
            self._enable_io(cgroup)
            cgroup = os.path.join(cgroup, part)
            self.fs.mkdir(cgroup)
        self._enable_io(self.root)
        self.fs.mkdir(self._path(UNPLACED))

    def vnodes(self) -> list[str]:
        return [d for d in self.fs.subdirs(self.root) if is_vnode_name(d)]

    def ensure_vnode(self, vnode: str, uid: int | None = None) -> None:
        self.fs.mkdir(self._path(vnode))

    def remove_vnode(self, vnode: str) -> None:
        for pid in self.members(vnode):
            self.release(pid)
        self.fs.rmdir(self._path(vnode))

    def limits(self, vnode: str) -> dict[DeviceNumber, DeviceLimits]:
        result: dict[DeviceNumber, dict] = {}
        for line in filter(str.strip, self.fs.read(self._path(vnode, "io.max")).splitlines()):
            parsed = IoMaxLine.parse(line)
            result.setdefault(parsed.device, {}).update(
                {_FIELD_OF_KEY[k]: v for k, v in parsed.limits.items()})
        for line in self.fs.read(self._path(vnode, "io.weight")).splitlines():
            dev, weight = line.split()
            if dev != "default":
                result.setdefault(DeviceNumber.parse(dev), {})["weight"] = int(weight)
        return {dev: DeviceLimits(dev, **f) for dev, f in result.items()}

    def apply_limits(self, vnode: str, limits: list[DeviceLimits]) -> None:
        current = self.limits(vnode)
        wanted = {l.device: l for l in limits}
        for dev in set(current) | set(wanted):
            have = current.get(dev, DeviceLimits(dev))
            want = wanted.get(dev, DeviceLimits(dev))
            if (have.read_bps, have.write_bps, have.read_iops, have.write_iops) != \
                    (want.read_bps, want.write_bps, want.read_iops, want.write_iops):
                line = IoMaxLine(dev, {"rbps": want.read_bps, "wbps": want.write_bps,
                                       "riops": want.read_iops, "wiops": want.write_iops})
                self.fs.write(self._path(vnode, "io.max"), str(line))
            if want.weight and have.weight != want.weight:
                # io.weight is 1..10000 with default 100; the BFQ-style 1..1000 weight scales by 10.
                self.fs.write(self._path(vnode, "io.weight"), f"{dev} {want.weight * 10}")

    def members(self, vnode: str) -> set[int]:
        return {int(p) for p in self.fs.read(self._path(vnode, "cgroup.procs")).split()}

    def place(self, vnode: str, tid: int) -> None:
        """Moves the whole process that `tid` belongs to (a v2 domain controller cannot do less)."""
        self.fs.write(self._path(vnode, "cgroup.procs"), str(tid))

    def release(self, pid: int) -> None:
        try:
            self.fs.write(self._path(UNPLACED, "cgroup.procs"), str(pid))
        except ProcessLookupError:
            pass

    def usage(self, vnode: str) -> dict[DeviceNumber, IoCounters]:
        return parse_io_stat(self.fs.read(self._path(vnode, "io.stat")))

    def teardown(self) -> None:
        """Members go to the mount's root cgroup (exempt from the no-internal-process rule)."""
        if not self.fs.exists(self.root):
            return
        for leaf in [*self.vnodes(), UNPLACED]:
            if self.fs.exists(self._path(leaf)):
                for pid in self.members(leaf):
                    self._to_mount_root(pid)
                self.fs.rmdir(self._path(leaf))
        self.fs.rmdir(self.root)

    def _to_mount_root(self, pid: int) -> None:
        try:
            self.fs.write(os.path.join(self.mount, "cgroup.procs"), str(pid))
        except ProcessLookupError:
            pass
