"""What a result was measured on: machine, kernel, emulated device and its scheduler."""

import os
import platform
import subprocess
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from benchmarks.mpiio.slow_disk import MountedDisk
from vnode_sync.kernel.disk_queue import QueueSetting


@dataclass(frozen=True)
class TestbedRecord:
    cpu: str
    cores: int
    memory_gib: float
    kernel: str
    device: str
    scheduler: str
    emulation: str
    mpi: str
    measured_at: str
    load_at_start: str           # other tenants of this VM share its 2 cores; see load_at_end

    def as_rows(self) -> list[tuple[str, str]]:
        return [*asdict(self).items(), ("load_at_end", load_average())]


def load_average() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def _cpu_model() -> str:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _memory_gib() -> float:
    with open("/proc/meminfo") as f:
        kib = int(next(l for l in f if l.startswith("MemTotal")).split()[1])
    return round(kib / (1 << 20), 1)


def _mpi_version() -> str:
    # Not through mpi4py: importing MPI here would make this process an MPI singleton, and
    # the mpirun it starts later would inherit its OMPI_* environment and fail silently.
    try:
        out = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout
    except FileNotFoundError:
        return "mpirun missing"
    return out.splitlines()[0].strip() if out else "unknown"


def describe(device: str, scheduler: str, emulation: str) -> TestbedRecord:
    return TestbedRecord(cpu=_cpu_model(), cores=os.cpu_count() or 0, memory_gib=_memory_gib(),
                         kernel=platform.release(), device=device, scheduler=scheduler, emulation=emulation,
                         mpi=_mpi_version(), measured_at=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                         load_at_start=load_average())


def record(disk: MountedDisk, queue: Sequence[QueueSetting] = ()) -> TestbedRecord:
    settings = ", ".join(f"{s.key}={s.value}" for s in queue)
    scheduler = f"{disk.scheduler} ({settings})" if settings else disk.scheduler
    return describe(f"{disk.loop_path} ({disk.device}), ext4", scheduler, disk.model.describe())
