"""A fake cgroup file system on a temp dir that behaves as the kernel does where it matters.

Modelled on Documentation/admin-guide/cgroup-v1/blkio-controller.rst, cgroup-v2.rst and
block/blk-throttle.c, bfq-cgroup.c as observed on this project's machines:
- mkdir makes the control files; rmdir fails with EBUSY while tasks or children remain;
- a throttle file takes one "MAJ:MIN VALUE" per write, VALUE 0 deletes the entry,
  anything else malformed is EINVAL;
- writing a TID to `tasks` moves that thread out of every other cgroup of the hierarchy
  (ESRCH if it does not exist); v2 `cgroup.procs` moves the whole process;
- blkio.bfq.weight_device accepts 1..1000 only while BFQ is the device's scheduler;
- cpu.shares takes a whole number and clamps it to 2..262144 (kernel/sched/core.c), EINVAL otherwise.

cgroup v2 (Documentation/admin-guide/cgroup-v2.rst), as strict as the kernel:
- a child's cgroup.controllers is its parent's cgroup.subtree_control, and a controller's
  interface files (io.max, io.weight, io.stat) exist only where the parent enables it;
- "+io" in cgroup.subtree_control needs io in the cgroup's own cgroup.controllers (ENOENT);
- no internal processes: a non-root cgroup cannot enable a domain controller while it holds
  processes, nor take processes while it enables one (EBUSY);
- threaded mode, after kernel/cgroup/cgroup.c (cgroup_enable_threaded, cgroup_can_be_thread_root,
  cgroup_is_valid_domain, cgroup_vet_subtree_control_enable, cgroup_migrate_vet_dst): writing
  "threaded" to cgroup.type makes an empty cgroup threaded if its domain has no populated
  non-threaded child and enables no domain controller (EOPNOTSUPP otherwise); cgroup.type reads
  "domain threaded" for a thread root (threaded children, or threads of its own with a threaded
  controller on for its children) and "domain invalid" below one; io is a domain controller and
  cannot be enabled in a threaded subtree (EOPNOTSUPP); cgroup.threads moves a single thread only
  within its threaded domain (EOPNOTSUPP otherwise); cgroup.events says whether a subtree holds
  threads; cpu.weight (1..10000, ERANGE otherwise) exists where the parent enables cpu;
  "-CONTROLLER" is EBUSY while a child enables it for its own children.
"""

import errno
import os

from vnode_sync.errors import KernelError
from vnode_sync.kernel.cgroupfs import CgroupFS, refused
from vnode_sync.kernel.types import DeviceNumber

V1_FILES = {
    "tasks": "", "cgroup.procs": "",
    "blkio.throttle.read_bps_device": "", "blkio.throttle.write_bps_device": "",
    "blkio.throttle.read_iops_device": "", "blkio.throttle.write_iops_device": "",
    "blkio.throttle.io_service_bytes": "Total 0\n", "blkio.bfq.weight": "100\n",
    "blkio.bfq.weight_device": "default 100\n", "cpu.shares": "1024\n",
}
V2_FILES = {"cgroup.procs": "", "cgroup.threads": "", "cgroup.subtree_control": "", "cgroup.type": "domain\n"}
V2_IO_FILES = {"io.max": "", "io.weight": "default 100\n", "io.stat": ""}
V2_CPU_FILES = {"cpu.weight": "100\n"}
V2_ROOT_CONTROLLERS = "cpu io memory pids\n"
DOMAIN_CONTROLLERS = {"io", "memory"}  # cpu and pids are threaded-capable


class FakeKernel:
    """The processes and devices the fake kernel knows: tid -> pid, and BFQ devices."""

    def __init__(self):
        self.threads: dict[int, int] = {}
        self.bfq_devices: set[DeviceNumber] = set()
        # v2 per-device io.weight is blk-iocost's: EOPNOTSUPP until the root's io.cost.qos enables it
        # for the device (seen on Debian's 6.1 in the qemu guest, testbed/cgroup_v2_guest.py)
        self.iocost_devices: set[DeviceNumber] = set()
        self.rejected_writes = 0
        self.xattrs: dict[tuple[str, str], str] = {}   # (cgroup path, name) -> value, as systemd sets them

    def spawn(self, pid: int, *tids: int) -> None:
        for tid in (pid, *tids):
            self.threads[tid] = pid


def make_hierarchy(root: str, version: int, controllers: str = V2_ROOT_CONTROLLERS, child: bool = False) -> None:
    os.makedirs(root, exist_ok=True)
    files = V1_FILES if version == 1 else {**V2_FILES, "cgroup.controllers": controllers,
                                           **(V2_IO_FILES if "io" in controllers.split() else {}),
                                           **(V2_CPU_FILES if child and "cpu" in controllers.split() else {})}
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
        raise refused(path, code, text)

    def mkdir(self, path: str) -> None:
        if os.path.isdir(path):
            return
        os.mkdir(path)
        if self.version == 1:
            make_hierarchy(path, 1)
        else:
            parent = os.path.dirname(path)
            make_hierarchy(path, 2, self.read(os.path.join(parent, "cgroup.subtree_control")), child=True)

    def rmdir(self, path: str) -> None:
        if not os.path.isdir(path):
            return
        members = ("cgroup.procs", "cgroup.threads") if self.version == 2 else ("tasks",)
        if any(self.read(os.path.join(path, m)).split() for m in members) or any(
                e.is_dir() for e in os.scandir(path)):
            raise refused(path, errno.EBUSY, action="remove cgroup")
        for entry in os.scandir(path):
            os.unlink(entry.path)
        os.rmdir(path)

    def write(self, path: str, text: str) -> None:
        name = os.path.basename(path)
        handler = {
            "tasks": self._move_thread, "cgroup.procs": self._move_process,
            "blkio.bfq.weight_device": self._bfq_weight, "io.max": self._io_max,
            "io.weight": self._io_weight, "cgroup.subtree_control": self._subtree_control,
            "cgroup.threads": self._move_single_thread, "cgroup.type": self._set_type,
            "cpu.shares": self._cpu_shares, "cpu.weight": self._cpu_weight,
        }.get(name)
        if not os.path.exists(path):
            self._refuse(path, errno.ENOENT, text)
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
            if cgroup != self.hierarchy and self._enabled(cgroup) & DOMAIN_CONTROLLERS:
                self._refuse(path, errno.EBUSY, text)  # no internal processes
            if self._type(cgroup) == "domain invalid":
                self._refuse(path, errno.EOPNOTSUPP, text)
            self._move(path, {pid})
            self._move_threads(cgroup, {t for t, p in self.kernel.threads.items() if p == pid})
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

    def _cpu_weight(self, path: str, text: str) -> None:
        if not text.strip().isdigit():
            self._refuse(path, errno.EINVAL, text)
        if not 1 <= int(text) <= 10_000:
            self._refuse(path, errno.ERANGE, text)
        self._store(path, f"{int(text)}\n")

    def _cpu_shares(self, path: str, text: str) -> None:
        if not text.strip().isdigit():
            self._refuse(path, errno.EINVAL, text)
        self._store(path, f"{max(2, min(262_144, int(text)))}\n")

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
        if dev not in self.kernel.iocost_devices:
            self._refuse(path, errno.EOPNOTSUPP, text)
        if not 1 <= value <= 10000:
            self._refuse(path, errno.ERANGE, text)
        lines = [l for l in self.read(path).splitlines() if not l.startswith(f"{dev} ")]
        self._store(path, "\n".join(lines + [f"{dev} {value}"]) + "\n")

    def _subtree_control(self, path: str, text: str) -> None:
        cgroup = os.path.dirname(path)
        enabled = self._enabled(cgroup)
        available = set(self.read(os.path.join(cgroup, "cgroup.controllers")).split())
        for token in text.split():
            sign, controller = token[:1], token[1:]
            if sign not in "+-" or not sign or not controller:
                self._refuse(path, errno.EINVAL, text)
            if sign == "-":
                if any(controller in self._enabled(child) for child in self._children(cgroup)):
                    self._refuse(path, errno.EBUSY, text)       # a child still passes it on
                enabled.discard(controller)
                continue
            if controller not in available:
                self._refuse(path, errno.ENOENT, text)
            if controller not in enabled:
                self._vet_enable(path, cgroup, controller, text)
            enabled.add(controller)
        self._store(path, " ".join(sorted(enabled)) + "\n" if enabled else "")
        for child in self._children(cgroup):
            self._store(os.path.join(child, "cgroup.controllers"), " ".join(sorted(enabled)) + "\n")
            for controller, files in (("io", V2_IO_FILES), ("cpu", V2_CPU_FILES)):
                for name, content in files.items():
                    target = os.path.join(child, name)
                    if controller in enabled and not os.path.exists(target):
                        self._store(target, content)
                    elif controller not in enabled and os.path.exists(target):
                        os.unlink(target)

    def _vet_enable(self, path: str, cgroup: str, controller: str, text: str) -> None:
        """cgroup_vet_subtree_control_enable."""
        if not self._valid_domain(self._domain(cgroup)):
            self._refuse(path, errno.EOPNOTSUPP, text)
        if cgroup == self.hierarchy:
            return
        if controller in DOMAIN_CONTROLLERS:
            if self._thread_root(cgroup) or self._threaded(cgroup):
                self._refuse(path, errno.EOPNOTSUPP, text)  # threaded subtrees take threaded controllers only
        elif self._can_be_thread_root(cgroup) or self._threaded(cgroup):
            return
        if self._has_threads(cgroup):
            self._refuse(path, errno.EBUSY, text)            # no internal processes

    def _enabled(self, cgroup: str) -> set[str]:
        return set(self.read(os.path.join(cgroup, "cgroup.subtree_control")).split())

    def _children(self, cgroup: str) -> list[str]:
        return [e.path for e in os.scandir(cgroup) if e.is_dir()]

    def _threaded(self, cgroup: str) -> bool:
        path = os.path.join(cgroup, "cgroup.type")
        return cgroup != self.hierarchy and os.path.exists(path) and super().read(path).strip() == "threaded"

    def _has_threads(self, cgroup: str) -> bool:
        return bool(super().read(os.path.join(cgroup, "cgroup.threads")).split()
                    or super().read(os.path.join(cgroup, "cgroup.procs")).split())

    def _populated(self, cgroup: str) -> bool:
        return self._has_threads(cgroup) or any(self._populated(c) for c in self._children(cgroup))

    def _thread_root(self, cgroup: str) -> bool:
        if self._threaded(cgroup):
            return False
        return any(self._threaded(c) for c in self._children(cgroup)) or (
            self._has_threads(cgroup) and bool(self._enabled(cgroup) - DOMAIN_CONTROLLERS))

    def _can_be_thread_root(self, cgroup: str) -> bool:
        if cgroup == self.hierarchy:
            return True
        if self._threaded(cgroup) or self._enabled(cgroup) & DOMAIN_CONTROLLERS:
            return False
        return not any(self._populated(c) for c in self._children(cgroup) if not self._threaded(c))

    def _valid_domain(self, cgroup: str) -> bool:
        if self._threaded(cgroup):
            return False
        while cgroup != self.hierarchy:
            cgroup = os.path.dirname(cgroup)
            if self._threaded(cgroup) or (cgroup != self.hierarchy and self._thread_root(cgroup)):
                return False
        return True

    def _domain(self, cgroup: str) -> str:
        while self._threaded(cgroup):
            cgroup = os.path.dirname(cgroup)
        return cgroup

    def _type(self, cgroup: str) -> str:
        if self._threaded(cgroup):
            return "threaded"
        if not self._valid_domain(cgroup):
            return "domain invalid"
        return "domain threaded" if self._thread_root(cgroup) else "domain"

    def read(self, path: str) -> str:
        name, cgroup = os.path.basename(path), os.path.dirname(path)
        if self.version == 2 and name == "cgroup.type" and os.path.exists(path):
            return self._type(cgroup) + "\n"
        if self.version == 2 and name == "cgroup.events" and cgroup != self.hierarchy and os.path.isdir(cgroup):
            return f"populated {int(self._populated(cgroup))}\nfrozen 0\n"
        return super().read(path)

    def xattr(self, path: str, name: str) -> str | None:
        return self.kernel.xattrs.get((path, name))

    def _set_type(self, path: str, text: str) -> None:
        """cgroup_enable_threaded."""
        cgroup = os.path.dirname(path)
        if text.strip() != "threaded":
            self._refuse(path, errno.EINVAL, text)
        if self._threaded(cgroup):
            return
        if self._populated(cgroup) or self._enabled(cgroup) & DOMAIN_CONTROLLERS:
            self._refuse(path, errno.EOPNOTSUPP, text)
        domain = self._domain(os.path.dirname(cgroup))
        if not self._valid_domain(domain) or not self._can_be_thread_root(domain):
            self._refuse(path, errno.EOPNOTSUPP, text)
        self._store(path, "threaded\n")

    def _thread_cgroup(self, tid: int) -> str:
        for d in self._cgroup_dirs():
            if str(tid) in super().read(os.path.join(d, "cgroup.threads")).split():
                return d
        return self.hierarchy

    def _move_threads(self, target: str, tids: set[int]) -> None:
        for d in self._cgroup_dirs():
            f = os.path.join(d, "cgroup.threads")
            kept = [t for t in super().read(f).split() if int(t) not in tids]
            self._store(f, "".join(f"{t}\n" for t in kept))
        f = os.path.join(target, "cgroup.threads")
        self._store(f, super().read(f) + "".join(f"{t}\n" for t in sorted(tids)))

    def _move_single_thread(self, path: str, text: str) -> None:
        """A thread moves alone only within its threaded domain (cgroup_attach_permissions, cgroup_migrate_vet_dst)."""
        tid = self._parse_id(path, text)
        target = os.path.dirname(path)
        if self._domain(self._thread_cgroup(tid)) != self._domain(target) or not self._valid_domain(self._domain(target)):
            self._refuse(path, errno.EOPNOTSUPP, text)
        if not (self._can_be_thread_root(target) or self._threaded(target)) and self._enabled(target):
            self._refuse(path, errno.EBUSY, text)
        self._move_threads(target, {tid})

    def _store(self, path: str, content: str) -> None:
        with open(path, "w") as f:
            f.write(content)

    def account_io(self, cgroup: str, dev: DeviceNumber, read_bytes: int, write_bytes: int = 0) -> None:
        """Let a test say that a cgroup did I/O (what the kernel's accounting would show)."""
        path = os.path.join(cgroup, "blkio.throttle.io_service_bytes")
        self._store(path, f"{dev} Read {read_bytes}\n{dev} Write {write_bytes}\n"
                          f"{dev} Total {read_bytes + write_bytes}\nTotal {read_bytes + write_bytes}\n")
