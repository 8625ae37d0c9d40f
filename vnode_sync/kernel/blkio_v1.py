"""cgroup v1 blkio: per-thread VNodes (a TID written to `tasks` moves that thread alone).

Files: Documentation/admin-guide/cgroup-v1/blkio-controller.rst. Throttle files take one
"MAJ:MIN VALUE" per write; VALUE 0 removes the rule. BFQ's per-device group weight lives in
blkio.bfq.weight_device ("MAJ:MIN W", 1..1000); the kernel accepts it only while BFQ is
the device's scheduler (EOPNOTSUPP otherwise) and rejects 0, so a weight is reset by
writing the default, 100. BFQ shares a device by weight at every request and is
work-conserving (Documentation/block/bfq-iosched.rst): with BFQ on every device the backend
shares by weight, and the throttle files hold only limits.
"""

from vnode_sync.errors import KernelError
from vnode_sync.kernel.cgroup_vnodes import CgroupVNodes
from vnode_sync.kernel.devices import scheduler
from vnode_sync.kernel.types import (BlkioLine, DeviceLimits, DeviceNumber, IoCounters, parse_blkio_lines,
                                     parse_io_service_bytes)

THROTTLE_FILES = {
    "read_bps": "blkio.throttle.read_bps_device",
    "write_bps": "blkio.throttle.write_bps_device",
    "read_iops": "blkio.throttle.read_iops_device",
    "write_iops": "blkio.throttle.write_iops_device",
}
BFQ_WEIGHT_FILE = "blkio.bfq.weight_device"
BFQ_DEFAULT_WEIGHT = 100


class BlkioV1Backend(CgroupVNodes):
    name = "blkio-v1"
    places_threads = True
    member_file = "tasks"
    usage_file = "blkio.throttle.io_service_bytes"

    def limitations(self) -> list[str]:
        return ["buffered writes flushed by kernel writeback threads are not charged to the VNode "
                "(cgroup v1); only reads, direct I/O and writeback the thread forces (fsync) are throttled",
                "BFQ has one weight per device for reads and writes (the larger local weight is used) and "
                "no floors: reservations are not enforced by BFQ weights"]

    def _weighs(self, dev: DeviceNumber) -> bool:
        return scheduler(dev, self.sys_root) == "bfq"

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

    def _write_change(self, vnode: str, have: DeviceLimits, want: DeviceLimits) -> None:
        for field, filename in THROTTLE_FILES.items():
            if getattr(have, field) != getattr(want, field):
                self.fs.write(self._path(vnode, filename), str(BlkioLine(want.device, getattr(want, field))))
        if (have.weight or BFQ_DEFAULT_WEIGHT) != (want.weight or BFQ_DEFAULT_WEIGHT):
            self._write_weight(vnode, want.device, want.weight or BFQ_DEFAULT_WEIGHT)

    def _write_weight(self, vnode: str, dev: DeviceNumber, weight: int) -> None:
        path = self._path(vnode, BFQ_WEIGHT_FILE)
        if not self.fs.exists(path):
            raise KernelError(path, "BFQ weights need the bfq I/O scheduler compiled in (file missing)")
        try:
            self.fs.write(path, f"{dev} {weight}")
        except KernelError as e:
            raise KernelError(path, f"cannot set weight {weight} for {dev}: is bfq the device's "
                                    f"scheduler? ({e})") from e

    def _parse_usage(self, text: str) -> dict[DeviceNumber, IoCounters]:
        return parse_io_service_bytes(text)
