"""zram disks for the testbed: a real block device in RAM, removed again, also from a marker alone."""

import os
import subprocess

import pytest

from tests.conftest import WHY_NO_KERNEL, unique_name
from vnode_sync.kernel.devices import device_number
from testbed.zramdev import CONTROL, ZramDisk, remove_marked

WHY_NOT = WHY_NO_KERNEL or (None if os.path.isdir(CONTROL) else "needs the zram module (zram-control)")
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=WHY_NOT or "")


def test_a_zram_disk_is_a_mounted_block_device_until_removed(tmp_path):
    workdir = tmp_path / unique_name("zram")
    workdir.mkdir()
    disk = ZramDisk.create(str(workdir / "disk.zram"), str(workdir / "mnt"), 64)
    try:
        assert device_number(disk.device) == disk.device_number
        (workdir / "mnt" / "f").write_bytes(b"x" * 4096)
        with open("/proc/mounts") as f:
            assert any(line.split()[:2] == [disk.device, str(workdir / "mnt")] for line in f)
    finally:
        disk.remove()
    assert not os.path.exists(f"/sys/block/{os.path.basename(disk.device)}")
    assert not (workdir / "disk.zram").exists()


def test_the_marker_alone_removes_a_crashed_runs_device(tmp_path):
    disk = ZramDisk.create(str(tmp_path / "disk.zram"), str(tmp_path / "mnt"), 64)
    subprocess.run(["umount", str(tmp_path / "mnt")], check=True)  # cleanup undoes mounts first
    remove_marked(str(tmp_path / "disk.zram"))
    assert not os.path.exists(f"/sys/block/{os.path.basename(disk.device)}")
