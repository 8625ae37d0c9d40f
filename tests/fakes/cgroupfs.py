"""A fake cgroup file system on a temp dir that behaves as the kernel does where it matters.

Modelled on Documentation/admin-guide/cgroup-v1/blkio-controller.rst, cgroup-v2.rst and
block/blk-throttle.c, bfq-cgroup.c as observed on this project's machines:
- mkdir makes the control files; rmdir fails with EBUSY while tasks or children remain;
- a throttle file takes one "MAJ:MIN VALUE" per write, VALUE 0 deletes the entry,
  anything else malformed is EINVAL;
- writing a TID to `tasks` moves that thread out of every other cgroup of the hierarchy
  (ESRCH if it does not exist); v2 `cgroup.procs` moves the whole process;
- blkio.bfq.weight_device accepts 1..1000 only while BFQ is the device's scheduler.
"""

import errno
import os

from vnode_sync.errors import KernelError, ThreadGone
from vnode_sync.kernel.cgroupfs import CgroupFS
from vnode_sync.kernel.types import DeviceNumber

V1_FILES = {
    "tasks": "", "cgroup.procs": "",
    "blkio.throttle.read_bps_device": "", "blkio.throttle.write_bps_device": "",
    "blkio.throttle.read_iops_device": "", "blkio.throttle.write_iops_device": "",
    "blkio.throttle.io_service_bytes": "Total 0\n", "blkio.bfq.weight": "100\n",
    "blkio.bfq.weight_device": "default 100\n",
}
V2_FILES = {
    "cgroup.procs": "", "cgroup.threads": "", "cgroup.subtree_control": "", "cgroup.controllers": "io\n",
    "io.max": "", "io.weight": "default 100\n", "io.stat": "",
}


class FakeKernel:
    """The processes and devices the fake kernel knows: tid -> pid, and BFQ devices."""

    def __init__(self):
        self.threads: dict[int, int] = {}
        self.bfq_devices: set[DeviceNumber] = set()
        self.rejected_writes = 0

    def spawn(self, pid: int, *tids: int) -> None:
        for tid in (pid, *tids):
            self.threads[tid] = pid


def make_hierarchy(root: str, version: int) -> None:
    os.makedirs(root, exist_ok=True)
    for name, content in (V1_FILES if version == 1 else V2_FILES).items():
        with open(os.path.join(root, name), "w") as f:
            f.write(content)


class FakeCgroupFS(CgroupFS):
    def __init__(self, hierarchy: str, kernel: FakeKernel, version: int = 1):
        self.hierarchy = hierarchy
        self.kernel = kernel
        self.version = version
        make_hierarchy(hierarchy, version)

    def _refuse(self, path: str, code: int, text: str):
        self.kernel.rejected_writes += 1
        if code == errno.ESRCH:
            raise ThreadGone(path, int(text))
        raise KernelError(path, f"kernel refused {text.strip()!r}: {os.strerror(code)}")

    def mkdir(self, path: str) -> None:
        if os.path.isdir(path):
            return
        os.mkdir(path)
        make_hierarchy(path, self.version)

    def rmdir(self, path: str) -> None:
        if not os.path.isdir(path):
            return
        members = "cgroup.procs" if self.version == 2 else "tasks"
        if self.read(os.path.join(path, members)).split() or any(
                e.is_dir() for e in os.scandir(path)):
            raise KernelError(path, f"cannot remove cgroup: {os.strerror(errno.EBUSY)}")
        for entry in os.scandir(path):
            os.unlink(entry.path)
        os.rmdir(path)

    def write(self, path: str, text: str) -> None:
        name = os.path.basename(path)
        handler = {
            "tasks": self._move_thread, "cgroup.procs": self._move_process,
            "blkio.bfq.weight_device": self._bfq_weight, "io.max": self._io_max,
            "io.weight": self._io_weight, "cgroup.subtree_control": self._subtree_control,
        }.get(name)
        if handler is None and name.startswith("blkio.throttle.") and name.endswith("_device"):
            handler = self._throttle
        if handler is None:
            raise KernelError(path, f"fake cgroupfs does not model writes to {name}")
        handler(path, text)

    def _cgroup_dirs(self):
        for dirpath, dirnames, _ in os.walk(self.hierarchy):
            yield dirpath

    def _members_file(self) -> str:
        return "cgroup.procs" if self.version == 2 else "tasks"

    def _move(self, path: str, ids: set[int]) -> None:
        for d in self._cgroup_dirs():
            f = os.path.join(d, self._members_file())
            kept = [t for t in self.read(f).split() if int(t) not in ids]
            self._store(f, "".join(f"{t}\n" for t in kept))
        current = self.read(path).split()
        self._store(path, "".join(f"{t}\n" for t in current + [str(i) for i in sorted(ids)]))

    def _move_thread(self, path: str, text: str) -> None:
        tid = self._parse_id(path, text)
        self._move(path, {tid})

    def _move_process(self, path: str, text: str) -> None:
        tid = self._parse_id(path, text)
        pid = self.kernel.threads[tid]
        if self.version == 2:
            self._move(path, {pid})
        else:
            self._move(os.path.join(os.path.dirname(path), "tasks"),
                       {t for t, p in self.kernel.threads.items() if p == pid})

    def _parse_id(self, path: str, text: str) -> int:
        try:
            tid = int(text.strip())
        except ValueError:
            self._refuse(path, errno.EINVAL, text)
        if tid not in self.kernel.threads:
            self._refuse(path, errno.ESRCH, text)
        return tid

    def _device_value(self, path: str, text: str) -> tuple[DeviceNumber, int]:
        try:
            dev, value = text.split()
            return DeviceNumber.parse(dev), int(value)
        except ValueError:
            self._refuse(path, errno.EINVAL, text)

    def _throttle(self, path: str, text: str) -> None:
        dev, value = self._device_value(path, text)
        if value < 0:
            self._refuse(path, errno.EINVAL, text)
        lines = {DeviceNumber.parse(l.split()[0]): l for l in self.read(path).splitlines() if l.strip()}
        if value == 0:
            lines.pop(dev, None)
        else:
            lines[dev] = f"{dev} {value}"
        self._store(path, "".join(lines[d] + "\n" for d in sorted(lines)))

    def _bfq_weight(self, path: str, text: str) -> None:
        dev, value = self._device_value(path, text)
        if dev not in self.kernel.bfq_devices:
            self._refuse(path, errno.EOPNOTSUPP, text)
        if not 1 <= value <= 1000:
            self._refuse(path, errno.ERANGE, text)
        lines = [l for l in self.read(path).splitlines() if not l.startswith(f"{dev} ")]
        lines.append(f"{dev} {value}")
        self._store(path, "\n".join(lines) + "\n")

    def _io_max(self, path: str, text: str) -> None:
        parts = text.split()
        try:
            dev = DeviceNumber.parse(parts[0])
            values = dict(p.split("=") for p in parts[1:])
            if not values or set(values) - {"rbps", "wbps", "riops", "wiops"}:
                raise ValueError
            for v in values.values():
                if v != "max" and int(v) <= 0:
                    raise ValueError
        except (ValueError, IndexError):
            self._refuse(path, errno.EINVAL, text)
        lines = {l.split()[0]: l for l in self.read(path).splitlines() if l.strip()}
        if all(v == "max" for v in values.values()):
            lines.pop(str(dev), None)
        else:
            lines[str(dev)] = f"{dev} " + " ".join(f"{k}={values.get(k, 'max')}"
                                                   for k in ("rbps", "wbps", "riops", "wiops"))
        self._store(path, "".join(lines[k] + "\n" for k in sorted(lines)))

    def _io_weight(self, path: str, text: str) -> None:
        dev, value = self._device_value(path, text)
        if not 1 <= value <= 10000:
            self._refuse(path, errno.ERANGE, text)
        lines = [l for l in self.read(path).splitlines() if not l.startswith(f"{dev} ")]
        self._store(path, "\n".join(lines + [f"{dev} {value}"]) + "\n")

    def _subtree_control(self, path: str, text: str) -> None:
        if text.strip() != "+io":
            self._refuse(path, errno.EINVAL, text)
        self._store(path, "io\n")

    def _store(self, path: str, content: str) -> None:
        with open(path, "w") as f:
            f.write(content)

    def account_io(self, cgroup: str, dev: DeviceNumber, read_bytes: int, write_bytes: int = 0) -> None:
        """Let a test say that a cgroup did I/O (what the kernel's accounting would show)."""
        path = os.path.join(cgroup, "blkio.throttle.io_service_bytes")
        self._store(path, f"{dev} Read {read_bytes}\n{dev} Write {write_bytes}\n"
                          f"{dev} Total {read_bytes + write_bytes}\nTotal {read_bytes + write_bytes}\n")
