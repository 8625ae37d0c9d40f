"""`vnodectl add-group | set-group | move | remove-group | groups` as an admin runs them (vnodectl's
main in this process, for time; tests/ctl/test_vnodectl.py runs it as a process), against a real
coordinator over gRPC; bad input is one line, a non-zero exit, and changes nothing."""

import contextlib
import io
import json
import subprocess

import pytest

from tests.conftest import COORDINATOR_CONFIG, served_coordinator
from vnode_sync.ctl.main import main


@pytest.fixture(scope="module")
def fair_coordinator(tmp_path_factory):
    config = {**COORDINATOR_CONFIG, "policy": {"sharing": "work-conserving"}}
    with served_coordinator(config, tmp_path_factory.mktemp("groups")) as served:
        yield served


def vnodectl(port, *args) -> subprocess.CompletedProcess:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["--coordinator", f"127.0.0.1:{port}", *args])
        except SystemExit as e:   # argparse's refusals
            code = e.code
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def ok(port, *args) -> str:
    result = vnodectl(port, *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_tree_built_listed_shown_by_status_and_taken_down(fair_coordinator):
    cluster, _, port = fair_coordinator
    assert ok(port, "add-group", "physics", "--weight", "2") == "added group physics: weight 2, under the root\n"
    assert ok(port, "add-group", "theory", "--weight", "1", "--parent", "physics", "--ceiling", "50MB/s") == \
        "added group theory: weight 1, under physics, ceiling 50.0 MB/s\n"
    assert ok(port, "move", "alice", "theory") == "user alice is in group theory\n"
    listed = json.loads(ok(port, "groups", "--json"))["groups"]
    assert listed == [{"name": "physics", "weight": 2, "parent": "", "floor_bps": 0, "ceiling_bps": 0, "users": []},
                      {"name": "theory", "weight": 1, "parent": "physics", "floor_bps": 0,
                       "ceiling_bps": 50_000_000, "users": ["alice"]}]
    table = ok(port, "groups").splitlines()
    assert table[1].split()[:2] == ["physics", "2"] and table[2].split()[:2] == ["theory", "1"]
    assert table[2].startswith("  theory"), "a group is shown under its parent"
    status = ok(port, "status")
    assert "by group (each group's subtree summed):" in status
    status_json = json.loads(ok(port, "status", "--json"))
    assert [(g["name"], g["active_users"]) for g in status_json["groups"]] == [("physics", 1), ("theory", 1)]
    assert next(u for u in status_json["users"] if u["name"] == "alice")["group"] == "theory"
    assert ok(port, "set-group", "theory", "--weight", "3", "--parent", "-") == "group theory: weight 3, under the root, " \
                                                                                "ceiling 50.0 MB/s\n"
    refused = vnodectl(port, "remove-group", "theory")
    assert refused.returncode == 2 and "is not empty (users alice)" in refused.stderr
    ok(port, "move", "alice", "-")
    assert ok(port, "remove-group", "theory").startswith("removed group theory")
    assert ok(port, "remove-group", "physics").startswith("removed group physics")
    assert cluster.store.groups() == []


BAD_INPUT = [
    (("add-group", "Phys!cs", "--weight", "2"), "invalid group name 'Phys!cs'", 2),
    (("add-group", "a;rm -rf /", "--weight", "2"), "invalid group name", 2),
    (("add-group", "../etc", "--weight", "2"), "invalid group name '../etc'", 2),
    (("add-group", "g", "--weight", "0"), "invalid group weight 0", 2),
    (("add-group", "g", "--weight", "10001"), "invalid group weight 10001", 2),
    (("add-group", "g"), "the following arguments are required: --weight", 2),
    (("add-group", "g", "--weight", "2", "--floor", "50MB/s", "--ceiling", "10MB/s"), "below its floor", 2),
    (("add-group", "g", "--weight", "2", "--parent", "nowhere"), "unknown parent group 'nowhere'", 3),
    (("add-group", "physics", "--weight", "2"), "group 'physics' exists already", 2),
    (("set-group", "physics"), "give at least one of --weight", 2),
    (("set-group", "nowhere", "--weight", "3"), "unknown group 'nowhere'", 3),
    (("set-group", "physics", "--parent", "physics"), "a tree has no loops", 2),
    (("move", "alice", "nowhere"), "unknown group 'nowhere'", 3),
    (("move", "carol", "physics"), "unknown user 'carol'", 3),
    (("move", "Alice", "physics"), "invalid user name 'Alice'", 2),
    (("remove-group", "physics"), "is not empty (users bob)", 2),
    (("remove-group", "nowhere"), "unknown group 'nowhere'", 3),
]


def test_bad_group_input_is_one_line_a_nonzero_exit_and_changes_nothing(fair_coordinator):
    cluster, _, port = fair_coordinator
    ok(port, "add-group", "physics", "--weight", "2")
    ok(port, "move", "bob", "physics")
    try:
        before = (cluster.generation(), cluster.store.groups(), cluster.store.users())
        for args, message, code in BAD_INPUT:
            result = vnodectl(port, *args)
            assert result.returncode == code, (args, result.stderr)
            assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, (args, result.stderr)
            assert (cluster.generation(), cluster.store.groups(), cluster.store.users()) == before, args
    finally:
        ok(port, "move", "bob", "-")
        ok(port, "remove-group", "physics")


def test_a_coordinator_that_splits_by_priority_alone_refuses_groups(coordinator):
    from tests.ctl.test_vnodectl import vnodectl   # as a process, once
    cluster, _, port = coordinator
    generation = cluster.generation()
    result = vnodectl(port, "add-group", "physics", "--weight", "2")
    assert result.returncode != 0 and "groups apply only with policy.sharing work-conserving" in result.stderr
    assert cluster.generation() == generation and cluster.store.groups() == []
