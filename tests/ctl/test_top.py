"""vnodectl top: the capped user first, its nodes with rate against allowance and held time; --once, --json,
and the live view redrawn in place."""

import copy
import json
import os
import pty
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import COORDINATOR_CONFIG, served_coordinator
from tests.fakes.reports import usage_report
from vnode_sync.ctl.main import main
from vnode_sync.ctl.top import folded, render_top, top_json
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc

MB = 1_000_000


def vnodectl(port, *args):
    return subprocess.run([sys.executable, "-m", "vnode_sync.ctl.main", "--coordinator", f"127.0.0.1:{port}", *args],
                          capture_output=True, text=True, timeout=30)


def alice_held_bob_below(cluster, channel):
    """dn1 reports alice reading at her 20 MB/s target and held for 30 s; bob at 10 of his 40."""
    link = pb_grpc.AgentLinkStub(channel)
    link.Register(pb.RegisterRequest(node_id="dn1", backend="blkio-v1",
                                     devices=[pb.Device(name="/dev/loop7", major=7, minor=7)]), timeout=5)
    now = cluster.ledger.now()
    link.StreamUsage(iter([usage_report("dn1", at, {("alice", "/dev/loop7"): (20 * MB, 0.0),
                                                    ("bob", "/dev/loop7"): (10 * MB, 0.0)},
                                        held={"alice"} if i > 0 else (),
                                        held_seconds={"alice": 30.0 * (i > 0), "bob": 0.0})
                           for i, at in enumerate((now - 31, now - 1, now))]), timeout=5)


def in_process(capsys, port, *args) -> str:
    """vnodectl in this process: measured rates are taken as stale 6 s after the last report, longer
    than a new interpreter may take to start on a loaded host."""
    assert main(["--coordinator", f"127.0.0.1:{port}", *args]) == 0
    return capsys.readouterr().out


def test_once_shows_the_held_user_first_with_its_node(coordinator, capsys):
    cluster, channel, port = coordinator
    alice_held_bob_below(cluster, channel)
    lines = in_process(capsys, port, "top", "--once").splitlines()
    assert lines[0].startswith("vnode-sync top") and "held time over the last 5m00s" in lines[0]
    head, alice, bob = lines[2].split(), lines[3].split(), lines[4].split()
    assert head[:6] == ["VNODE", "PRIO", "PRESSURE", "NODES_HELD", "HELD_IN_WINDOW", "NODE"]
    assert alice[:6] == ["alice", "4", "1.00", "1", "30s", "dn1"] and "held" in alice and "estimated" in alice
    assert bob[:6] == ["bob", "8", "0.25", "0", "0s", "dn1"]


def test_json_is_one_document_for_scripts(coordinator, capsys):
    cluster, channel, port = coordinator
    alice_held_bob_below(cluster, channel)
    answer = json.loads(in_process(capsys, port, "top", "--json", "--window", "60"))
    assert answer["window_seconds"] == 60 and answer["sharing"] == "static"
    alice, bob = answer["users"]
    assert alice["user"] == "alice" and alice["nodes_held"] == 1 and alice["held_seconds"] == 30.0
    node = alice["nodes"][0]
    assert node["node_id"] == "dn1" and node["allowed_read_bps"] == 20 * MB and node["held_at_limit"]
    assert node["held_source"] == "estimated" and node["held_since_unix"] > 0
    assert bob["held_seconds"] == 0 and bob["nodes"][0]["held_since_unix"] is None


@pytest.mark.parametrize("args,message", [(("--window", "0"), "must be above 0"),
                                          (("--interval", "abc"), "is not a number")])
def test_bad_arguments_are_one_line_errors(coordinator, args, message):
    result = vnodectl(coordinator[2], "top", *args)
    assert result.returncode == 2 and message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_window_the_coordinator_refuses_is_an_invalid_argument(coordinator):
    result = vnodectl(coordinator[2], "top", "--once", "--window", "7200")
    assert result.returncode == 2 and "invalid window 7200" in result.stderr


def test_the_live_view_redraws_in_place_on_a_terminal_and_ends_cleanly(coordinator):
    cluster, channel, port = coordinator
    alice_held_bob_below(cluster, channel)
    pid, fd = pty.fork()
    if pid == 0:
        # Ctrl-C must reach it even when this test runs in a background job (where SIGINT is ignored).
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.execv(sys.executable, [sys.executable, "-m", "vnode_sync.ctl.main", "--coordinator", f"127.0.0.1:{port}",
                                  "top", "--interval", "0.2"])
    screen, deadline = b"", time.monotonic() + 20
    while screen.count(b"\x1b[H\x1b[2J") < 3 and time.monotonic() < deadline:
        screen += os.read(fd, 65536)
    os.kill(pid, 2)   # Ctrl-C
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        screen += chunk
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert screen.startswith(b"\x1b[?1049h") and screen.count(b"\x1b[H\x1b[2J") >= 3   # alternate screen, redrawn
    assert b"alice" in screen and screen.rstrip().endswith(b"\x1b[?1049l")          # the terminal given back


def test_a_long_table_is_cut_to_the_terminal_and_says_so():
    answer = pb.PressureResponse(window_seconds=300, covered_seconds=300, sampled_at_unix=1000.0, users=[
        pb.UserPressure(user=f"u{i}", priority=1, nodes=[pb.NodePressure(node_id="dn1", read_bps=1.0)])
        for i in range(50)])
    lines = render_top(answer, height=20).splitlines()
    assert len(lines) <= 20 and lines[-1].startswith("... ") and "more rows" in lines[-1]


def jobs_and_groups() -> pb.PressureResponse:
    """alice (physics/theory) and her job 7, bob (physics), carol under the root; alice's job held on dn1."""
    def node(node_id, read, allowed, held=False):
        return pb.NodePressure(node_id=node_id, read_bps=read * MB, allowed_read_bps=allowed * MB, held_at_limit=held,
                               held_since_unix=990.0 if held else 0.0, held_seconds=10.0 if held else 0.0,
                               held_source=pb.HELD_SOURCE_MEASURED if held else pb.HELD_SOURCE_UNSPECIFIED)
    return pb.PressureResponse(window_seconds=300, covered_seconds=300, sampled_at_unix=1000.0, users=[
        pb.UserPressure(user="alice", job="7", group="physics/theory", priority=30, pressure=1.0, nodes_held=1,
                        held_seconds=10.0, nodes=[node("dn1", 20, 20, held=True)]),
        pb.UserPressure(user="alice", group="physics/theory", priority=8, pressure=0.5,
                        nodes=[node("dn1", 5, 10), node("dn2", 4, 10)]),
        pb.UserPressure(user="bob", group="physics", priority=4, pressure=0.25, nodes=[node("dn2", 5, 20)]),
        pb.UserPressure(user="carol", priority=2, pressure=0.1, nodes=[node("dn1", 1, 10)])])


def test_by_user_folds_each_users_jobs_into_its_row_node_by_node():
    alice, bob, carol = folded(jobs_and_groups(), "user")
    assert (alice.user, alice.job, alice.priority, alice.nodes_held) == ("alice", "", 8, 1)   # her own priority
    dn1, dn2 = alice.nodes
    assert (dn1.node_id, dn1.read_bps, dn1.allowed_read_bps, dn1.held_at_limit) == ("dn1", 25 * MB, 30 * MB, True)
    assert (dn2.node_id, dn2.read_bps) == ("dn2", 4 * MB)
    assert alice.pressure == pytest.approx(25 / 30) and (bob.user, carol.user) == ("bob", "carol")


def test_by_group_sums_each_groups_subtree_and_users_under_the_root_make_slash():
    rows = {row.group: row for row in folded(jobs_and_groups(), "group")}
    assert set(rows) == {"physics", "physics/theory", "/"}
    physics = {n.node_id: n for n in rows["physics"].nodes}
    assert physics["dn1"].read_bps == 25 * MB and physics["dn2"].read_bps == 9 * MB   # alice, her job, bob
    assert {n.node_id: n.read_bps for n in rows["physics/theory"].nodes} == {"dn1": 25 * MB, "dn2": 4 * MB}
    assert [n.read_bps for n in rows["/"].nodes] == [1 * MB]
    assert [row.group for row in folded(jobs_and_groups(), "group")][:2] == ["physics", "physics/theory"]  # held first


def test_the_table_names_a_jobs_vnode_and_its_group_and_json_follows_by():
    lines = render_top(jobs_and_groups()).splitlines()
    assert lines[2].split()[:3] == ["VNODE", "GROUP", "PRIO"]
    assert lines[3].split()[:3] == ["alice.7", "physics/theory", "30"]
    assert any(line.split()[:2] == ["carol", "/"] for line in lines)
    groups = render_top(jobs_and_groups(), by="group").splitlines()
    assert groups[2].split()[0] == "GROUP" and groups[3].split()[:2] == ["physics", "-"]
    document = top_json(jobs_and_groups(), "group")
    assert document["by"] == "group" and [g["group"] for g in document["groups"]][-1] == "/"
    assert top_json(jobs_and_groups())["users"][0]["job"] == "7"


def test_by_group_through_the_coordinator_sums_alices_group_and_leaves_bob_under_the_root(tmp_path, capsys):
    raw = copy.deepcopy(COORDINATOR_CONFIG)
    raw["policy"] = {"sharing": "work-conserving"}   # groups apply only there
    with served_coordinator(raw, tmp_path) as (cluster, channel, port):
        by_group_through(cluster, channel, port, capsys)


def by_group_through(cluster, channel, port, capsys):
    admin = pb_grpc.AdminStub(channel)
    admin.AddGroup(pb.AddGroupRequest(group=pb.Group(name="physics", weight=2)), timeout=5)
    admin.AddGroup(pb.AddGroupRequest(group=pb.Group(name="theory", weight=1, parent="physics")), timeout=5)
    admin.MoveUser(pb.MoveUserRequest(user="alice", group="theory"), timeout=5)
    alice_held_bob_below(cluster, channel)
    answer = admin.Pressure(pb.PressureRequest(), timeout=5)
    assert [(r.user, r.group) for r in answer.users] == [("alice", "physics/theory"), ("bob", "")]
    groups = json.loads(in_process(capsys, port, "top", "--json", "--by", "group"))["groups"]
    assert [(g["group"], g["nodes_held"], g["nodes"][0]["read_bps"]) for g in groups] == [
        ("physics", 1, 20 * MB), ("physics/theory", 1, 20 * MB), ("/", 0, 10 * MB)]
