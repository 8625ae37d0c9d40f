"""The one atomic, durable file writer: the new bytes or the old, the asked mode, the file and its
directory fsynced before it returns (the kill-at-every-syscall test is tests/crash/)."""

import os
import stat

import pytest

from vnode_sync import durable


def test_a_write_replaces_the_file_with_the_mode_asked_whatever_the_umask(tmp_path):
    path = tmp_path / "state"
    path.write_bytes(b"old")
    old_umask = os.umask(0o077)
    try:
        durable.write_atomically(str(path), b"new", mode=0o644)
    finally:
        os.umask(old_umask)
    assert path.read_bytes() == b"new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert os.listdir(tmp_path) == ["state"], "no temporary file is left"


def test_the_file_and_then_its_directory_are_fsynced_before_it_returns(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(durable.os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")),
                                                         real_fsync(fd)))
    renamed = []
    real_replace = os.replace
    monkeypatch.setattr(durable.os, "replace", lambda a, b: (renamed.append(len(synced)), real_replace(a, b)))
    durable.write_atomically(str(tmp_path / "spooled.json"), b"{}")
    assert len(synced) == 2 and renamed == [1], "file fsync, rename, directory fsync, in that order"
    assert synced[0].startswith(str(tmp_path / ".spooled.json.")) and synced[1] == str(tmp_path)


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    path.write_bytes(b"old")

    def no_space(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(durable.os, "fsync", no_space)
    with pytest.raises(OSError):
        durable.write_atomically(str(path), b"new")
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["cache"]
