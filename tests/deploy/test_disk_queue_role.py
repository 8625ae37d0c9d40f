"""The storage role's data-disk queue settings, run by ansible-playbook against a real loop device: set
now, all or nothing, kept by a udev rule that udev itself runs (`udevadm test`), a second run
changes nothing, and a typo changes nothing at all; the DataNode's set is then what the storage
agent's check (required_disk_settings) finds in force."""

import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.conftest import needs_kernel, unique_name
from tests.deploy.test_ansible import ANSIBLE_DIR, WHY_NO_ANSIBLE, recap
from testbed.loopdev import loop_device
from vnode_sync.kernel import disk_queue, required_disk_settings

pytestmark = [needs_kernel, pytest.mark.skipif(WHY_NO_ANSIBLE is not None, reason=WHY_NO_ANSIBLE or "")]

INTERACTIVE_BFQ = ["scheduler=bfq", "iosched/timeout_sync=20", "iosched/max_budget=65536",   # docs/edge.md
                   "iosched/strict_guarantees=1", "max_sectors_kb=512"]
# The DataNode dispatcher's set (vnode_datanode_interactive_disk_queue): no scheduler of its own, so any disk.
INTERACTIVE_DATANODE = ["read_ahead_kb=512", "max_sectors_kb=256", "nr_requests=4"]
ROLE = os.path.join(ANSIBLE_DIR, "roles", "vnode_storage_agent")
TASKS = os.path.join(ROLE, "tasks", "disk_queue.yml")


def run_role(tmp_path, device: str, settings: list[str], rule: str) -> subprocess.CompletedProcess:
    """Only the role's disk_queue tasks (the role's other steps need a coordinator). Outside its role
    a task file finds templates beside the playbook: the role's own is linked there."""
    templates = tmp_path / "templates"
    if not templates.exists():
        templates.mkdir()
        (templates / "data-disks.rules.j2").symlink_to(os.path.join(ROLE, "templates", "data-disks.rules.j2"))
    playbook = tmp_path / "disk-queue.yml"
    playbook.write_text(yaml.safe_dump([{
        "hosts": "localhost", "connection": "local", "gather_facts": False,
        "vars": {"vnode_common_venv": sys.prefix, "vnode_storage_agent_devices": [device],
                 "vnode_storage_agent_disk_queue": settings, "vnode_storage_agent_udev_rule": rule},
        "tasks": [{"ansible.builtin.include_tasks": TASKS}]}]))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="false", LC_ALL="C.UTF-8",
               ANSIBLE_RETRY_FILES_ENABLED="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(["ansible-playbook", "-i", "localhost,", str(playbook)], capture_output=True, text=True,
                          timeout=300, env=env, cwd=str(tmp_path))


@pytest.fixture
def disk(bfq_disk):
    return bfq_disk


def test_the_datanodes_queue_set_by_the_role_is_what_the_agent_then_finds_and_a_rerun_changes_nothing(tmp_path):
    rule = str(tmp_path / "61-vnode-sync-data-disks.rules")
    keys = [s.split("=")[0] for s in INTERACTIVE_DATANODE]
    with loop_device(unique_name("diskq")) as (path, device):
        before = disk_queue.read_settings(path, keys)
        required = [required_disk_settings.parse(s) for s in INTERACTIVE_DATANODE]
        try:
            assert required_disk_settings.unmet({path: device}, required) != [], "a fresh disk lacks them"
            first = run_role(tmp_path, path, INTERACTIVE_DATANODE, rule)
            assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]
            assert [f"{s.key}={s.value}" for s in disk_queue.read_settings(path, keys)] == INTERACTIVE_DATANODE
            assert required_disk_settings.unmet({path: device}, required) == []
            second = run_role(tmp_path, path, INTERACTIVE_DATANODE, rule)
            assert second.returncode == 0 and recap(second.stdout)["changed"] == 0, second.stdout[-3000:]
        finally:
            disk_queue.apply(path, before)


def test_the_storage_role_sets_the_disks_queue_now_and_by_udev_and_a_rerun_changes_nothing(tmp_path, disk):
    rule = str(tmp_path / "61-vnode-sync-data-disks.rules")
    first = run_role(tmp_path, disk, INTERACTIVE_BFQ, rule)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]
    held = {s.key: s.value for s in disk_queue.read_settings(disk, [s.split("=")[0] for s in INTERACTIVE_BFQ])}
    assert 20 <= int(held.pop("iosched/timeout_sync")) < 30   # BFQ keeps it in jiffies
    assert held == {"scheduler": "bfq", "iosched/max_budget": "65536", "iosched/strict_guarantees": "1",
                    "max_sectors_kb": "512"}
    lines = [line for line in open(rule).read().splitlines() if line and not line.startswith("#")]
    name = os.path.basename(disk)
    assert lines == [f'ACTION=="add|change", SUBSYSTEM=="block", ENV{{DEVTYPE}}=="disk", KERNEL=="{name}", '
                     'ATTR{queue/scheduler}="bfq", ATTR{queue/iosched/timeout_sync}="20", '
                     'ATTR{queue/iosched/max_budget}="65536", ATTR{queue/iosched/strict_guarantees}="1", '
                     'ATTR{queue/max_sectors_kb}="512"'], lines

    second = run_role(tmp_path, disk, INTERACTIVE_BFQ, rule)
    assert second.returncode == 0, second.stdout[-3000:]
    assert recap(second.stdout)["changed"] == 0, second.stdout[-3000:]


def test_udev_reads_the_rule_and_writes_each_setting_in_order(tmp_path, disk):
    """udevadm test runs the host's rules for the disk as a change event would (its ATTR writes too,
    without a udev daemon): ours is put among them for the run."""
    if not shutil.which("udevadm"):
        pytest.skip("needs udevadm (systemd's udev) to check the rule")
    rule = f"/etc/udev/rules.d/61-{unique_name('diskq-role')}.rules"
    try:
        done = run_role(tmp_path, disk, INTERACTIVE_BFQ, rule)
        assert done.returncode == 0, done.stdout[-3000:]
        sysfs = os.path.realpath(f"/sys/class/block/{os.path.basename(disk)}")
        test = subprocess.run(["udevadm", "test", "--action=change", sysfs], capture_output=True, text=True,
                              timeout=60)
    finally:
        if os.path.exists(rule):
            os.unlink(rule)
    output = test.stdout + test.stderr
    assert os.path.basename(rule) in output, output[-3000:]
    assert "invalid" not in "\n".join(line.lower() for line in output.splitlines() if rule in line), output[-3000:]
    written = re.findall(r"ATTR '" + re.escape(sysfs) + r"/queue/([\w/]+)' writing '(\w+)'", output)
    assert written == [tuple(s.split("=")) for s in INTERACTIVE_BFQ], output[-3000:]


def test_a_typo_in_the_settings_fails_the_play_and_changes_nothing(tmp_path, disk):
    before = disk_queue.read_settings(disk, ["scheduler", "max_sectors_kb"])
    rule = str(tmp_path / "61-vnode-sync-data-disks.rules")
    done = run_role(tmp_path, disk, ["scheduler=bfq", "iosched/timeout_synk=10", "max_sectors_kb=512"], rule)
    assert done.returncode != 0
    assert "iosched/timeout_synk: no such setting" in done.stdout, done.stdout[-3000:]
    assert disk_queue.read_settings(disk, ["scheduler", "max_sectors_kb"]) == before
    assert not os.path.exists(rule)
