"""`vnodectl status` on a large site: above a number of (user, node) lines it prints one line per
user (targets lowest-highest over its nodes, measured summed); --user, --node and --per-node give
the per-node lines. Real coordinator over gRPC; the limit is lowered so that 3 x 3 exceeds it."""

import time

import grpc
import pytest

from tests.conftest import COORDINATOR_CONFIG, served_coordinator
from tests.fakes.reports import usage_report
from vnode_sync.ctl import main as vnodectl
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc

MB = 1_000_000
SMALL = {"name": "/dev/loop7", "read_bps": 60 * MB, "write_bps": 30 * MB}
BIG = {"name": "/dev/loop8", "read_bps": 120 * MB, "write_bps": 30 * MB}
CONFIG = {**COORDINATOR_CONFIG,
          "users": [*COORDINATOR_CONFIG["users"], {"name": "carol", "uid": 1003, "priority": 4, "active": False}],
          "storage_nodes": [{"id": "dn1", "devices": [SMALL]}, {"id": "dn2", "devices": [SMALL]},
                            {"id": "dn3", "devices": [BIG]}]}


@pytest.fixture
def site(tmp_path):
    with served_coordinator(CONFIG, tmp_path) as (cluster, channel, port):
        now = time.time()
        for node, read_bps in (("dn1", 2 * MB), ("dn2", 4 * MB)):   # alice reads 2 and 4 MB/s there
            cluster.runtime.report_usage(usage_report(node, now, {("alice", "/dev/loop7"): (read_bps, 0.0)},
                                                      held={"alice"} if node == "dn2" else (),
                                                      applied_generation=cluster.generation()))
        yield cluster, channel, port


def test_above_max_entries_each_user_is_one_summary(site):
    cluster, channel, _ = site
    status = pb_grpc.AdminStub(channel).Status(pb.StatusRequest(max_entries=5), timeout=5)
    summaries = {us.user.name: us.summary for us in status.users}
    assert all(not us.nodes for us in status.users)
    asked = pb_grpc.AdminStub(channel).Status(pb.StatusRequest(summarise=True), timeout=5)
    assert asked.users == status.users, "summaries asked for at any size"
    alice = summaries["alice"]
    # Algorithm 1, alice 4 of 12: 20 MB/s on a 60 MB/s device, 40 on the 120 MB/s one.
    assert (alice.nodes, alice.target_read_bps_min, alice.target_read_bps_max) == (3, 20 * MB, 40 * MB)
    assert alice.target_write_bps_min == alice.target_write_bps_max == 10 * MB
    assert alice.measured_read_bps == pytest.approx(6 * MB, rel=0.01)
    assert alice.nodes_held_at_limit == 1
    assert alice.applied_generation_min == 0, "dn3 never reported"
    assert summaries["carol"].target_read_bps_max == 0, "an inactive user has no share"
    # At or below the limit, and whenever a user or a node is asked for: entries, not summaries.
    for request, entries in ((pb.StatusRequest(max_entries=9), 9), (pb.StatusRequest(max_entries=5, user="bob"), 3),
                             (pb.StatusRequest(max_entries=1, node="dn3"), 3),
                             (pb.StatusRequest(summarise=True, user="alice"), 3)):
        status = pb_grpc.AdminStub(channel).Status(request, timeout=5)
        assert sum(len(us.nodes) for us in status.users) == entries
        assert not any(us.HasField("summary") for us in status.users)


def test_unknown_user_or_node_is_not_found(site):
    _, channel, _ = site
    for request in (pb.StatusRequest(user="mallory"), pb.StatusRequest(node="dn9")):
        with pytest.raises(grpc.RpcError) as e:
            pb_grpc.AdminStub(channel).Status(request, timeout=5)
        assert e.value.code() == grpc.StatusCode.NOT_FOUND


def test_vnodectl_prints_a_line_per_user_and_per_node_lines_on_request(site, monkeypatch, capsys):
    _, _, port = site
    monkeypatch.setattr(vnodectl, "STATUS_LINES_MAX", 5)
    address = ["--coordinator", f"127.0.0.1:{port}", "--insecure"]
    assert vnodectl.main([*address, "status"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["USER", "PRIO", "ACTIVE", "NODES", "TARGET_RD_MB/s", "TARGET_WR_MB/s",
                                "MEASURED_RD_MB/s", "MEASURED_WR_MB/s", "MIN_APPLIED_GEN", "HELD_NODES"]
    assert lines[2].split() == ["alice", "4", "yes", "3", "20.0-40.0", "10.0", "6.0", "0.0", "0", "1"]
    assert len(lines) == 2 + 3 + 1 and "one line per user" in lines[-1] and "--per-node" in lines[-1]
    for args, count in ((["--per-node"], 9), (["--user", "alice"], 3), (["--node", "dn2"], 3)):
        assert vnodectl.main([*address, "status", *args]) == 0
        assert len(capsys.readouterr().out.splitlines()) == 2 + count, args
    assert vnodectl.main([*address, "status", "--node", "dn9"]) == vnodectl.EXIT_NOT_FOUND
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "unknown storage node 'dn9'" in err
