"""A data disk's queue settings, all or nothing, on a real loop device (and the checks before any write)."""

import os
import subprocess
import sys

import pytest

from vnode_sync.errors import InvalidArgument, KernelError, NotFound
from vnode_sync.kernel import disk_queue
from vnode_sync.kernel.devices import device_number
from vnode_sync.kernel.disk_queue import QueueSetting

INTERACTIVE_BFQ = [QueueSetting("scheduler", "bfq"), QueueSetting("iosched/timeout_sync", "20"),   # docs/edge.md
                   QueueSetting("iosched/max_budget", "65536"), QueueSetting("iosched/strict_guarantees", "1"),
                   QueueSetting("max_sectors_kb", "512")]
KEYS = [s.key for s in INTERACTIVE_BFQ]


@pytest.fixture
def disk(bfq_disk):
    return bfq_disk


def test_bfq_settings_for_interactive_users_are_written_in_order_and_a_second_run_changes_nothing(disk):
    assert disk_queue.apply(disk, INTERACTIVE_BFQ) == KEYS
    held = {s.key: s.value for s in disk_queue.read_settings(disk, KEYS)}
    assert 20 <= int(held.pop("iosched/timeout_sync")) < 30   # BFQ keeps it in jiffies
    assert held == {"scheduler": "bfq", "iosched/max_budget": "65536", "iosched/strict_guarantees": "1",
                    "max_sectors_kb": "512"}
    assert disk_queue.apply(disk, INTERACTIVE_BFQ) == []


def test_a_setting_the_kernel_refuses_puts_back_those_already_written(disk):
    before = disk_queue.read_settings(disk, ["scheduler", "max_sectors_kb"])
    with pytest.raises(KernelError, match=r"read_ahead_kb.*nothing was changed"):
        disk_queue.apply(disk, [QueueSetting("scheduler", "bfq"), QueueSetting("max_sectors_kb", "512"),
                                QueueSetting("read_ahead_kb", "not-a-number")])
    assert disk_queue.read_settings(disk, ["scheduler", "max_sectors_kb"]) == before


def test_a_tunable_the_scheduler_lacks_is_refused_and_nothing_changes(disk):
    before = disk_queue.read_settings(disk, ["max_sectors_kb"])
    with pytest.raises(KernelError, match="no such setting"):
        disk_queue.apply(disk, [QueueSetting("max_sectors_kb", "256"), QueueSetting("iosched/timeout_sync", "10")])
    assert disk_queue.read_settings(disk, ["max_sectors_kb"]) == before


@pytest.mark.parametrize("text", ["scheduler", "../../../power/state=mem", "iosched/../../x=1",
                                  "max_sectors_kb=512;reboot", "max_sectors_kb=", "wbt_lat_usec=0"])
def test_a_setting_outside_the_queue_or_with_an_odd_value_is_refused_before_any_write(text):
    with pytest.raises(InvalidArgument, match="queue setting"):
        QueueSetting.parse(text)


def test_a_device_that_does_not_exist_is_named():
    with pytest.raises(NotFound, match="does not exist"):
        disk_queue.apply("/dev/vnode-sync-no-such-disk", INTERACTIVE_BFQ)


def test_the_command_says_what_changed_and_fails_in_one_line(disk):
    command = [sys.executable, "-m", "vnode_sync.kernel.disk_queue", f"--device={disk}"]
    done = subprocess.run([*command, "scheduler=bfq", "iosched/timeout_sync=10"], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, f"{disk}: changed scheduler iosched/timeout_sync\n"), done.stderr
    again = subprocess.run([*command, "scheduler=bfq", "iosched/timeout_sync=10"], capture_output=True, text=True)
    assert (again.returncode, again.stdout) == (0, f"{disk}: unchanged\n")
    bad = subprocess.run([*command, "--device=/dev/vnode-sync-no-such-disk", "scheduler=none"],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "does not exist" in bad.stderr, bad.stderr
    assert disk_queue.read_settings(disk, ["scheduler"]) == [QueueSetting("scheduler", "bfq")]


def test_a_refusal_on_one_disk_puts_back_the_disks_already_set(tmp_path):
    """Two real device nodes, their queues in a stand-in /sys: the second refuses its write."""
    disks = [d for d in ("/dev/loop0", "/dev/loop1") if os.path.exists(d)]
    if len(disks) < 2:
        pytest.skip("needs the block device nodes /dev/loop0 and /dev/loop1")
    for disk in disks:
        queue = tmp_path / "dev" / "block" / str(device_number(disk)) / "queue"
        queue.mkdir(parents=True)
        (queue / "scheduler").write_text("[mq-deadline] bfq none\n")
        (queue / "read_ahead_kb").write_text("128\n")
    refusing = tmp_path / "dev" / "block" / str(device_number(disks[1])) / "queue" / "read_ahead_kb"
    refusing.unlink()
    refusing.mkdir()   # writing it fails as the kernel's EINVAL would
    with pytest.raises(KernelError, match=f"{refusing}: .*nothing was changed"):
        disk_queue.apply_all(disks, [QueueSetting("scheduler", "bfq"), QueueSetting("read_ahead_kb", "64")],
                             sys_root=str(tmp_path))
    first = tmp_path / "dev" / "block" / str(device_number(disks[0])) / "queue"
    assert ((first / "scheduler").read_text(), (first / "read_ahead_kb").read_text()) == ("mq-deadline", "128")


@pytest.mark.parametrize("device", ["/dev/../etc/passwd", "/dev/sd\"b", "/etc/sdb", "/dev/sdb x"])
def test_a_device_path_that_could_leave_dev_or_a_udev_field_is_refused(device):
    with pytest.raises(InvalidArgument, match="expected a path under /dev"):
        disk_queue.queue_dir(device)
