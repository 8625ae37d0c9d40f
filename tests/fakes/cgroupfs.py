"""A fake cgroup file system on a temp dir that behaves as the kernel does where it matters.

Modelled on Documentation/admin-guide/cgroup-v1/blkio-controller.rst, cgroup-v2.rst and
block/blk-throttle.c, bfq-cgroup.c as observed on this project's machines:
- mkdir makes the control files; rmdir fails with EBUSY while tasks or children remain;
- a throttle file takes one "MAJ:MIN VALUE" per write, VALUE 0 deletes the entry,
  anything else malformed is EINVAL;
- writing a TID to `tasks` moves that thread out of every other cgroup of the hierarchy
  (ESRCH if it does not exist); v2 `cgroup.procs` moves the whole process;
- blkio.bfq.weight_device accepts 1..1000 only while BFQ is the device's scheduler.

v2 follows Documentation/admin-guide/cgroup-v2.rst so the fake refuses what the kernel refuses:
- "No Internal Process Constraint": a non-root cgroup cannot hold processes while its
  cgroup.subtree_control enables a domain controller (io): writing a PID to its cgroup.procs,
  or +io while it holds processes, is EBUSY;
- "Enabling and Disabling": a controller can be enabled only if the cgroup.controllers of the
  cgroup lists it, i.e. its parent enables it (ENOENT otherwise), and disabled only while no
  child enables it (EBUSY);
- "Threads": cgroup.type takes only "threaded" (one way), refused (EOPNOTSUPP, "invalid
  topology") while the parent enables a domain controller or the cgroup enables one itself;
  a threaded cgroup offers only threaded controllers (no io); cgroup.threads moves a thread only
  within its threaded subtree (EOPNOTSUPP otherwise).
"""

import errno
import os

from vnode_sync.errors import KernelError
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
    "cgroup.procs": "", "cgroup.threads": "", "cgroup.subtree_control": "", "cgroup.type": "domain\n",
    "io.max": "", "io.weight": "default 100\n", "io.stat": "",
}
# What a real 6.1 kernel's root offers (architecture.md); cpu, cpuset and pids are threaded controllers.
V2_ROOT_CONTROLLERS = ("cpuset", "cpu", "io", "memory", "pids")
THREADED_CONTROLLERS = {"cpuset", "cpu", "pids"}


class FakeKernel:
    """The processes and devices the fake kernel knows: tid -> pid, and BFQ devices."""

    def __init__(self):
        self.threads: dict[int, int] = {}
        self.bfq_devices: set[DeviceNumber] = set()
        self.rejected_writes = 0

    def spawn(self, pid: int, *tids: int) -> None:
        for tid in (pid, *tids):
            self.threads[tid] = pid


def make_hierarchy(root: str, version: int, controllers: str = " ".join(V2_ROOT_CONTROLLERS)) -> None:
    os.makedirs(root, exist_ok=True)
    files = V1_FILES if version == 1 else {**V2_FILES, "cgroup.controllers": controllers + "\n"}
    for name, content in files.items():
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
            raise ProcessLookupError(text)
        raise KernelError(path, f"kernel refused {text.strip()!r}: {os.strerror(code)}")

    def mkdir(self, path: str) -> None:
        if os.path.isdir(path):
            return
        os.mkdir(path)
        if self.version == 2:
            parent = os.path.dirname(path)
            enabled = self.read(os.path.join(parent, "cgroup.subtree_control")).split()
            make_hierarchy(path, 2, " ".join(enabled))
            if self._type(parent) != "domain" and parent != self.hierarchy:
                # a child of a threaded subtree is created "domain invalid"
                self._store(os.path.join(path, "cgroup.type"), "domain invalid\n")
        else:
            make_hierarchy(path, self.version)

    def rmdir(self, path: str) -> None:
        if not os.path.isdir(path):
            return
        members = "cgroup.threads" if self.version == 2 else "tasks"
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
            "cgroup.threads": self._move_v2_thread, "cgroup.type": self._cgroup_type,
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
            cgroup = os.path.dirname(path)
            if cgroup != self.hierarchy and self._domain_controllers(cgroup) and \
                    self._type(cgroup) != "threaded":
                self._refuse(path, errno.EBUSY, text)  # no internal process constraint
            if self._type(cgroup) == "domain invalid":
                self._refuse(path, errno.EOPNOTSUPP, text)
            self._move_v2(cgroup, {t for t, p in self.kernel.threads.items() if p == pid})
        else:
            self._move(os.path.join(os.path.dirname(path), "tasks"),
                       {t for t, p in self.kernel.threads.items() if p == pid})

    def _type(self, cgroup: str) -> str:
        if cgroup == self.hierarchy:
            return "domain"
        return self.read(os.path.join(cgroup, "cgroup.type")).strip()

    def _domain_controllers(self, cgroup: str) -> set[str]:
        return set(self.read(os.path.join(cgroup, "cgroup.subtree_control")).split()) - THREADED_CONTROLLERS

    def _threads_in(self, cgroup: str) -> set[int]:
        return {int(t) for t in self.read(os.path.join(cgroup, "cgroup.threads")).split()}

    def _cgroup_of(self, tid: int) -> str:
        return next((d for d in self._cgroup_dirs() if tid in self._threads_in(d)), self.hierarchy)

    def _thread_domain(self, cgroup: str) -> str:
        """The threaded domain a cgroup's threads belong to (itself when it is a domain)."""
        while cgroup != self.hierarchy and self._type(cgroup) == "threaded":
            cgroup = os.path.dirname(cgroup)
        return cgroup

    def _move_v2(self, cgroup: str, tids: set[int]) -> None:
        """v2 membership is kept per thread in cgroup.threads; cgroup.procs lists their processes."""
        for d in self._cgroup_dirs():
            kept = self._threads_in(d) - tids
            if d == cgroup:
                kept |= tids
            self._store(os.path.join(d, "cgroup.threads"), "".join(f"{t}\n" for t in sorted(kept)))
            pids = sorted({self.kernel.threads.get(t, t) for t in kept})
            self._store(os.path.join(d, "cgroup.procs"), "".join(f"{p}\n" for p in pids))

    def _move_v2_thread(self, path: str, text: str) -> None:
        tid = self._parse_id(path, text)
        cgroup = os.path.dirname(path)
        same_subtree = self._thread_domain(cgroup) == self._thread_domain(self._cgroup_of(tid))
        if self._type(cgroup) != "threaded" and cgroup != self._thread_domain(self._cgroup_of(tid)) \
                or not same_subtree:
            self._refuse(path, errno.EOPNOTSUPP, text)  # cgroup.threads: only inside one threaded subtree
        self._move_v2(cgroup, {tid})

    def _cgroup_type(self, path: str, text: str) -> None:
        cgroup = os.path.dirname(path)
        if text.strip() != "threaded" or cgroup == self.hierarchy:
            self._refuse(path, errno.EINVAL, text)
        parent = os.path.dirname(cgroup)
        if self._domain_controllers(cgroup) or (parent != self.hierarchy and self._domain_controllers(parent)):
            self._refuse(path, errno.EOPNOTSUPP, text)  # domain controllers cannot go threaded
        self._store(path, "threaded\n")
        if parent != self.hierarchy and self._type(parent) == "domain":
            self._store(os.path.join(parent, "cgroup.type"), "domain threaded\n")
        threaded = " ".join(c for c in self.read(os.path.join(cgroup, "cgroup.controllers")).split()
                            if c in THREADED_CONTROLLERS)
        self._store(os.path.join(cgroup, "cgroup.controllers"), threaded + "\n")

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
        cgroup = os.path.dirname(path)
        enabled = self.read(path).split()
        available = self.read(os.path.join(cgroup, "cgroup.controllers")).split()
        for word in text.split():
            sign, controller = word[:1], word[1:]
            if sign not in "+-" or not sign or controller not in V2_ROOT_CONTROLLERS:
                self._refuse(path, errno.EINVAL, text)
            if sign == "+":
                if controller not in available:
                    self._refuse(path, errno.ENOENT, text)  # the parent does not enable it
                if controller not in THREADED_CONTROLLERS and cgroup != self.hierarchy and (
                        self._threads_in(cgroup) or self._type(cgroup) != "domain"):
                    self._refuse(path, errno.EBUSY if self._threads_in(cgroup) else errno.EOPNOTSUPP, text)
                enabled = sorted(set(enabled) | {controller})
            else:
                if any(controller in self.read(os.path.join(cgroup, c, "cgroup.subtree_control")).split()
                       for c in self.subdirs(cgroup)):
                    self._refuse(path, errno.EBUSY, text)
                enabled = [c for c in enabled if c != controller]
        self._store(path, " ".join(enabled) + "\n")
        for child in self.subdirs(cgroup):
            if self._type(os.path.join(cgroup, child)) != "threaded":
                self._store(os.path.join(cgroup, child, "cgroup.controllers"), " ".join(enabled) + "\n")

    def _store(self, path: str, content: str) -> None:
        with open(path, "w") as f:
            f.write(content)

    def account_io(self, cgroup: str, dev: DeviceNumber, read_bytes: int, write_bytes: int = 0) -> None:
        """Let a test say that a cgroup did I/O (what the kernel's accounting would show)."""
        path = os.path.join(cgroup, "blkio.throttle.io_service_bytes")
        self._store(path, f"{dev} Read {read_bytes}\n{dev} Write {write_bytes}\n"
                          f"{dev} Total {read_bytes + write_bytes}\nTotal {read_bytes + write_bytes}\n")
