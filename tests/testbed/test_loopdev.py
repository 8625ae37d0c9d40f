"""The testbed's loop devices: a scheduler selected afresh, not inherited with an earlier run's tunables;
ext4 mounted with the options asked for, and nothing else."""

import os
import tempfile

import pytest

from tests.conftest import needs_kernel, unique_name
from testbed.loopdev import LoopDisk, check_ext4_options, queue_settings, select_fresh_scheduler
from vnode_sync.errors import InvalidArgument
from vnode_sync.kernel import disk_queue
from vnode_sync.kernel.devices import device_number
from vnode_sync.kernel.disk_queue import QueueSetting


def test_a_scheduler_selected_afresh_drops_the_tunables_an_earlier_run_left_on_the_device(bfq_disk):
    dev = device_number(bfq_disk)
    select_fresh_scheduler(dev, "bfq")
    default = disk_queue.read_settings(bfq_disk, ["iosched/max_budget"])
    kernels_size = disk_queue.read_settings(bfq_disk, ["max_sectors_kb"])
    disk_queue.apply(bfq_disk, [QueueSetting("iosched/max_budget", "65536"), QueueSetting("max_sectors_kb", "64")])
    select_fresh_scheduler(dev, "bfq")   # as the next run's disk does on the same loop device
    assert disk_queue.read_settings(bfq_disk, ["scheduler", "iosched/max_budget", "max_sectors_kb"]) == \
        [QueueSetting("scheduler", "bfq"), *default, *kernels_size]
    select_fresh_scheduler(dev, "none")
    assert disk_queue.read_settings(bfq_disk, ["scheduler"]) == [QueueSetting("scheduler", "none")]


def test_a_runs_queue_settings_are_put_back_after_it(bfq_disk):
    before = disk_queue.read_settings(bfq_disk, ["max_sectors_kb", "read_ahead_kb"])
    with queue_settings(bfq_disk, {"max_sectors_kb": "64", "read_ahead_kb": "512"}):
        assert disk_queue.read_settings(bfq_disk, ["max_sectors_kb", "read_ahead_kb"]) == \
            [QueueSetting("max_sectors_kb", "64"), QueueSetting("read_ahead_kb", "512")]
    assert disk_queue.read_settings(bfq_disk, ["max_sectors_kb", "read_ahead_kb"]) == before


@pytest.mark.parametrize("option", ["noatime,nodelalloc", "data=writeback ro", "commit=5;reboot", "Nodelalloc", ""])
def test_an_ext4_option_that_is_not_one_plain_name_or_name_value_is_refused(option):
    with pytest.raises(InvalidArgument, match="ext4 mount option"):
        check_ext4_options((option,))


@needs_kernel
def test_a_loop_disk_is_mounted_with_the_ext4_options_asked_for():
    directory = tempfile.mkdtemp(prefix=unique_name("ext4opts") + ".")
    disk = LoopDisk.create(os.path.join(directory, "disk.img"), os.path.join(directory, "mnt"), 256,
                           ext4_options=("nodelalloc", "commit=30"))
    try:
        with open("/proc/self/mounts") as f:
            options = next(line.split()[3] for line in f if line.split()[1] == disk.mountpoint).split(",")
        assert {"noatime", "nodelalloc", "commit=30"} <= set(options)
    finally:
        disk.remove()
        os.rmdir(os.path.join(directory, "mnt"))
        os.rmdir(directory)
