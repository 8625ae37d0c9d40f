"""cgroup v2 io: per-process VNodes (Documentation/admin-guide/cgroup-v2.rst, "IO").

`io` is a domain controller, not a threaded one: every thread of a process shares its
io cgroup, so writing a TID to cgroup.threads cannot separate one DataXceiver from its
DataNode. This backend therefore moves whole processes (cgroup.procs) and says so.
"""

import os

from vnode_sync.kernel.cgroup_vnodes import CgroupVNodes
from vnode_sync.kernel.types import DeviceLimits, DeviceNumber, IoCounters, IoMaxLine, parse_io_stat

_FIELD_OF_KEY = {"rbps": "read_bps", "wbps": "write_bps", "riops": "read_iops", "wiops": "write_iops"}


class IoV2Backend(CgroupVNodes):
    name = "io-v2"
    places_threads = False
    member_file = "cgroup.procs"
    usage_file = "io.stat"

    def limitations(self) -> list[str]:
        return ["cgroup v2 io is not threaded: placing a handler thread moves its whole process, "
                "so one process serving many users (an HDFS DataNode) cannot be split per user"]

    def setup(self) -> None:
        super().setup()
        self.fs.write(os.path.join(self.root, "cgroup.subtree_control"), "+io")

    def limits(self, vnode: str) -> dict[DeviceNumber, DeviceLimits]:
        result: dict[DeviceNumber, dict] = {}
        for line in filter(str.strip, self.fs.read(self._path(vnode, "io.max")).splitlines()):
            parsed = IoMaxLine.parse(line)
            result.setdefault(parsed.device, {}).update(
                {_FIELD_OF_KEY[k]: v for k, v in parsed.limits.items()})
        for line in self.fs.read(self._path(vnode, "io.weight")).splitlines():
            dev, weight = line.split()
            if dev != "default":
                result.setdefault(DeviceNumber.parse(dev), {})["weight"] = int(weight) // 10  # see _write_change
        return {dev: DeviceLimits(dev, **f) for dev, f in result.items()}

    def _write_change(self, vnode: str, have: DeviceLimits, want: DeviceLimits) -> None:
        if (have.read_bps, have.write_bps, have.read_iops, have.write_iops) != \
                (want.read_bps, want.write_bps, want.read_iops, want.write_iops):
            line = IoMaxLine(want.device, {"rbps": want.read_bps, "wbps": want.write_bps,
                                           "riops": want.read_iops, "wiops": want.write_iops})
            self.fs.write(self._path(vnode, "io.max"), str(line))
        if want.weight and have.weight != want.weight:
            # io.weight is 1..10000 with default 100; the BFQ-style 1..1000 weight scales by 10.
            self.fs.write(self._path(vnode, "io.weight"), f"{want.device} {want.weight * 10}")

    def _parse_usage(self, text: str) -> dict[DeviceNumber, IoCounters]:
        return parse_io_stat(text)
