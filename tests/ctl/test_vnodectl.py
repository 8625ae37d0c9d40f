"""vnodectl as an admin runs it: real process, real coordinator over gRPC."""

import json
import os
import subprocess
import sys

import pytest


def vnodectl(port, *args, env=None):
    return subprocess.run([sys.executable, "-m", "vnode_sync.ctl.main", "--coordinator", f"127.0.0.1:{port}",
                           *args], capture_output=True, text=True, timeout=30, env=env)


def test_set_priority_then_status_json(coordinator):
    cluster, _, port = coordinator
    result = vnodectl(port, "set-priority", "alice", "8")
    assert result.returncode == 0, result.stderr
    status = json.loads(vnodectl(port, "status", "--json").stdout)
    alice = next(u for u in status["users"] if u["name"] == "alice")
    assert alice["priority"] == 8
    assert alice["nodes"] == [{"node_id": "dn1", "target_read_bps": 30_000_000, "target_write_bps": 15_000_000,
                               "measured_read_bps": 0.0, "measured_write_bps": 0.0, "applied_generation": 0,
                               "held_at_limit": False}]


def test_status_json_keeps_its_shape_and_summaries_are_asked_for(coordinator):
    _, _, port = coordinator
    summaries = json.loads(vnodectl(port, "status", "--json", "--summary").stdout)["users"]
    alice = next(u for u in summaries if u["name"] == "alice")
    assert "nodes" not in alice and alice["summary"]["nodes"] == 1
    assert alice["summary"]["target_read_bps_max"] == alice["summary"]["target_read_bps_min"] > 0
    table = vnodectl(port, "status", "--summary").stdout
    assert "one line per user" in table and "HELD_NODES" in table
    by_user = json.loads(vnodectl(port, "status", "--json", "--summary", "--user", "alice").stdout)["users"]
    assert [u["nodes"][0]["node_id"] for u in by_user] == ["dn1"], "a user asked for: its entries"


@pytest.mark.parametrize("args", [("status",), ("status", "--json"), ("users",), ("nodes",)])
def test_a_reader_that_closed_the_pipe_ends_vnodectl_quietly_like_any_unix_tool(coordinator, args):
    """`vnodectl status | head -1`: head has its line and closes the pipe; vnodectl's next write fails.
    Here the reader is closed before vnodectl writes at all, so the write always meets a closed pipe."""
    _, _, port = coordinator
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run([sys.executable, "-m", "vnode_sync.ctl.main", "--coordinator", f"127.0.0.1:{port}",
                                 *args], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=30)
    finally:
        os.close(write_end)
    assert result.stderr == "", "no traceback, no error line"
    assert result.returncode == 141, "what a shell reports for a tool that SIGPIPE ended (128 + 13)"


def test_human_status_is_an_aligned_table(coordinator):
    _, _, port = coordinator
    lines = vnodectl(port, "status").stdout.splitlines()
    header, rows = lines[1], lines[2:]
    assert header.split()[:4] == ["USER", "PRIO", "ACTIVE", "NODE"]
    assert len({len(r) for r in rows}) == 1 and rows[0].startswith("alice")


@pytest.mark.parametrize("args,message,code", [
    (("set-priority", "alice", "0"), "invalid priority 0", 2),
    (("set-priority", "alice", "101"), "invalid priority 101", 2),
    (("set-priority", "alice", "abc"), "invalid priority 'abc'", 2),
    (("set-priority", "../x", "5"), "invalid user name '../x'", 2),
    (("set-priority", "a b", "5"), "invalid user name 'a b'", 2),
    (("set-priority", "x" * 300, "5"), "invalid user name", 2),
    (("set-priority", "mallory", "5"), "unknown user 'mallory'", 3),
    (("activate", "mallory"), "unknown user 'mallory'", 3),
    (("remove", "mallory"), "unknown user 'mallory'", 3),
])
def test_bad_input_gets_one_line_a_nonzero_exit_and_changes_nothing(coordinator, args, message, code):
    cluster, _, port = coordinator
    generation = cluster.generation()
    result = vnodectl(port, *args)
    assert result.returncode == code
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert cluster.generation() == generation
    assert {u.name: (u.priority, u.active) for u in cluster.users()} == {"alice": (4, True), "bob": (8, True)}


def test_a_coordinator_that_is_down_is_named_in_one_line():
    result = subprocess.run([sys.executable, "-m", "vnode_sync.ctl.main", "--coordinator", "127.0.0.1:1",
                             "status"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 4
    assert result.stderr.strip() == "vnodectl: error: coordinator 127.0.0.1:1 is unreachable"


@pytest.mark.parametrize("content,message", [
    (b"coordinator: [unclosed\n", "(whole file): got invalid YAML at line 2, column 1 (expected ',' or ']', "
                                   "but got '<stream end>'); allowed: YAML text"),
    (b"coordinator: \xff\n", "(whole file): got byte 0xff at offset 13; allowed: UTF-8 text"),
    (b"- coordinator\n", "(whole file): got a list at the top; allowed: a mapping of keys to values"),
    (b"insecure: yes please\n", "insecure: got 'yes please'; allowed: true or false"),
    (b"tls: {ca: a, cert: b, key: c, pin: d}\n",
     "tls.pin: got an unknown key (value 'd'); allowed: keys ca, cert, key, server_name"),
])
def test_a_bad_config_file_is_one_line_exit_2_and_changes_nothing(coordinator, tmp_path, content, message):
    cluster, _, port = coordinator
    generation = cluster.generation()
    bad = tmp_path / "vnodectl.yaml"
    bad.write_bytes(content)
    result = vnodectl(port, "--config", str(bad), "set-priority", "alice", "9")
    assert result.returncode == 2
    assert result.stderr == f"vnodectl: error: config {bad}: {message}\n"
    assert cluster.generation() == generation
    assert {u.name: u.priority for u in cluster.users()} == {"alice": 4, "bob": 8}


def test_address_comes_from_the_environment(coordinator):
    import os
    _, _, port = coordinator
    env = dict(os.environ, VNODE_COORDINATOR=f"127.0.0.1:{port}")
    result = subprocess.run([sys.executable, "-m", "vnode_sync.ctl.main", "users", "--json"],
                            capture_output=True, text=True, timeout=30, env=env)
    users = json.loads(result.stdout)["users"]
    assert [u["name"] for u in users] == ["alice", "bob"]
    assert (users[0]["reservation_bps"], users[0]["limit_bps"]) == (0, 0)
