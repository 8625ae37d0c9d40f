"""Jobs as VNodes (issue 61, item 3): the store's running jobs become VNodes `user.job` under their
user, a compute agent's connection is charged to its job's VNode when the job is its user's, the
weight step divides the user's share among its jobs and its job-less work by their weights, and a job
on a node without a compute agent falls back to its user."""

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
    store.end_job("77", "cn1")
    assert [j.job_id for j in store.running_jobs()] == ["78"]


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


def test_a_job_on_a_node_without_a_compute_agent_falls_back_to_its_user():
    job, = job_vnodes([JobRecord("77", "cn1", "alice", None), JobRecord("77", "cn2", "alice", None)])
    assert fallback(job, {"cn1", "cn2"}) == ""
    assert fallback(job, {"cn1"}) == "no compute agent on cn2: charged to user alice"


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
