"""Jobs as VNodes (issue 61, item 3): a running job becomes a VNode `user.job` under its user once a
compute agent reports a connection of it, and stops being one when it ends; a compute agent's
connection is charged to its job's VNode when the job is its user's, the weight step divides the
user's share among its jobs and its job-less work by their weights, and a job no compute agent has
named falls back to its user."""

import itertools

import pytest

from tests.coordinator.test_weight_control import CONFIG, MB, report
from vnode_sync.coordinator.config import parse_config
from vnode_sync.coordinator.control.desired_state import build_desired_state
from vnode_sync.coordinator.control.group_tree import weight_tree
from vnode_sync.coordinator.control.job_vnodes import charge_connections, fallback, job_rows, job_vnodes
from vnode_sync.coordinator.control.node_edge import Edge
from vnode_sync.coordinator.state.store import JobRecord, StateStore, UserRecord
from vnode_sync.coordinator.state.usage_ledger import UsageLedger
from vnode_sync.coordinator.control.weight_control import WeightControl
from vnode_sync.coordinator.policy.weight_tree import Group, User
from vnode_sync.wire import vnode_pb2 as pb


def _alice(priority=10, jobs=2):
    return UserRecord("alice", 2001, priority, False, jobs, None, True)


def test_a_jobs_vnode_joins_its_nodes_requests_and_a_job_id_that_cannot_name_one_stays_with_its_user():
    jobs = job_vnodes([JobRecord("77", "cn1", "alice", 30, 10 * MB, 0), JobRecord("77", "cn2", "alice", 20, 0, 50 * MB),
                       JobRecord("12[3].pbs", "cn1", "bob", None), JobRecord("../x", "cn1", "bob", None)])
    assert [(j.name, j.nodes, j.priority, j.reservation_bps, j.limit_bps) for j in jobs] == [
        ("alice.77", ("cn1", "cn2"), 30, 10 * MB, 50 * MB), ("bob.12-3.pbs", ("cn1",), None, 0, 0)]
    rows = job_rows(jobs, [_alice(), UserRecord("bob", 2002, 5, False, 0, None, False)])
    assert [(r.name, r.effective_priority, r.effective_reservation, r.effective_limit) for r in rows] == [
        ("alice.77", 30, 10 * MB, 50 * MB)]   # bob has no running job in this store: not active, no row


def test_both_stores_list_running_jobs_as_the_hooks_asked(tmp_path):
    store = StateStore(str(tmp_path / "state.sqlite"))
    store.start_job("77", "cn1", "alice", 2001, 30, 10, reservation_bps=5 * MB)
    store.start_job("78", "cn1", "alice", 2001, None, 10, limit_bps=9 * MB)
    assert store.running_jobs() == [JobRecord("77", "cn1", "alice", 30, 5 * MB, 0),
                                    JobRecord("78", "cn1", "alice", None, 0, 9 * MB)]
    store.start_job("78", "cn2", "alice", 2001, None, 10)
    assert store.running_jobs(of={("alice", "78"), ("bob", "77"), ("alice", "79")}) == [
        JobRecord("78", "cn1", "alice", None, 0, 9 * MB), JobRecord("78", "cn2", "alice", None, 0, 0)], \
        "only those named, each of its own user, on every node"
    store.end_job("77", "cn1")
    assert [j.job_id for j in store.running_jobs()] == ["78", "78"]


def test_a_connection_is_charged_to_its_job_only_for_a_running_job_of_its_own_user():
    jobs = job_vnodes([JobRecord("77", "cn1", "alice", None), JobRecord("90", "cn1", "bob", None)])
    reported = [pb.ConnectionOwner(client_address="10.0.0.5", client_port=p, user=u, server_address="10.0.0.9",
                                   server_port=9866, job=j)
                for p, u, j in ((40001, "alice", "77"), (40002, "alice", "90"), (40003, "alice", ""),
                                (40004, "alice", "91"))]
    charged = charge_connections(reported, jobs, {"alice.77", "bob.90"})
    assert [c.vnode for c in charged] == ["alice.77", "", "", ""]
    assert [c.vnode for c in charge_connections(reported, jobs, set())] == ["", "", "", ""], \
        "no row (static sharing, an inactive user): its user's"


def test_a_job_without_a_vnode_says_why_it_falls_back_to_its_user():
    job, = job_vnodes([JobRecord("77", "cn1", "alice", None), JobRecord("77", "cn2", "alice", None)])
    assert fallback(job, {"cn1"}) == "no compute agent on cn2: charged to user alice"
    assert fallback(job, {"cn1", "cn2"}) == "no connection of it reported yet: charged to user alice"
    assert fallback(job, {"cn1", "cn2"}, static=True) == "sharing: static splits by user: charged to user alice"


def test_a_user_with_jobs_is_an_inner_node_of_its_jobs_and_its_joblessness():
    alice = _alice()
    rows = job_rows(job_vnodes([JobRecord("77", "cn1", "alice", 30), JobRecord("78", "cn1", "alice", None)]), [alice])
    tree = weight_tree([alice, *rows], [])
    assert tree.children == (Group("user alice", 10.0, (User("alice", 10.0), User("alice.77", 30.0),
                                                       User("alice.78", 10.0))),)
    assert weight_tree([alice], []) is None, "no job rows and no groups: today's flat step"


def test_the_step_splits_a_users_share_between_its_jobs_by_their_weights_not_with_other_users():
    """alice (priority 10) runs jobs 77 (weight 30) and 78 (weight 10) beside bob (10), all reading on dn0
    and dn1 as much as they get: alice and bob get half each, alice's half splits 3 : 1 between her jobs."""
    ledger = UsageLedger()
    control = WeightControl(parse_config(CONFIG), ledger, itertools.count(1).__next__)
    for node in ("dn0", "dn1"):
        control.register(node, Edge(by_weight=True))
    alice, bob = _alice(), UserRecord("bob", 2002, 10, True, 0, None, False)
    rows = job_rows(job_vnodes([JobRecord("77", "cn1", "alice", 30), JobRecord("78", "cn1", "alice", None)]), [alice])
    readers = ("alice.77", "alice.78", "bob")
    for node in ("dn0", "dn1"):
        report(ledger, node, {n: (15 * MB, True) for n in readers}, readers + ("alice",))
    control.tick([alice, bob, *rows])
    given = {name: read for name, (read, _) in control.given_totals().items()}
    assert given["bob"] == pytest.approx(60 * MB, rel=0.05)
    assert given["alice.77"] == pytest.approx(45 * MB, rel=0.05)
    assert given["alice.78"] == pytest.approx(15 * MB, rel=0.05)


def test_the_desired_state_lists_each_job_vnode_with_its_bounds_and_its_user_for_the_storage_side():
    config = parse_config({**CONFIG, "storage_nodes": CONFIG["storage_nodes"][:1]})
    alice = _alice()
    jobs = job_vnodes([JobRecord("77", "cn1", "alice", 30, 5 * MB, 40 * MB)])
    state = build_desired_state(3, config.storage_nodes[0], [alice], config.policy, jobs=jobs,
                                job_rows=job_rows(jobs, [alice]))
    spec = {v.user: v for v in state.vnodes}["alice.77"]
    assert (spec.job, spec.job_user, spec.uid, spec.priority) == ("77", "alice", 2001, 30)
    assert (spec.shares[0].read.ceiling_bps, spec.shares[0].read.floor_bps) == (40 * MB, 5 * MB)
    assert [u.name for u in state.users] == ["alice"], "uid -> user identity names users only"


def test_a_pbs_prologues_request_becomes_its_jobs_weight_and_ceiling(tmp_path):
    """pbs_mom's argv (job id, user, group, name, limits, queue, account) -> the hook's event -> the store ->
    the job's VNode, named so that no path or cgroup sees the array's brackets."""
    from vnode_sync.batch.jobs import JobPhase, from_pbs_argv
    event = from_pbs_argv(JobPhase.START, ["12[3].pbs-1", "nobody", "nogroup", "ckpt",
                                           "other=vnode_priority=20+vnode_limit=30MB/s", "batch", "physics"], node="cn1")
    store = StateStore(str(tmp_path / "state.sqlite"))
    store.start_job(event.job_id, event.node, event.user, event.uid, event.requested_priority or None, 10,
                    event.requested_reservation, event.requested_limit)
    job, = job_vnodes(store.running_jobs())
    assert (job.name, job.priority, job.limit_bps) == ("nobody.12-3.pbs-1", 20, 30 * MB)


def test_metrics_and_group_totals_add_each_jobs_figures_to_its_user_one_series_per_user():
    from vnode_sync.coordinator.control.job_vnodes import by_user
    assert by_user({"alice": (1.0, 2.0), "alice.77": (10.0, 0.0), "alice.78": (5.0, 1.0), "bob": (3.0, 3.0)}) == {
        "alice": (16.0, 3.0), "bob": (3.0, 3.0)}


def _site(tmp_path, sharing="work-conserving"):
    """A coordinator's state (no server): alice and bob, three storage nodes."""
    from vnode_sync.coordinator.cluster import Cluster
    config = parse_config({**CONFIG, "policy": {"sharing": sharing},
                           "users": [{"name": "alice", "uid": 2001, "priority": 10},
                                     {"name": "bob", "uid": 2002, "priority": 10}]})
    cluster = Cluster(config, StateStore(str(tmp_path / "state.sqlite"), seed_users=config.users))
    cluster.publishing.refresh_snapshot()   # as the fan-out does at start
    return cluster


def _connection(port: int, job: str, user: str = "alice") -> pb.ConnectionOwner:
    return pb.ConnectionOwner(client_address="10.0.0.5", client_port=port, user=user, server_address="10.0.0.9",
                              server_port=9866, job=job)


def _job_vnodes(cluster, node="dn0") -> list[str]:
    """The job VNodes of the node's desired state as the fan-out publishes it (connections first, as it
    does when a report comes; the snapshot read when the change it was told of comes)."""
    cluster.publishing.publish_connections(cluster.runtime.connections()[1])
    return [v.user for v in cluster.publishing.desired_state(node).vnodes if v.job]


def _start(cluster, job, user="alice", node="cn1"):
    cluster.commands.start_job(job, user, 2001 if user == "alice" else 2002, node, "", "", 0, "test")


def test_a_running_job_is_a_vnode_only_once_a_compute_agent_reports_a_connection_of_it(tmp_path):
    cluster = _site(tmp_path)
    told = []
    cluster.publishing.add_listener(told.append)
    _start(cluster, "77")
    _start(cluster, "78")
    assert _job_vnodes(cluster) == [], "no compute agent has named either job: no VNode anywhere"
    assert [r.name for r in cluster.publishing.snapshot().rows] == ["alice", "bob"], "nor a row in the step"

    told.clear()
    generation = cluster.generation()
    cluster.runtime.report_connections("cn1", [_connection(40001, "77")])
    assert told == [generation], "the fan-out and the control loop are told: the snapshot is read again"
    assert _job_vnodes(cluster) == ["alice.77"]
    state = cluster.publishing.desired_state("dn0")
    assert state.generation == generation, "runtime state: no durable change, no new generation"
    connection, = state.connections
    assert connection.vnode == "alice.77", "charged by the snapshot it is sent with, not the one it came under"
    assert [r.name for r in cluster.publishing.snapshot().rows] == ["alice", "bob", "alice.77"]

    told.clear()
    cluster.runtime.report_connections("cn1", [_connection(40002, "77")])
    assert told == [], "a job already named: nothing to read again"


def test_a_jobs_vnode_stays_while_it_runs_and_goes_when_it_ends(tmp_path):
    cluster = _site(tmp_path)
    _start(cluster, "77")
    # Reported before the job's start is read into a snapshot (a report is answered on the event loop,
    # the snapshot read on the store thread): the read that follows makes the VNode all the same.
    cluster.runtime.report_connections("cn1", [_connection(40001, "77")])
    assert _job_vnodes(cluster) == ["alice.77"]
    cluster.runtime.report_connections("cn1", [])
    assert _job_vnodes(cluster) == ["alice.77"], "its connections come and go (one per block): the VNode stays"

    cluster.runtime.report_connections("cn1", [_connection(40003, "77")])
    cluster.commands.end_job("77", "cn1", "test")
    assert _job_vnodes(cluster) == []
    connection, = cluster.publishing.desired_state("dn0").connections
    assert connection.vnode == "", "a connection still reported after its job ended is its user's"
    _start(cluster, "77")
    cluster.runtime.report_connections("cn1", [])
    assert _job_vnodes(cluster) == [], "the same id started again is a new job: a VNode once it is named again"


def test_only_a_running_job_of_the_connections_own_user_is_made_a_vnode(tmp_path):
    cluster = _site(tmp_path)
    _start(cluster, "90", user="bob")
    cluster.runtime.report_connections("cn1", [_connection(40001, "90"), _connection(40002, "91"),
                                               _connection(40003, "92")])
    assert _job_vnodes(cluster) == [], "bob's job behind alice's connection, and jobs not running: none"
    # An agent can name a job before its prolog's StartJob is in: the next generation's read finds it.
    _start(cluster, "91")
    assert _job_vnodes(cluster) == ["alice.91"]
    # A job id that no job has by then is forgotten: started later, it is a VNode once named again.
    cluster.commands.set_priority("bob", 20, "test")
    _start(cluster, "92")
    assert _job_vnodes(cluster) == ["alice.91"]
    cluster.runtime.report_connections("cn1", [_connection(40003, "92")])
    assert _job_vnodes(cluster) == ["alice.91", "alice.92"]


def test_naming_a_job_that_does_not_run_builds_and_sends_nothing_new(tmp_path):
    """An ended job's id in a leftover process's environment, or one its user set: the named jobs are read
    again, and the storage nodes' streams keep the message they have (the same object: nothing sent)."""
    cluster = _site(tmp_path)
    _start(cluster, "77")
    cluster.publishing.refresh_snapshot()
    before, message = cluster.publishing.snapshot(), cluster.publishing.stream_message("dn0")
    cluster.runtime.report_connections("cn1", [_connection(40001, "99")])
    after = cluster.publishing.refresh_snapshot()
    assert after.read_at > before.read_at and after.version == before.version
    assert cluster.publishing.stream_message("dn0") is message


def test_under_static_sharing_a_reported_job_stays_its_users(tmp_path):
    cluster = _site(tmp_path, sharing="static")
    _start(cluster, "77")
    cluster.runtime.report_connections("cn1", [_connection(40001, "77")])
    assert _job_vnodes(cluster) == []


def test_a_usage_report_naming_a_job_vnode_the_coordinator_has_not_is_booked_without_it(tmp_path):
    """After a restart (or a job's end) a storage node enforces job VNodes the coordinator has not
    (yet): its reports name them, and are taken, not refused."""
    cluster = _site(tmp_path)
    cluster.runtime.register_node("dn0", [pb.Device(name="/dev/sdb")], "datanode-throttle", [], Edge(by_weight=True))
    summary = pb.DemandSummary(users=["alice", "alice.77"])
    assert cluster.runtime.report_usage(pb.UsageReport(node_id="dn0", demand=summary)) == cluster.generation()


def test_a_storage_nodes_stream_gets_a_jobs_vnode_when_its_connection_is_first_reported_and_loses_it_at_its_end(
        tmp_path):
    """Over gRPC, through the fan-out: the report changes no generation, yet the stream is sent the state
    with the job's VNode and its connection charged to it; the job's end sends one without."""
    from tests.conftest import served_coordinator
    from vnode_sync.wire import vnode_pb2_grpc as pb_grpc
    raw = {**CONFIG, "users": [{"name": "alice", "uid": 2001, "priority": 10}]}
    with served_coordinator(raw, tmp_path) as (cluster, channel, _):
        admin, link = pb_grpc.AdminStub(channel), pb_grpc.AgentLinkStub(channel)
        admin.StartJob(pb.JobRequest(job_id="77", user="alice", uid=2001, node="cn1"), timeout=5)
        stream = link.WatchDesiredState(pb.WatchRequest(node_id="dn0"), timeout=20)

        def next_state(wanted) -> pb.DesiredState:
            for state in stream:
                if wanted(state):
                    return state
            raise AssertionError("stream ended")

        first = next_state(lambda s: any(v.user == "alice" for v in s.vnodes))
        assert [v.user for v in first.vnodes] == ["alice"], "a running job no compute agent named: no VNode"
        link.ReportConnections(pb.ConnectionReport(reporter="cn1", connections=[_connection(40001, "77")]), timeout=5)
        state = next_state(lambda s: any(c.vnode for c in s.connections))
        assert [v.user for v in state.vnodes] == ["alice", "alice.77"]
        assert [c.vnode for c in state.connections] == ["alice.77"]
        assert state.generation == first.generation
        admin.EndJob(pb.JobRequest(job_id="77", node="cn1"), timeout=5)
        state = next_state(lambda s: not any(v.job for v in s.vnodes))
        assert [c.vnode for c in state.connections] == [""], "its connection is its user's again"
        stream.cancel()


def test_while_a_storage_node_tells_jobs_by_their_own_ids_every_running_job_is_a_vnode(tmp_path):
    """Lustre TBF: the client puts the job id in each RPC, so no compute agent is needed there."""
    cluster = _site(tmp_path)
    _start(cluster, "77")
    assert _job_vnodes(cluster) == []
    told = []
    cluster.publishing.add_listener(told.append)
    cluster.runtime.register_node("dn1", [pb.Device(name="/dev/sdb")], "lustre-tbf", [])
    assert told, "the snapshot is read again"
    assert _job_vnodes(cluster) == ["alice.77"]
    cluster.runtime.register_node("dn1", [pb.Device(name="/dev/sdb")], "datanode-throttle", [], Edge(by_weight=True))
    assert _job_vnodes(cluster) == [], "no such node left: back to the jobs a compute agent named"
