"""The disk settings a site requires, read back from a faithful fake sysfs and mountinfo, and from this
host's own mountinfo: each one missing is one line naming the disk, the setting and both values."""

import os
import subprocess

import pytest

from tests.conftest import needs_kernel, unique_name
from testbed.loopdev import loop_device
from vnode_sync.errors import InvalidArgument
from vnode_sync.kernel.disk_queue import QueueSetting, read_setting
from vnode_sync.kernel.required_disk_settings import MountOption, disk_of, mounts, parse, unmet
from vnode_sync.kernel.types import DeviceNumber

SDB, SDB1, SDC = DeviceNumber(8, 16), DeviceNumber(8, 17), DeviceNumber(8, 32)
INTERACTIVE = [parse(t) for t in ("scheduler=none", "read_ahead_kb=512", "nr_requests=4", "mount_option=nodelalloc")]


def fake_host(tmp_path, sdb_queue: dict[str, str], sdc_queue: dict[str, str], mountinfo: str):
    """sysfs as the kernel lays it out (/sys/dev/block/MAJ:MIN links into /sys/devices, a partition's
    directory inside its disk's) and /proc/self/mountinfo."""
    sys_root, proc_root = tmp_path / "sys", tmp_path / "proc"
    for name, device, queue in (("sdb", SDB, sdb_queue), ("sdc", SDC, sdc_queue)):
        disk = sys_root / "devices" / "pci0000:00" / "block" / name
        (disk / "queue").mkdir(parents=True)
        (disk / "dev").write_text(f"{device}\n")
        for key, value in queue.items():
            (disk / "queue" / key).write_text(value + "\n")
        (sys_root / "dev" / "block").mkdir(parents=True, exist_ok=True)
        os.symlink(disk, sys_root / "dev" / "block" / str(device))
    partition = sys_root / "devices" / "pci0000:00" / "block" / "sdb" / "sdb1"
    partition.mkdir()
    (partition / "dev").write_text(f"{SDB1}\n")
    (partition / "partition").write_text("1\n")
    os.symlink(partition, sys_root / "dev" / "block" / str(SDB1))
    (proc_root / "self").mkdir(parents=True)
    (proc_root / "self" / "mountinfo").write_text(mountinfo)
    return str(proc_root), str(sys_root)


MOUNTINFO = ("22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw,errors=remount-ro\n"
             "40 22 8:17 / /data/disk\\0401 rw,relatime shared:20 - ext4 /dev/sdb1 rw\n"
             "41 22 8:32 / /data/2 rw,noatime - ext4 /dev/sdc rw,nodelalloc\n")


def test_each_required_setting_a_disk_lacks_is_one_line_naming_disk_setting_and_both_values(tmp_path):
    proc_root, sys_root = fake_host(tmp_path, {"scheduler": "[mq-deadline] kyber none", "read_ahead_kb": "128",
                                               "nr_requests": "64"},
                                    {"scheduler": "mq-deadline kyber [none]", "read_ahead_kb": "512",
                                     "nr_requests": "4"}, MOUNTINFO)
    assert unmet({"/dev/sdb": SDB, "/dev/sdc": SDC}, INTERACTIVE, proc_root, sys_root) == [
        "disk queue: /dev/sdb queue/scheduler is mq-deadline, required none (docs/edge.md section 6)",
        "disk queue: /dev/sdb queue/read_ahead_kb is 128, required 512 (docs/edge.md section 6)",
        "disk queue: /dev/sdb queue/nr_requests is 64, required 4 (docs/edge.md section 6)",
        "mount option: /data/disk 1 (/dev/sdb, ext4) is mounted without nodelalloc, required (docs/edge.md section 6)",
    ]


def test_a_host_with_every_setting_is_not_degraded_and_nothing_is_asked_of_one_that_requires_none(tmp_path):
    queue = {"scheduler": "mq-deadline kyber [none]", "read_ahead_kb": "512", "nr_requests": "4"}
    proc_root, sys_root = fake_host(tmp_path, queue, queue, MOUNTINFO.replace("/dev/sdb1 rw", "/dev/sdb1 rw,nodelalloc"))
    assert unmet({"/dev/sdb": SDB, "/dev/sdc": SDC}, INTERACTIVE, proc_root, sys_root) == []
    assert unmet({"/dev/sdb": SDB}, [], "/nonexistent", "/nonexistent") == []


def test_a_disk_with_no_file_system_mounted_or_a_queue_file_missing_says_what_could_not_be_checked(tmp_path):
    proc_root, sys_root = fake_host(tmp_path, {"nr_requests": "4"}, {}, MOUNTINFO.replace("8:32", "9:0"))
    assert unmet({"/dev/sdc": SDC}, [QueueSetting("read_ahead_kb", "512"), MountOption("nodelalloc")],
                 proc_root, sys_root) == [
        "disk queue: /dev/sdc queue/read_ahead_kb cannot be read (No such file or directory); required 512 "
        "(docs/edge.md section 6)",
        "mount option: no file system of /dev/sdc is mounted here, so nodelalloc cannot be checked "
        "(docs/edge.md section 6)"]


def test_a_partition_is_found_on_its_disk(tmp_path):
    _, sys_root = fake_host(tmp_path, {}, {}, "")
    assert disk_of(SDB1, sys_root) == SDB and disk_of(SDC, sys_root) == SDC


@pytest.mark.parametrize("text", ["mount_option=", "mount_option=no delalloc", "nr_requests", "wbt_lat_usec=0",
                                  "../../power/state=mem"])
def test_a_setting_that_is_neither_a_queue_file_nor_a_mount_option_is_refused(text):
    with pytest.raises(InvalidArgument):
        parse(text)


def test_this_hosts_own_mountinfo_is_read_with_each_mounts_device_number():
    root = next(m for m in mounts() if m.mountpoint == "/")
    st = os.stat("/")
    assert root.device == DeviceNumber(os.major(st.st_dev), os.minor(st.st_dev))
    assert "rw" in root.options or "ro" in root.options


@needs_kernel
def test_a_real_loop_disk_is_read_back_and_its_ext4_mount_with_and_without_nodelalloc(tmp_path):
    mountpoint = tmp_path / "data"
    mountpoint.mkdir()
    with loop_device(unique_name("reqdisk"), size_mb=64) as (path, device):
        queue = f"/sys/dev/block/{device}/queue"
        ahead, requests = read_setting(queue, "read_ahead_kb"), read_setting(queue, "nr_requests")
        other = "4" if requests != "4" else "8"
        subprocess.run(["mkfs.ext4", "-q", "-F", path], check=True, capture_output=True)
        required = [QueueSetting("read_ahead_kb", ahead), QueueSetting("nr_requests", other), MountOption("nodelalloc")]
        subprocess.run(["mount", "-o", "nodelalloc", path, str(mountpoint)], check=True, capture_output=True)
        try:
            assert unmet({path: device}, required) == [
                f"disk queue: {path} queue/nr_requests is {requests}, required {other} (docs/edge.md section 6)"]
            subprocess.run(["mount", "-o", "remount,delalloc", str(mountpoint)], check=True, capture_output=True)
            assert unmet({path: device}, required)[1:] == [
                f"mount option: {mountpoint} ({path}, ext4) is mounted without nodelalloc, required "
                "(docs/edge.md section 6)"]
        finally:
            subprocess.run(["umount", str(mountpoint)], capture_output=True)
