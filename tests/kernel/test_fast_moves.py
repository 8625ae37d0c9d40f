"""favordynmods through a hierarchy of the agent's own: parsed from mountinfo, mounted, removed."""

import os
import platform

import pytest

from tests.conftest import WHY_NO_KERNEL, unique_name
from vnode_sync.errors import KernelError
from vnode_sync.kernel.fast_moves import FastMoves, favoured_by

MOUNTINFO = """\
30 25 0:26 / /sys/fs/cgroup/blkio rw,relatime shared:9 - cgroup cgroup rw,blkio
31 25 0:27 / /sys/fs/cgroup/unified rw,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate,favordynmods
32 25 0:28 / /mnt/tmp rw,relatime shared:11 - tmpfs favordynmods rw
"""


def _kernel_at_least(major: int, minor: int) -> bool:
    numbers = platform.release().split("-")[0].split(".")
    return (int(numbers[0]), int(numbers[1])) >= (major, minor)


WHY_NOT = WHY_NO_KERNEL or (None if _kernel_at_least(6, 0) else "favordynmods needs Linux >= 6.0")


def test_favoured_by_reads_super_options_of_cgroup_mounts_only(tmp_path):
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(MOUNTINFO)
    assert favoured_by(str(mountinfo)) == ["/sys/fs/cgroup/unified"]


def test_disable_without_enable_does_nothing(tmp_path):
    fast = FastMoves(str(tmp_path / "never-mounted"))
    fast.disable()
    assert not os.path.exists(tmp_path / "never-mounted")


@pytest.mark.skipif(WHY_NOT is not None, reason=WHY_NOT or "")
def test_enable_mounts_a_favordynmods_hierarchy_and_disable_removes_it():
    mountpoint = os.path.join("/run/vnode-sync", unique_name("fast-moves"))
    fast = FastMoves(mountpoint)
    try:
        how = fast.enable()
        assert mountpoint in how
        assert mountpoint in favoured_by()
    finally:
        fast.disable()
    assert mountpoint not in favoured_by()
    assert not os.path.exists(mountpoint)


@pytest.mark.skipif(WHY_NOT is not None, reason=WHY_NOT or "")
def test_two_agents_each_keep_their_own_mount_of_the_one_hierarchy():
    first = FastMoves(os.path.join("/run/vnode-sync", unique_name("fast-moves")))
    second = FastMoves(os.path.join("/run/vnode-sync", unique_name("fast-moves")))
    try:
        first.enable()
        second.enable()
        first.disable()
        assert second.mountpoint in favoured_by()  # the second agent's moves stay fast
    finally:
        first.disable()
        second.disable()


@pytest.mark.skipif(WHY_NOT is not None, reason=WHY_NOT or "")
def test_a_killed_agents_mount_is_reused_once_and_removed_by_a_new_instance():
    mountpoint = os.path.join("/run/vnode-sync", unique_name("fast-moves"))
    FastMoves(mountpoint).enable()          # the agent that was killed
    restarted = FastMoves(mountpoint)
    try:
        assert "still mounted" in restarted.enable()
        with open("/proc/self/mountinfo") as f:
            assert sum(line.split()[4] == mountpoint for line in f) == 1
    finally:
        restarted.disable()                 # what `vnode-agent --teardown` does
    assert mountpoint not in favoured_by() and not os.path.exists(mountpoint)


def test_a_refused_mount_is_one_kernel_error_and_leaves_no_directory(tmp_path, monkeypatch):
    import subprocess

    class Refused:
        returncode, stderr = 32, "mount: permission denied"

    monkeypatch.setattr(subprocess, "run", lambda *a, **k: Refused())
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(MOUNTINFO.replace("favordynmods", "rw"))
    fast = FastMoves(str(tmp_path / "mnt"), mountinfo_path=str(mountinfo))
    with pytest.raises(KernelError, match="favordynmods"):
        fast.enable()
    assert not os.path.exists(tmp_path / "mnt")


def test_a_mount_point_that_cannot_be_made_is_one_kernel_error(tmp_path):
    """As on a host whose /run is read-only: the agent logs it and runs without fast moves."""
    (tmp_path / "file").write_text("")
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(MOUNTINFO)
    fast = FastMoves(str(tmp_path / "file" / "fast-moves"), mountinfo_path=str(mountinfo))
    with pytest.raises(KernelError, match="cannot make the mount point"):
        fast.enable()
