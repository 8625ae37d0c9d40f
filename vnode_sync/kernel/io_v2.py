"""cgroup v2 io: per-process VNodes (Documentation/admin-guide/cgroup-v2.rst, "IO").

`io` is a domain controller, not a threaded one: every thread of a process shares its
io cgroup, so writing a TID to cgroup.threads cannot separate one DataXceiver from its
DataNode. This backend therefore moves whole processes (cgroup.procs) and says so.

The agent's root enables io for its VNodes, so by the no-internal-process rule it cannot
hold processes itself (EBUSY): a process released from a VNode goes to the root's leaf
`unmanaged`, which has no limits.
"""

import os

from vnode_sync.errors import KernelError, Unsupported
from vnode_sync.kernel.cgroup_vnodes import CgroupVNodes
from vnode_sync.kernel.types import DeviceLimits, DeviceNumber, IoCounters, IoMaxLine, parse_io_stat

UNMANAGED_LEAF = "unmanaged"
_FIELD_OF_KEY = {"rbps": "read_bps", "wbps": "write_bps", "riops": "read_iops", "wiops": "write_iops"}


class IoV2Backend(CgroupVNodes):
    name = "io-v2"
    places_threads = False
    member_file = "cgroup.procs"
    usage_file = "io.stat"

    def limitations(self) -> list[str]:
        return ["cgroup v2 io is not threaded: placing a handler thread moves its whole process, "
                "so one process serving many users (an HDFS DataNode) cannot be split per user",
                "per-device io.weight needs iocost enabled for the device (io.cost.qos at the root); "
                "without it the backend caps rates instead of sharing by weight"]

    def _weighs(self, dev: DeviceNumber) -> bool:
        """iocost (blk-iocost.c) on for DEV: io.cost.qos at the hierarchy's root says "MAJ:MIN enable=1"."""
        path = os.path.join(self.mount, "io.cost.qos")
        if not self.fs.exists(path):
            return False
        for line in self.fs.read(path).splitlines():
            parts = line.split()
            if parts and parts[0] == str(dev) and "enable=1" in parts[1:]:
                return True
        return False

    def setup(self) -> None:
        super().setup()
        if "io" not in self.fs.read(os.path.join(self.root, "cgroup.controllers")).split():
            # The parent must pass io down; under systemd, Delegate=yes on the unit does this.
            parent = os.path.dirname(self.root)
            try:
                self.fs.write(os.path.join(parent, "cgroup.subtree_control"), "+io")
            except KernelError as e:
                raise Unsupported(f"cgroup v2 io is not delegated to {parent} and cannot be enabled there "
                                  f"({e}); give the agent a delegated subtree with io (systemd Delegate=yes)") from e
        if "io" not in self.fs.read(os.path.join(self.root, "cgroup.subtree_control")).split():
            self.fs.write(os.path.join(self.root, "cgroup.subtree_control"), "+io")
        self.fs.mkdir(os.path.join(self.root, UNMANAGED_LEAF))

    def _release_target(self) -> str:
        return os.path.join(self.root, UNMANAGED_LEAF)

    def teardown(self) -> None:
        leaf = os.path.join(self.root, UNMANAGED_LEAF)
        if self.fs.exists(leaf):
            for pid in self.fs.read(os.path.join(leaf, "cgroup.procs")).split():
                self._move(self.mount, int(pid))
            self.fs.rmdir(leaf)
        super().teardown()

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
