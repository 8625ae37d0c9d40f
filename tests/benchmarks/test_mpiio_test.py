"""Smoke tests of the MPI-IO benchmark (benchmarks/mpi-io/; harness: benchmarks/mpiio/) with tiny
sizes, and of the emulated slow disk where the host allows it."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from benchmarks.mpiio.launch import PROGRAM
from testbed.loopdev import why_no_bfq
from testbed.sizes import parse_size


def _why_no_mpi() -> str | None:
    if not shutil.which("mpirun"):
        return "needs mpirun (Open MPI; scripts/setup.d/mpi.sh installs it)"
    probe = subprocess.run([sys.executable, "-c", "import mpi4py"], capture_output=True)
    if probe.returncode != 0:
        return "needs mpi4py in this venv (scripts/setup.d/mpi.sh installs it)"
    return None


WHY_NO_MPI = _why_no_mpi()
needs_mpi = pytest.mark.skipif(WHY_NO_MPI is not None, reason=WHY_NO_MPI or "")


def _why_no_slow_disk() -> str | None:
    if os.geteuid() != 0:
        return "needs root for loop devices and mounts"
    for tool in ("losetup", "mkfs.ext4"):
        if not shutil.which(tool):
            return f"needs {tool} (util-linux, e2fsprogs: scripts/setup.sh installs them)"
    if not os.path.exists("/dev/fuse"):
        return "needs /dev/fuse"
    return why_no_bfq()   # the emulated disk's scheduler


WHY_NO_SLOW_DISK = _why_no_slow_disk()


def run_benchmark(tmp_path, nprocs: int, *options: str) -> dict:
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-n", str(nprocs),
           sys.executable, PROGRAM, "--dir", str(tmp_path), *options]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return json.loads([line for line in proc.stdout.splitlines() if line.startswith("{")][-1])


def test_sizes_are_binary_units():
    assert parse_size("16K") == 16 << 10
    assert parse_size("16MiB") == 16 << 20
    assert parse_size("2G") == 2 << 30
    assert parse_size("4096") == 4096


@needs_mpi
@pytest.mark.parametrize("pattern,api", [("n-n", "posix"), ("n-1", "posix"), ("n-n", "mpiio"), ("n-1", "mpiio")])
def test_write_then_read_moves_every_byte(tmp_path, pattern, api):
    doc = run_benchmark(tmp_path, 2, "--pattern", pattern, "--api", api, "--ops", "write,read",
                        "--object-size", "16K", "--size-per-process", "64K")
    assert doc["nprocs"] == 2
    for phase in doc["phases"]:
        assert phase["total_bytes"] == 2 * (64 << 10), phase
        assert phase["aggregate_mbps"] > 0
        assert sorted(r["rank"] for r in phase["ranks"]) == [0, 1]
    expected = ["mpiio.0", "mpiio.1"] if pattern == "n-n" else ["mpiio.shared"]
    assert sorted(os.listdir(tmp_path)) == expected
    if pattern == "n-1":
        data = (tmp_path / "mpiio.shared").read_bytes()
        # Objects are strided by rank: object i of rank r sits at (i * nprocs + r) * size.
        assert data[0] == 1 and data[16 << 10] == 2


@needs_mpi
def test_stonewalled_read_wraps_until_the_deadline(tmp_path):
    doc = run_benchmark(tmp_path, 1, "--ops", "write,read", "--object-size", "16K",
                        "--size-per-process", "32K", "--stonewall", "0.3")
    read = next(p for p in doc["phases"] if p["op"] == "read")
    assert read["total_bytes"] > 32 << 10
    assert 0.25 < read["seconds"] < 5


@needs_mpi
def test_rejects_object_larger_than_the_data(tmp_path):
    cmd = [sys.executable, PROGRAM, "--dir", str(tmp_path),
           "--object-size", "16M", "--size-per-process", "1M"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "object size" in proc.stderr


@pytest.mark.skipif(WHY_NO_SLOW_DISK is not None, reason=WHY_NO_SLOW_DISK or "")
def test_emulated_disk_reads_at_its_modelled_rate():
    from benchmarks.mpiio.slow_disk import SpindleSettings, emulated_disk
    with emulated_disk(f"vnode-sync-bench.mpiio.{os.getpid()}.test", SpindleSettings(rate_mbps=40, size_mib=256)) as disk:
        path = os.path.join(disk.mountpoint, "f")
        subprocess.run(["dd", "if=/dev/zero", f"of={path}", "bs=1M", "count=24", "oflag=direct"],
                       check=True, capture_output=True)
        out = subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=1M", "iflag=direct"],
                             check=True, capture_output=True, text=True).stderr
        seconds = float(out.strip().splitlines()[-1].split(" copied, ")[1].split(" s")[0])
        mbps = (24 << 20) / seconds / 1e6
        assert disk.scheduler == "bfq"
        # Never faster than the model; per-request overhead costs some (about 20 % at 1 MiB).
        assert 20 < mbps <= 42, mbps
    assert not os.path.exists(disk.mountpoint)


def test_the_experiments_take_the_disks_queue_settings_and_name_them_in_the_record(capsys):
    from benchmarks.mpiio.experiment import common_options
    from benchmarks.mpiio.machine import record
    from benchmarks.mpiio.slow_disk import MountedDisk, SpindleSettings
    from vnode_sync.kernel.disk_queue import QueueSetting
    parser = common_options("an experiment")
    args = parser.parse_args(["--queue", "iosched/timeout_sync=20", "--queue", "max_sectors_kb=512"])
    assert args.queue == [QueueSetting("iosched/timeout_sync", "20"), QueueSetting("max_sectors_kb", "512")]
    disk = MountedDisk("/dev/loop9", 7, 9, "/tmp/nowhere", "bfq", SpindleSettings())
    assert record(disk, args.queue).scheduler == "bfq (iosched/timeout_sync=20, max_sectors_kb=512)"
    assert record(disk).scheduler == "bfq"
    with pytest.raises(SystemExit) as refused:
        parser.parse_args(["--queue", "iosched/../../x=1"])
    assert refused.value.code == 2 and "queue setting" in capsys.readouterr().err


def test_the_experiments_vnodes_weigh_and_cap_the_disk_hold_a_process_and_leave_nothing(bfq_disk):
    """The figures' VNodes on the real blkio hierarchy (bfq_disk skips, saying why, where there is none)."""
    from benchmarks.mpiio.bench_vnodes import VNodeSpec, bench_vnodes
    from vnode_sync.kernel import disk_queue
    from vnode_sync.kernel.devices import device_number
    disk_queue.apply(bfq_disk, [disk_queue.QueueSetting("scheduler", "bfq")])
    device = device_number(bfq_disk)
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        with bench_vnodes() as vnodes:
            root = os.path.join("/sys/fs/cgroup/blkio", vnodes.root_name)
            assert vnodes.configure(device, [VNodeSpec("vnode.bench0", read_bps=10_000_000, weight=500)]) == \
                ["vnode.bench0"]
            group = os.path.join(root, "vnode.bench0")
            assert f"{device} 10000000" in open(os.path.join(group, "blkio.throttle.read_bps_device")).read()
            assert f"{device} 500" in open(os.path.join(group, "blkio.bfq.weight_device")).read()
            assert vnodes.place_process("vnode.bench0", sleeper.pid) == 1
            assert str(sleeper.pid) in open(os.path.join(group, "tasks")).read().split()
            sleeper.kill()
            sleeper.wait()
        assert not os.path.exists(root)
    finally:
        sleeper.kill()
        sleeper.wait()
