"""Early background writeback (testbed/early_writeback.py): runs share the global setting, the last
live one restores it, and a crashed run's hold is released by `testbed.leftovers --remove`."""

import os

import pytest

from testbed import early_writeback, leftovers
from testbed.names import crashed_run_name, unique_name


@pytest.fixture
def vm(tmp_path):
    """A stand-in for /proc/sys/vm holding the kernel's defaults."""
    directory = tmp_path / "vm"
    directory.mkdir()
    (directory / "dirty_background_ratio").write_text("10\n")
    (directory / "dirty_background_bytes").write_text("0\n")
    return str(directory)


def settings(vm: str) -> dict[str, int]:
    return {s: int(open(os.path.join(vm, s)).read()) for s in early_writeback.SETTINGS}


def holders_dir(tmp_path) -> str:
    return str(tmp_path / "holders")


def test_the_last_live_holder_restores_what_the_first_found(tmp_path, vm):
    first = early_writeback.hold(unique_name("wb"), holders_dir(tmp_path), vm)
    second = early_writeback.hold(unique_name("wb"), holders_dir(tmp_path), vm)
    assert settings(vm)["dirty_background_bytes"] == early_writeback.EARLY_BACKGROUND_BYTES
    early_writeback.release(first, leftovers.holder_is_live, holders_dir(tmp_path), vm)
    assert settings(vm)["dirty_background_bytes"] == early_writeback.EARLY_BACKGROUND_BYTES  # second holds it
    early_writeback.release(second, leftovers.holder_is_live, holders_dir(tmp_path), vm)
    assert settings(vm)["dirty_background_ratio"] == 10
    assert early_writeback.holders(holders_dir(tmp_path)) == []


def test_a_hold_after_a_crashed_one_keeps_the_values_from_before_the_crash(tmp_path, vm):
    early_writeback.hold(crashed_run_name("wb"), holders_dir(tmp_path), vm)   # never released
    ours = early_writeback.hold(unique_name("wb"), holders_dir(tmp_path), vm)
    early_writeback.release(ours, leftovers.holder_is_live, holders_dir(tmp_path), vm)
    assert settings(vm)["dirty_background_ratio"] == 10   # the crashed holder is not live: restored


def test_leftovers_lists_a_crashed_runs_hold_and_removing_it_restores_the_setting(tmp_path, vm, monkeypatch):
    monkeypatch.setattr(early_writeback, "VM", vm)
    crashed = crashed_run_name("wb")
    early_writeback.hold(crashed, holders_dir(tmp_path))
    found = leftovers.find(crashed, hierarchies=(), tmp=str(tmp_path), writeback_dir=holders_dir(tmp_path))
    assert [(item.kind, item.live) for item in found] == [("early writeback", False)], found
    leftovers.remove(found)
    assert settings(vm)["dirty_background_ratio"] == 10
    assert early_writeback.holders(holders_dir(tmp_path)) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to write /proc/sys/vm")
def test_the_kernels_setting_is_early_while_held_and_as_before_after(tmp_path):
    before = settings(early_writeback.VM)
    holder = early_writeback.hold(unique_name("wb"), holders_dir(tmp_path))
    try:
        assert settings(early_writeback.VM)["dirty_background_bytes"] == early_writeback.EARLY_BACKGROUND_BYTES
    finally:
        early_writeback.release(holder, leftovers.holder_is_live, holders_dir(tmp_path))
    assert settings(early_writeback.VM) == before


def test_taking_an_hdfs_testbed_down_from_its_workdir_releases_its_disks_holds(tmp_path, vm, monkeypatch):
    from testbed.hdfs_cluster.cluster import take_down
    monkeypatch.setattr(early_writeback, "VM", vm)
    monkeypatch.setattr(early_writeback, "HOLDERS_DIR", holders_dir(tmp_path))
    workdir = tmp_path / unique_name("hdfs")
    workdir.mkdir()
    other = early_writeback.hold(unique_name("other"), holders_dir(tmp_path))
    for _ in range(2):   # one per DataNode's disk
        early_writeback.hold(workdir.name, holders_dir(tmp_path))
    found = take_down(str(workdir))
    assert len([f for f in found if f.startswith("early writeback")]) == 2, found
    assert early_writeback.holders(holders_dir(tmp_path)) == [os.path.basename(other)]
    assert settings(vm)["dirty_background_bytes"] == early_writeback.EARLY_BACKGROUND_BYTES   # `other` holds it
