"""cgroup v1 blkio: per-thread VNodes (a TID written to `tasks` moves that thread alone).

Files: Documentation/admin-guide/cgroup-v1/blkio-controller.rst. Throttle files take one
"MAJ:MIN VALUE" per write; VALUE 0 removes the rule. BFQ's per-device group weight lives in
blkio.bfq.weight_device ("MAJ:MIN W", 1..1000); the kernel accepts it only while BFQ is
the device's scheduler (EOPNOTSUPP otherwise) and rejects 0, so a weight is reset by
writing the default, 100.
"""

import os

from vnode_sync.errors import KernelError
from vnode_sync.kernel.backend import is_vnode_name
from vnode_sync.kernel.cgroupfs import CgroupFS
from vnode_sync.kernel.types import (BlkioLine, DeviceLimits, DeviceNumber, IoCounters,
                                     parse_blkio_lines, parse_io_service_bytes)

THROTTLE_FILES = {
    "read_bps": "blkio.throttle.read_bps_device",
    "write_bps": "blkio.throttle.write_bps_device",
    "read_iops": "blkio.throttle.read_iops_device",
    "write_iops": "blkio.throttle.write_iops_device",
}
BFQ_WEIGHT_FILE = "blkio.bfq.weight_device"
BFQ_DEFAULT_WEIGHT = 100


class BlkioV1Backend:
    name = "blkio-v1"
    places_threads = True
    moves_cgroup_tasks = True

    def __init__(self, hierarchy: str, root_name: str, fs: CgroupFS | None = None):
        self.hierarchy = hierarchy
        self.root = os.path.join(hierarchy, root_name)
        self.fs = fs or CgroupFS()

    def limitations(self) -> list[str]:
        return ["buffered writes flushed by kernel writeback threads are not charged to the VNode "
                "(cgroup v1); only reads, direct I/O and writeback the thread forces (fsync) are throttled"]

    def _path(self, vnode: str, filename: str = "") -> str:
        return os.path.join(self.root, vnode, filename) if filename else os.path.join(self.root, vnode)

    def setup(self) -> None:
        self.fs.mkdir(self.root)

    def vnodes(self) -> list[str]:
        return [d for d in self.fs.subdirs(self.root) if is_vnode_name(d)]

    def ensure_vnode(self, vnode: str, uid: int | None = None) -> None:
        self.fs.mkdir(self._path(vnode))

    def remove_vnode(self, vnode: str) -> None:
        for tid in self.members(vnode):
            self.release(tid)
        self.fs.rmdir(self._path(vnode))

    def limits(self, vnode: str) -> dict[DeviceNumber, DeviceLimits]:
        fields: dict[DeviceNumber, dict[str, int]] = {}
        for field, filename in THROTTLE_FILES.items():
            for dev, value in parse_blkio_lines(self.fs.read(self._path(vnode, filename))).items():
                fields.setdefault(dev, {})[field] = value
        for dev, weight in self._bfq_weights(vnode).items():
            fields.setdefault(dev, {})["weight"] = weight
        return {dev: DeviceLimits(dev, **f) for dev, f in fields.items()}

    def _bfq_weights(self, vnode: str) -> dict[DeviceNumber, int]:
        path = self._path(vnode, BFQ_WEIGHT_FILE)
        if not self.fs.exists(path):
            return {}
        weights = {}
        for line in self.fs.read(path).splitlines():
            parts = line.split()
            if len(parts) == 2 and ":" in parts[0] and int(parts[1]) != BFQ_DEFAULT_WEIGHT:
                weights[DeviceNumber.parse(parts[0])] = int(parts[1])
        return weights

    def apply_limits(self, vnode: str, limits: list[DeviceLimits]) -> None:
        """Make the VNode's limits exactly `limits`: set what differs, clear what is not wanted."""
        current = self.limits(vnode)
        wanted = {l.device: l for l in limits}
        for dev in set(current) | set(wanted):
            have = current.get(dev, DeviceLimits(dev))
            want = wanted.get(dev, DeviceLimits(dev))
            for field, filename in THROTTLE_FILES.items():
                if getattr(have, field) != getattr(want, field):
                    self.fs.write(self._path(vnode, filename), str(BlkioLine(dev, getattr(want, field))))
            if (have.weight or BFQ_DEFAULT_WEIGHT) != (want.weight or BFQ_DEFAULT_WEIGHT):
                self._write_weight(vnode, dev, want.weight or BFQ_DEFAULT_WEIGHT)

    def _write_weight(self, vnode: str, dev: DeviceNumber, weight: int) -> None:
        path = self._path(vnode, BFQ_WEIGHT_FILE)
        if not self.fs.exists(path):
            raise KernelError(path, "BFQ weights need the bfq I/O scheduler compiled in (file missing)")
        try:
            self.fs.write(path, f"{dev} {weight}")
        except KernelError as e:
            raise KernelError(path, f"cannot set weight {weight} for {dev}: is bfq the device's "
                                    f"scheduler? ({e})") from e

    def members(self, vnode: str) -> set[int]:
        text = self.fs.read(self._path(vnode, "tasks"))
        return {int(t) for t in text.split()}

    def place(self, vnode: str, tid: int) -> None:
        self.fs.write(self._path(vnode, "tasks"), str(tid))

    def release(self, tid: int) -> None:
        """Return a thread to the agent's root cgroup, which has no limits."""
        try:
            self.fs.write(os.path.join(self.root, "tasks"), str(tid))
        except ProcessLookupError:
            pass

    def usage(self, vnode: str) -> dict[DeviceNumber, IoCounters]:
        return parse_io_service_bytes(self.fs.read(self._path(vnode, "blkio.throttle.io_service_bytes")))

    def teardown(self) -> None:
        """Remove every VNode and the root; threads go back to the hierarchy's root cgroup."""
        for vnode in self.vnodes():
            for tid in self.members(vnode):
                self._to_hierarchy_root(tid)
            self.fs.rmdir(self._path(vnode))
        if self.fs.exists(self.root):
            for tid in self.fs.read(os.path.join(self.root, "tasks")).split():
                self._to_hierarchy_root(int(tid))
            self.fs.rmdir(self.root)

    def _to_hierarchy_root(self, tid: int) -> None:
        try:
            self.fs.write(os.path.join(self.hierarchy, "tasks"), str(tid))
        except ProcessLookupError:
            pass
