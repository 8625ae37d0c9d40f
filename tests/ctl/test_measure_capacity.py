"""`vnodectl measure-capacity`: the rates it measures (direct reads of the device, direct writes of a
file it removes), its dry run and --apply through a real coordinator, and a paced disk at 60 MB/s
measured within 10 %."""

import os
import subprocess
import sys

import pytest

from tests.conftest import COORDINATOR_CONFIG, needs_fuse, served_coordinator, unique_name
from tests.ctl.test_vnodectl import vnodectl
from vnode_sync.errors import NotFound
from vnode_sync.kernel.disk_rate import WRITE_PREFIX, MeasureFailed, mount_point, read_rate, write_rate
from vnode_sync.kernel.types import DeviceNumber

MB = 1_000_000


def test_a_write_is_timed_through_its_fdatasync_and_its_file_removed(tmp_path):
    rate = write_rate(str(tmp_path), seconds=0.3)
    assert rate.bytes > 0 and rate.seconds >= 0.3 and rate.bps > 0
    assert os.listdir(tmp_path) == [], "the test file is gone"


def test_direct_reads_of_a_file_end_at_its_end(tmp_path):
    path = tmp_path / "image"
    path.write_bytes(os.urandom(8 << 20))
    rate = read_rate(str(path), seconds=5)
    assert rate.bytes <= 8 << 20 and rate.seconds < 5, "stopped at the end, not after 5 s"


def test_what_cannot_be_measured_is_said_in_one_line(tmp_path):
    with pytest.raises(MeasureFailed, match="cannot open /nonexistent for direct reads"):
        read_rate("/nonexistent", 1)
    with pytest.raises(MeasureFailed, match=f"in {tmp_path}/gone"):
        write_rate(str(tmp_path / "gone"), 1)


def test_a_devices_mount_point_comes_from_mountinfo(tmp_path):
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text("22 1 252:1 / / rw - ext4 /dev/vda1 rw\n"
                         "90 22 7:3 / /data/disk\\0401 rw - ext4 /dev/loop3 rw\n")
    assert mount_point(DeviceNumber(7, 3), str(mountinfo)) == "/data/disk 1"
    with pytest.raises(NotFound, match="no file system of device 7:4 is mounted"):
        mount_point(DeviceNumber(7, 4), str(mountinfo))


@pytest.mark.parametrize("args,message,code", [
    (("measure-capacity", "dn9"), "unknown storage node 'dn9' (the coordinator lists: dn1)", 3),
    (("measure-capacity", "dn1", "--device", "/dev/sdz"), "has no device '/dev/sdz'", 3),
    (("measure-capacity", "dn1", "--seconds", "0"), "allowed 0.5 to 600 seconds", 2),
    (("measure-capacity", "dn1", "--write-dir", "/tmp"), "use DEVICE=DIR", 2),
])
def test_bad_measure_input_is_one_line_and_measures_nothing(coordinator, args, message, code):
    cluster, _, port = coordinator
    generation = cluster.generation()
    result = vnodectl(port, *args)
    assert (result.returncode, result.stdout) == (code, ""), result.stderr
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert cluster.generation() == generation


@needs_fuse
def test_a_paced_disk_at_60_mb_s_is_measured_within_ten_percent_and_applied(tmp_path):
    """Holds the heavy lock (a timing): run it with `flock /tmp/vnode-heavy.lock`."""
    from testbed.paced_disk import DiskModel, PacedDisk

    directory = tmp_path / unique_name("capacity")
    directory.mkdir()
    disk = PacedDisk.create(str(directory), str(directory / "mnt"), size_mb=512, model=DiskModel.streaming(60))
    config = {**COORDINATOR_CONFIG, "storage_nodes": [
        {"id": "dn1", "devices": [{"name": disk.device, "read_bps": 500 * MB, "write_bps": 500 * MB}]}]}
    try:
        with served_coordinator(config, tmp_path) as (cluster, _, port):
            dry = vnodectl(port, "measure-capacity", "dn1", "--seconds", "1")
            assert dry.returncode == 0, dry.stderr
            assert "dry run: nothing set" in dry.stdout
            assert cluster.config.storage_nodes[0].devices[0].read_bps == 500 * MB
            applied = subprocess.run([sys.executable, "-m", "vnode_sync.ctl.main", "--coordinator",
                                      f"127.0.0.1:{port}", "measure-capacity", "dn1", "--apply"],
                                     capture_output=True, text=True, timeout=60)
            assert applied.returncode == 0, applied.stderr
            print(applied.stdout)
            measured = cluster.config.storage_nodes[0].devices[0]
        assert [n for n in os.listdir(directory / "mnt") if n.startswith(WRITE_PREFIX)] == []
    finally:
        disk.remove()
    assert measured.read_bps == pytest.approx(60 * MB, rel=0.1)
    assert measured.write_bps == pytest.approx(60 * MB, rel=0.1)
