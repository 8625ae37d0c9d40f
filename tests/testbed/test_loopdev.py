"""The testbed's loop devices: a scheduler selected afresh, not inherited with an earlier run's tunables."""

from testbed.loopdev import queue_settings, select_fresh_scheduler
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
