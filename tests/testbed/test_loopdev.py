"""The testbed's loop devices: a scheduler selected afresh, not inherited with an earlier run's tunables."""

from testbed.loopdev import select_fresh_scheduler
from vnode_sync.kernel import disk_queue
from vnode_sync.kernel.devices import device_number
from vnode_sync.kernel.disk_queue import QueueSetting


def test_a_scheduler_selected_afresh_drops_the_tunables_an_earlier_run_left_on_the_device(bfq_disk):
    dev = device_number(bfq_disk)
    select_fresh_scheduler(dev, "bfq")
    default = disk_queue.read_settings(bfq_disk, ["iosched/max_budget"])
    disk_queue.apply(bfq_disk, [QueueSetting("iosched/max_budget", "65536")])
    select_fresh_scheduler(dev, "bfq")   # as the next run's disk does on the same loop device
    assert disk_queue.read_settings(bfq_disk, ["scheduler", "iosched/max_budget"]) == \
        [QueueSetting("scheduler", "bfq"), *default]
    select_fresh_scheduler(dev, "none")
    assert disk_queue.read_settings(bfq_disk, ["scheduler"]) == [QueueSetting("scheduler", "none")]
