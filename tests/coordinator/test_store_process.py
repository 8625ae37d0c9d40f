"""The state store as real coordinator processes: one coordinator per state file; an empty or
damaged database stops it with one line and changes nothing; init/backup/restore; a full disk
reaches vnodectl as UNAVAILABLE (exit 4) and changes nothing."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import needs_kernel, unique_name
from tests.conftest import write_coordinator_config as write_config
from testbed.processes import start_coordinator as start
from testbed.processes import stop_process
from vnode_sync.coordinator.state.store import StateStore


def coordinator(config: str, *args, timeout=20) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vnode_sync.coordinator.main", "--config", config, *args],
                          capture_output=True, text=True, timeout=timeout)


def vnodectl(port: int, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vnode_sync.ctl.main", "--coordinator", f"127.0.0.1:{port}", "--insecure", *args],
                          capture_output=True, text=True, timeout=30)


def one_line(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_a_second_coordinator_on_the_same_state_file_refuses(tmp_path):
    config = write_config(tmp_path)
    first, _ = start(config, tmp_path / "first.log")
    try:
        second = coordinator(config, "--listen", "127.0.0.1:0")
        assert second.returncode == 2
        assert "is in use by another coordinator" in one_line(second)
        assert f"pid {first.pid}" in second.stderr
    finally:
        stop_process(first)


@pytest.mark.parametrize("damage,message", [
    (lambda p: open(p, "wb").close(), "is empty"),
    (lambda p: open(p, "wb").write(b"this is not SQLite at all" * 100), "damaged or unreadable"),
])
def test_an_empty_or_damaged_database_stops_the_coordinator_in_one_line_and_changes_nothing(tmp_path, damage, message):
    config = write_config(tmp_path)
    state = tmp_path / "state.sqlite"
    damage(state)
    before = state.read_bytes()
    result = coordinator(config)
    assert result.returncode == 2
    line = one_line(result)
    assert message in line and "restore" in line and "init" in line
    assert state.read_bytes() == before, "nothing is reseeded or rewritten"
    assert not os.path.exists(f"{state}-wal")


def test_init_backup_restore_round_trip_and_a_restored_store_keeps_its_identity(tmp_path):
    config = write_config(tmp_path)
    state, backup = tmp_path / "state.sqlite", tmp_path / "backup.sqlite"
    assert coordinator(config, "init").returncode == 0
    store = StateStore(str(state))
    identity, generation = store.store_id(), store.generation()
    assert {u.name for u in store.users()} == {"alice", "bob"}
    store.set_priority("alice", 9)
    store.close()
    assert coordinator(config, "backup", str(backup)).returncode == 0
    refused = coordinator(config, "init")
    assert refused.returncode == 2 and "exists" in one_line(refused)
    state.write_bytes(b"")
    assert coordinator(config, "restore", str(backup)).returncode == 0
    store = StateStore(str(state))
    assert store.store_id() == identity and store.generation() == generation + 1
    assert store.user("alice").priority == 9
    store.close()
    reinit = coordinator(config, "init", "--force")
    assert reinit.returncode == 0
    store = StateStore(str(state))
    assert store.store_id() != identity, "a new store has a new identity"
    store.close()


def test_the_yaml_seeds_only_a_new_store(tmp_path):
    config = write_config(tmp_path)
    assert coordinator(config, "init").returncode == 0
    store = StateStore(str(tmp_path / "state.sqlite"))
    store.remove_user("bob")
    store.close()
    process, port = start(config, tmp_path / "c.log")
    try:
        listed = vnodectl(port, "users")
        assert "alice" in listed.stdout and "bob" not in listed.stdout
    finally:
        stop_process(process)


@needs_kernel
def test_disk_full_reaches_vnodectl_as_unavailable_and_changes_nothing(tmp_path):
    state_dir = tmp_path / unique_name("full")
    state_dir.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,nr_inodes=1000", "tmpfs", str(state_dir)], check=True)
    try:
        state = str(state_dir / "state.sqlite")
        config = write_config(tmp_path, state_path=state)
        process, port = start(config, tmp_path / "c.log")
        try:
            assert vnodectl(port, "set-priority", "alice", "7").returncode == 0
            filler = state_dir / "filler"
            try:  # fill every free block of the tmpfs
                with open(filler, "wb") as f:
                    while True:
                        f.write(b"\0" * 4096)
                        f.flush()
            except OSError:
                pass
            alice = 7
            big = vnodectl(port, "add-user", "carol", "--uid", "2001", "--priority", "3")
            carol = big.returncode == 0
            for i in range(40):  # the WAL may hold a few pages; keep writing until the disk says no
                if big.returncode != 0:
                    break
                big = vnodectl(port, "set-priority", "alice", str(2 + (i % 5)))
                if big.returncode == 0:
                    alice = 2 + (i % 5)
            assert big.returncode == 4, big.stderr
            line = one_line(big)
            assert "state store" in line and "nothing was changed" in line
            os.remove(filler)
            listed = vnodectl(port, "users", "--json")
            assert listed.returncode == 0
            users = {u["name"]: u["priority"] for u in json.loads(listed.stdout)["users"]}
            assert users["alice"] == alice, "the refused change left the last written priority"
            assert ("carol" in users) == carol
            assert process.poll() is None, "the coordinator keeps serving"
            assert vnodectl(port, "set-priority", "bob", "5").returncode == 0, "space back: writes work again"
        finally:
            stop_process(process)
    finally:
        subprocess.run(["umount", str(state_dir)], check=False)
        shutil.rmtree(state_dir, ignore_errors=True)
