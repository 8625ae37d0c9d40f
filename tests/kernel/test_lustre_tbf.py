"""The Lustre NRS TBF backend.

Lustre cannot run on these machines. Every test whose name contains "standin" runs the
backend against tests/lustre_standin/lctl, a STAND-IN for `lctl` modelled on Lustre's
source and manual (docs/lustre.md) -- not against a real OSS. The other tests check
pure value types and arithmetic.
"""

import re

import pytest

from tests.fakes.clock import Clock
from tests.lustre_standin import SERVICE, StandInOss
from vnode_sync.agents.storage.reconciler import Reconciler
from vnode_sync.errors import InvalidArgument, Unsupported
from vnode_sync.kernel.backend import DEFAULT_VNODE, vnode_name
from vnode_sync.kernel.lustre_lctl import Lctl, LctlError
from vnode_sync.kernel.lustre_ledger import RuleLedger
from vnode_sync.kernel.lustre_rates import IoMix, RateConversion, combined_target
from vnode_sync.kernel.lustre_rules import JobStat, RuleList, RuleMatch, TbfRule, job_rule_name, rule_name_for
from vnode_sync.kernel.lustre_tbf import LustreTbfBackend, RuleCollision
from vnode_sync.kernel.types import DeviceLimits, DeviceNumber
from vnode_sync.shares import priority_shares
from vnode_sync.wire import vnode_pb2 as pb

MB = 1_000_000
MiB = 1 << 20
OST0 = DeviceNumber(8, 16)
ALICE = vnode_name("alice")


# ---- pure arithmetic and value types (no stand-in involved) ---------------------------------------

def test_conversion_100MB_s_4MiB_rpcs_4_partitions():
    c = RateConversion.of(100 * MB, 4 * MiB, 4)
    # 100e6 / (4 MiB x 4) = 5.96 RPCs/s per partition; rounding down keeps the sum under the target
    assert c.per_partition == 5
    assert c.effective_bps == 5 * 4 * 4 * MiB == 83_886_080
    assert c.effective_bps <= 100 * MB
    assert (c.per_partition + 1) * 4 * 4 * MiB > 100 * MB   # the next integer rate would exceed it
    assert not c.clamped


@pytest.mark.parametrize("target", [1 * MB, 17 * MB, 99_999_999, 100 * MB, 1_234_567_890, 10**12])
@pytest.mark.parametrize("partitions", [1, 2, 3, 4, 8, 16])
def test_conversion_never_exceeds_target_above_one_rpc_per_partition(target, partitions):
    c = RateConversion.of(target, 4 * MiB, partitions)
    if not c.clamped:
        assert c.effective_bps <= target
        assert (c.per_partition + 1) * partitions * 4 * MiB > target


def test_conversion_below_one_rpc_per_partition_is_clamped_and_says_so():
    c = RateConversion.of(1 * MB, 4 * MiB, 4)   # 0.06 RPC/s per partition: Lustre's floor is 1
    assert (c.per_partition, c.clamped) == (1, True)
    assert c.effective_bps > 1 * MB
    assert "clamped" in str(c)


@pytest.mark.parametrize("args", [(0, 4 * MiB, 4), (100, 0, 4), (100, 4 * MiB, 0)])
def test_conversion_rejects_zero_inputs_naming_the_value(args):
    with pytest.raises(InvalidArgument, match=r"\b0\b"):
        RateConversion.of(*args)


def test_combined_target_sums_devices_and_takes_the_smaller_direction():
    a, b = DeviceNumber(8, 16), DeviceNumber(8, 32)
    assert combined_target([DeviceLimits(a, 80 * MB, 60 * MB), DeviceLimits(b, 20 * MB, 30 * MB)]) == 90 * MB
    assert combined_target([DeviceLimits(a, 80 * MB, 0)]) == 80 * MB      # writes unlimited
    assert combined_target([DeviceLimits(a, weight=500)]) is None          # nothing TBF can express
    assert combined_target([]) is None


def test_combined_target_follows_the_users_mix_of_reads_and_writes():
    """One bucket for both directions: the largest total within both shares for the mix seen."""
    a = DeviceNumber(8, 16)
    probe_for_writes = [DeviceLimits(a, 97 * MB, 3 * MB)]      # a work-conserving allocation of a reader
    assert combined_target(probe_for_writes) == 3 * MB         # no I/O seen yet: the smaller
    assert combined_target(probe_for_writes, IoMix.of(100, 0)) == 97 * MB
    assert combined_target(probe_for_writes, IoMix.of(0, 50)) == 3 * MB
    assert combined_target([DeviceLimits(a, 60 * MB, 30 * MB)], IoMix.of(50, 50)) == 60 * MB   # 30 each way
    assert IoMix.of(0, 0) is None


def test_standin_a_readers_rule_is_not_held_at_its_write_share(oss, tmp_path):
    backend = make_backend(oss, tmp_path, rpc_bytes=MiB)
    backend.setup()
    backend.ensure_vnode("vnode.alice", 500)
    backend.apply_limits("vnode.alice", [DeviceLimits(OST0, 64 * MiB, 4 * MiB)])
    assert rules_everywhere(oss, "vnode_alice")[("regular", 0)].rate == 1          # min: 4 MiB / 4 CPTs
    backend.usage()
    oss.serve(500, "dd.500", offered_per_cpt=1, seconds=4, cpts=(0,))               # reads only
    backend.usage()
    backend.apply_limits("vnode.alice", [DeviceLimits(OST0, 64 * MiB, 4 * MiB)])
    assert rules_everywhere(oss, "vnode_alice")[("regular", 0)].rate == 16         # 64 MiB / 4 CPTs


def test_rule_values_parse_and_print_themselves():
    line = "vnode_alice {500} 5, ref 1"
    assert str(TbfRule.parse(line)) == line
    generic = TbfRule.parse("vnode_bob uid={501 502} 7, ref 0")
    assert (generic.expression, generic.rate) == ("uid={501 502}", 7)
    match = RuleMatch.parse("uid={500}")
    assert (str(match), match.listed(generic=False), match.listed(generic=True)) == \
        ("uid={500}", "{500}", "uid={500}")
    text = "regular_requests:\nCPT 0:\nvnode_alice {500} 5, ref 1\ndefault {*} 10000, ref 0\n" \
           "CPT 1:\nvnode_alice {500} 5, ref 0\ndefault {*} 10000, ref 0\n"
    listing = RuleList.parse(text)
    assert str(listing) == text
    assert listing.partitions() == [0, 1]
    assert listing.is_generic() is False
    with pytest.raises(InvalidArgument, match="NAME EXPRESSION RATE"):
        TbfRule.parse("vnode_alice 5")


def test_rule_names_are_valid_tbf_names():
    assert rule_name_for("vnode_", "alice", 500) == "vnode_alice"
    assert rule_name_for("vnode_", "first-last", 1001) == "vnode_1001"        # '-' is not allowed
    assert rule_name_for("vnode_", "christopher", 1002) == "vnode_1002"       # over 15 characters
    with pytest.raises(InvalidArgument, match="longer than 15"):
        rule_name_for("vnode_tbf_", "x-y", 4_000_000_000)


def test_settings_make_the_backend():
    from vnode_sync.kernel.lustre_settings import LustreSettings
    backend = LustreTbfBackend.from_settings("vnode-sync.oss1", LustreSettings(lctl="/opt/lustre/lctl", ledger=""))
    assert (backend.lctl.path, backend.policy, backend.ledger.path) == ("/opt/lustre/lctl", "uid", None)
    backend = LustreTbfBackend.from_settings("vnode-sync.oss1", LustreSettings())
    assert backend.ledger.path == "/var/lib/vnode-sync/vnode-sync.oss1.lustre-tbf-rules.json"
    assert backend.jobid_job_rule == "{job}.{uid}"
    backend = LustreTbfBackend.from_settings("vnode-sync.oss1", LustreSettings(jobid_job_rule="{job}", ledger=""))
    assert backend.jobid_job_rule == "{job}"


def test_agent_config_selects_the_lustre_backend():
    from vnode_sync.agents.plugins import make_backend
    from vnode_sync.agents.config import parse_agent_config
    config = parse_agent_config({"node_id": "oss1", "backend": "lustre-tbf",
                                 "lustre": {"experimental": True, "lctl": "/opt/lustre/lctl", "ledger": ""}})
    backend = make_backend(config)
    assert isinstance(backend, LustreTbfBackend) and backend.lctl.path == "/opt/lustre/lctl"


# ---- against the stand-in --------------------------------------------------------------------------

@pytest.fixture
def oss(tmp_path, monkeypatch):
    standin = StandInOss(tmp_path, partitions=4)
    monkeypatch.setenv("VNODE_LCTL_STANDIN_STATE", standin.state_path)
    return standin


def make_backend(oss, tmp_path, **kw):
    kw.setdefault("ledger", RuleLedger(str(tmp_path / "ledger.json")))
    return LustreTbfBackend(lctl=Lctl(oss.lctl), targets={"lustre-OST0000": OST0}, **kw)


def share(mbps_read, mbps_write):
    return [DeviceLimits(OST0, mbps_read * MB, mbps_write * MB)]


def rules_everywhere(oss, name):
    """The rule `name` as listed in every queue and partition of the stand-in."""
    listing = RuleList.parse(oss.run("get_param", "-n", f"{SERVICE}.nrs_tbf_rule").stdout)
    return listing.views(name)


def test_standin_setup_starts_tbf_uid_on_ost_io(oss, tmp_path):
    backend = make_backend(oss, tmp_path)
    backend.setup()
    policies = oss.run("get_param", "-n", f"{SERVICE}.nrs_policies").stdout
    assert "- name: tbf\n    state: started" in policies
    assert backend.partitions() == 4
    assert all(r is not None and r.expression == "{*}" for r in rules_everywhere(oss, "default").values())
    backend.setup()   # again: TBF already runs with the right type, nothing restarted


def test_standin_setup_refuses_to_restart_a_tbf_of_another_type(oss, tmp_path):
    assert oss.run("set_param", f"{SERVICE}.nrs_policies=tbf").returncode == 0
    assert oss.run("set_param", f"{SERVICE}.nrs_tbf_rule=start site_rule uid={{42}} rate=7").returncode == 0
    with pytest.raises(Unsupported, match="will not restart TBF"):
        make_backend(oss, tmp_path).setup()
    assert rules_everywhere(oss, "site_rule")[("regular", 0)].rate == 7


def test_standin_start_change_stop_one_rule_per_user(oss, tmp_path):
    backend = make_backend(oss, tmp_path)
    backend.setup()
    backend.ensure_vnode(ALICE, 500)
    backend.apply_limits(ALICE, share(100, 100))          # 100 MB/s, 4 MiB RPCs, 4 CPTs -> 5
    views = rules_everywhere(oss, "vnode_alice")
    assert len(views) == 8                                 # 4 CPTs x (regular, high priority)
    assert {str(r) for r in views.values()} == {"vnode_alice {500} 5, ref 0"}
    assert backend.vnodes() == [ALICE]
    assert backend.limits(ALICE) == {OST0: DeviceLimits(OST0, 100 * MB, 100 * MB)}

    backend.apply_limits(ALICE, share(200, 300))           # min(200, 300) MB/s -> 11.9 -> 11
    assert {r.rate for r in rules_everywhere(oss, "vnode_alice").values()} == {11}

    backend.apply_limits(ALICE, [DeviceLimits(OST0)])      # no limit: the rule goes
    assert set(rules_everywhere(oss, "vnode_alice").values()) == {None}
    assert backend.vnodes() == []

    backend.apply_limits(ALICE, share(100, 100))
    backend.remove_vnode(ALICE)
    assert set(rules_everywhere(oss, "vnode_alice").values()) == {None}
    assert rules_everywhere(oss, "default")[("regular", 3)] is not None


def test_standin_default_vnode_is_left_to_the_sites_default_rule(oss, tmp_path):
    backend = make_backend(oss, tmp_path)
    backend.setup()
    backend.ensure_vnode(DEFAULT_VNODE, None)
    backend.apply_limits(DEFAULT_VNODE, share(10, 10))
    assert {r.rate for r in rules_everywhere(oss, "default").values()} == {10000}
    assert backend.vnodes() == []


def test_standin_reconcile_restores_a_rate_changed_by_hand(oss, tmp_path):
    backend = make_backend(oss, tmp_path)
    backend.setup()
    backend.ensure_vnode(ALICE, 500)
    backend.apply_limits(ALICE, share(100, 100))
    assert oss.run("set_param", f"{SERVICE}.nrs_tbf_rule=change vnode_alice rate=500").returncode == 0
    assert backend.limits(ALICE) == {}                     # drift is visible
    backend.apply_limits(ALICE, share(100, 100))           # the next reconcile pass
    assert {r.rate for r in rules_everywhere(oss, "vnode_alice").values()} == {5}
    assert any("changed to [500] outside vnode-sync; restoring 5" in n for n in backend.notes)


def test_standin_reconcile_restarts_a_rule_stopped_by_hand(oss, tmp_path):
    backend = make_backend(oss, tmp_path)
    backend.setup()
    backend.ensure_vnode(ALICE, 500)
    backend.apply_limits(ALICE, share(100, 100))
    assert oss.run("set_param", f"{SERVICE}.nrs_tbf_rule=stop vnode_alice").returncode == 0
    backend.ensure_vnode(ALICE, 500)
    backend.apply_limits(ALICE, share(100, 100))
    assert {str(r) for r in rules_everywhere(oss, "vnode_alice").values()} == {"vnode_alice {500} 5, ref 0"}
    assert any("stopped outside vnode-sync" in n for n in backend.notes)


def test_standin_rule_missing_in_one_partition_is_restarted_everywhere(oss, tmp_path):
    backend = make_backend(oss, tmp_path)
    backend.setup()
    backend.ensure_vnode(ALICE, 500)
    backend.apply_limits(ALICE, share(100, 100))
    oss.drop_rule_in("vnode_alice", cpt=2)
    backend.apply_limits(ALICE, share(100, 100))
    assert all(r is not None and r.rate == 5 for r in rules_everywhere(oss, "vnode_alice").values())
    assert any("missing in regular CPT 2" in n for n in backend.notes)


def test_standin_name_collision_with_a_site_rule_is_refused(oss, tmp_path):
    backend = make_backend(oss, tmp_path)
    backend.setup()
    assert oss.run("set_param", f"{SERVICE}.nrs_tbf_rule=start vnode_alice uid={{777}} rate=9").returncode == 0
    backend.ensure_vnode(ALICE, 500)
    with pytest.raises(RuleCollision, match=r"rule 'vnode_alice' exists \(vnode_alice \{777\} 9, ref 0\) "
                                            r"and was not started by vnode-sync"):
        backend.apply_limits(ALICE, share(100, 100))
    assert {str(r) for r in rules_everywhere(oss, "vnode_alice").values()} == {"vnode_alice {777} 9, ref 0"}


def test_standin_rule_replaced_by_hand_is_reported_not_overwritten(oss, tmp_path):
    backend = make_backend(oss, tmp_path)
    backend.setup()
    backend.ensure_vnode(ALICE, 500)
    backend.apply_limits(ALICE, share(100, 100))
    oss.run("set_param", f"{SERVICE}.nrs_tbf_rule=stop vnode_alice")
    oss.run("set_param", f"{SERVICE}.nrs_tbf_rule=start vnode_alice uid={{900}} rate=3")
    with pytest.raises(RuleCollision, match=r"\{900\}"):
        backend.apply_limits(ALICE, share(100, 100))
    assert rules_everywhere(oss, "vnode_alice")[("regular", 0)].rate == 3


def test_standin_users_new_uid_replaces_its_own_rule(oss, tmp_path):
    backend = make_backend(oss, tmp_path)
    backend.setup()
    backend.ensure_vnode(ALICE, 500)
    backend.apply_limits(ALICE, share(100, 100))
    backend.ensure_vnode(ALICE, 5000)
    backend.apply_limits(ALICE, share(100, 100))
    assert {str(r) for r in rules_everywhere(oss, "vnode_alice").values()} == {"vnode_alice {5000} 5, ref 0"}


def test_standin_teardown_stops_only_rules_it_started(oss, tmp_path):
    backend = make_backend(oss, tmp_path)
    backend.setup()
    oss.run("set_param", f"{SERVICE}.nrs_tbf_rule=start site_limit uid={{600}} rate=40")
    for user, uid in (("alice", 500), ("bob", 501)):
        backend.ensure_vnode(vnode_name(user), uid)
        backend.apply_limits(vnode_name(user), share(100, 100))
    backend.teardown()
    listing = RuleList.parse(oss.run("get_param", "-n", f"{SERVICE}.nrs_tbf_rule").stdout)
    assert listing.names() == {"site_limit", "default"}
    assert "- name: tbf\n    state: started" in oss.run("get_param", "-n", f"{SERVICE}.nrs_policies").stdout


def test_standin_ledger_lets_a_restarted_agent_find_its_rules(oss, tmp_path):
    first = make_backend(oss, tmp_path)
    first.setup()
    first.ensure_vnode(ALICE, 500)
    first.apply_limits(ALICE, share(100, 100))
    restarted = make_backend(oss, tmp_path)     # same ledger file, fresh process state
    restarted.setup()
    assert restarted.vnodes() == [ALICE]
    restarted.ensure_vnode(ALICE, 500)          # its own rule: no collision
    restarted.remove_vnode(ALICE)
    assert set(rules_everywhere(oss, "vnode_alice").values()) == {None}


@pytest.mark.parametrize("command, error", [
    ("start vnode_x uid={500} rate=0", "Invalid argument"),             # rate must be 1..999999
    ("start vnode_x uid={500} rate=1000000", "Invalid argument"),
    ("start vnode_x uid={abc} rate=5", "Invalid argument"),             # uids are numbers
    ("start vnode_x jobid={dd.500} rate=5", "Invalid argument"),        # wrong key for `tbf uid`
    ("start vnode_x uid={500} rate=5 depth=3", "Invalid argument"),     # unknown key
    ("start vnode-x uid={500} rate=5", "Invalid argument"),             # '-' not allowed in names
    ("start vnode_abcdefghij uid={500} rate=5", "File name too long"),  # 16 characters
    ("start vnode_x uid={500}", None),                                  # no rate: tbf_rate (10000)
    ("start vnode_x uid={501} rate=5", "File exists"),
    ("change vnode_y rate=5", "No such file or directory"),
    ("change vnode_x", "Invalid argument"),                             # neither rate nor rank
    ("stop default", "Operation not permitted"),
    ("stop vnode_never_was", None),                                     # stopping nothing succeeds
])
def test_standin_bad_rules_fail_like_lctl(oss, tmp_path, command, error):
    make_backend(oss, tmp_path).setup()
    lctl = Lctl(oss.lctl)
    if command.startswith("start vnode_x uid={501}"):
        lctl.set_param(f"{SERVICE}.nrs_tbf_rule", "start vnode_x uid={500} rate=5")
    if error is None:
        lctl.set_param(f"{SERVICE}.nrs_tbf_rule", command)
        return
    with pytest.raises(LctlError) as caught:
        lctl.set_param(f"{SERVICE}.nrs_tbf_rule", command)
    message = str(caught.value)
    assert message.startswith(f"{SERVICE}.nrs_tbf_rule: error: set_param: setting ")
    assert message.endswith(f"={command}: {error}")
    assert caught.value.returncode != 0


def test_standin_rules_before_tbf_is_started_are_refused(oss, tmp_path):
    with pytest.raises(LctlError, match="Invalid argument"):
        Lctl(oss.lctl).set_param(f"{SERVICE}.nrs_tbf_rule", "start vnode_x uid={500} rate=5")
    with pytest.raises(LctlError, match="No such device"):
        Lctl(oss.lctl).get_param(f"{SERVICE}.nrs_tbf_rule")


def test_standin_usage_counts_the_users_jobs_from_job_stats(oss, tmp_path):
    backend = make_backend(oss, tmp_path)
    backend.setup()
    backend.ensure_vnode(ALICE, 500)
    backend.apply_limits(ALICE, share(100, 100))
    oss.serve(500, "dd.500", offered_per_cpt=3, seconds=10, cpts=(0,))
    oss.serve(500, "cp.500", offered_per_cpt=2, seconds=10, cpts=(1,), write=True)
    oss.serve(501, "dd.501", offered_per_cpt=3, seconds=10, cpts=(0,))     # someone else
    usage = backend.usage()[ALICE].devices[OST0]
    assert (usage.read_bytes, usage.read_ios) == (30 * 4 * MiB, 30)
    assert (usage.write_bytes, usage.write_ios) == (20 * 4 * MiB, 20)


def test_standin_usage_of_every_user_costs_one_job_stats_read_per_ost(oss, tmp_path):
    backend = make_backend(oss, tmp_path)
    backend.setup()
    for user, uid in (("alice", 500), ("bob", 501), ("carol", 502)):
        backend.ensure_vnode(vnode_name(user), uid)
        backend.apply_limits(vnode_name(user), share(100, 100))
        oss.serve(uid, f"dd.{uid}", offered_per_cpt=1, seconds=10, cpts=(0,))
    reads = []
    get_param = backend.lctl.get_param
    backend.lctl.get_param = lambda param: reads.append(param) or get_param(param)
    usage = backend.usage()
    assert {v: u.devices[OST0].read_ios for v, u in usage.items()} == {
        vnode_name("alice"): 10, vnode_name("bob"): 10, vnode_name("carol"): 10}
    assert sum("job_stats" in p for p in reads) == len(backend.targets)


def test_standin_user_held_at_the_limit_is_reported(oss, tmp_path):
    clock = Clock()
    backend = make_backend(oss, tmp_path, clock=clock)
    backend.setup()
    for user, uid in (("alice", 500), ("bob", 501)):
        backend.ensure_vnode(vnode_name(user), uid)
        backend.apply_limits(vnode_name(user), share(100, 100))           # 5 RPCs/s per CPT
    assert backend.limit_state(ALICE) is None                              # needs two samples
    backend.limit_state(vnode_name("bob"))
    clock.now += 10
    oss.serve(500, "dd.500", offered_per_cpt=50, seconds=10, cpts=(0, 1))  # wants 10x its cap
    oss.serve(501, "dd.501", offered_per_cpt=1, seconds=10, cpts=(0,))     # well under
    alice, bob = backend.limit_state(ALICE), backend.limit_state(vnode_name("bob"))
    assert (alice.held, alice.active_partitions, alice.measured_rpcs_per_s) == (True, 2, 10.0)
    assert (bob.held, bob.active_partitions, bob.measured_rpcs_per_s) == (False, 1, 1.0)


def test_standin_jobid_policy_matches_the_users_job_ids(oss, tmp_path):
    backend = make_backend(oss, tmp_path, policy="jobid")
    backend.setup()
    backend.ensure_vnode(ALICE, 500)
    backend.apply_limits(ALICE, share(100, 100))
    assert rules_everywhere(oss, "vnode_alice")[("regular", 0)].expression == "{*.500}"
    assert oss.serve(500, "dd.500", offered_per_cpt=50, seconds=1, cpts=(0,)) == 5


def test_standin_generic_tbf_lists_the_whole_expression(oss, tmp_path):
    backend = make_backend(oss, tmp_path, policy="generic")
    backend.setup()
    backend.ensure_vnode(ALICE, 500)
    backend.apply_limits(ALICE, share(100, 100))
    assert str(rules_everywhere(oss, "vnode_alice")[("high_priority", 3)]) == "vnode_alice uid={500} 5, ref 0"
    assert rules_everywhere(oss, "default")[("regular", 0)].expression == "*"


class NoHandlers:
    name = "none"

    def scan(self, identity):
        return []


def test_standin_reconciler_turns_coordinator_shares_into_rules(oss, tmp_path):
    """Algorithm 1 on one OSS (paper: 200 MB/s, priorities 4, 8, 8) down to TBF rules."""
    backend = make_backend(oss, tmp_path)
    reconciler = Reconciler(backend, NoHandlers(), {"/dev/ost0": OST0})
    priorities = {"alice": 4, "bob": 8, "carol": 8}
    uids = {"alice": 500, "bob": 501, "carol": 502}
    bps = priority_shares(200 * MB, priorities)
    assert bps == {"alice": 40 * MB, "bob": 80 * MB, "carol": 80 * MB}

    def state(generation, users):
        return pb.DesiredState(
            generation=generation, node_id="oss1",
            vnodes=[pb.VNodeSpec(user=u, uid=uids[u], priority=priorities[u],
                                 shares=[pb.ResourceShare(device="/dev/ost0", read=pb.Share(ceiling_bps=bps[u]), write=pb.Share(ceiling_bps=bps[u]))])
                    for u in users],
            default_vnode=pb.VNodeSpec(user="", shares=[pb.ResourceShare(device="/dev/ost0", read=pb.Share(ceiling_bps=MB))]),
            users=[pb.User(name=u, uid=uids[u], priority=priorities[u], active=u in users) for u in uids])

    reconciler.apply(state(1, ["alice", "bob", "carol"]))
    assert reconciler.errors == []
    rates = {u: rules_everywhere(oss, f"vnode_{u}")[("regular", 0)].rate for u in uids}
    assert rates == {"alice": 2, "bob": 4, "carol": 4}     # floor(share / (4 MiB x 4 CPTs))

    oss.serve(500, "dd.500", offered_per_cpt=1, seconds=4, cpts=(0,))
    reconciler.usage_report("oss1")
    alice = reconciler.last_sample.usage["vnode.alice"].devices
    assert [c.read_bytes for c in alice.values()] == [4 * 4 * MiB]

    reconciler.apply(state(2, ["bob"]))                    # alice and carol went idle
    listing = RuleList.parse(oss.run("get_param", "-n", f"{SERVICE}.nrs_tbf_rule").stdout)
    assert listing.names() == {"vnode_bob", "default"}


def test_standin_a_pass_reads_the_rule_list_once_however_many_users(oss, tmp_path):
    """One `get_param nrs_tbf_rule` per reconcile pass and per usage read, not one per VNode
    (each is an lctl process); a rule the pass just wrote is read again only if asked for."""
    backend = make_backend(oss, tmp_path)
    reconciler = Reconciler(backend, NoHandlers(), {"/dev/ost0": OST0})
    users = {f"user{i}": 500 + i for i in range(6)}
    state = pb.DesiredState(
        generation=1, node_id="oss1",
        vnodes=[pb.VNodeSpec(user=u, uid=uid, priority=4, shares=[
            pb.ResourceShare(device="/dev/ost0", read=pb.Share(ceiling_bps=100 * MB), write=pb.Share(ceiling_bps=100 * MB))]) for u, uid in users.items()],
        default_vnode=pb.VNodeSpec(user=""), users=[pb.User(name=u, uid=uid, priority=4, active=True)
                                                    for u, uid in users.items()])
    reconciler.apply(state)                                  # starts TBF and six rules
    assert reconciler.errors == [] and len(backend.vnodes()) == 6
    reads = []
    get_param = backend.lctl.get_param
    backend.lctl.get_param = lambda param: reads.append(param) or get_param(param)
    reconciler.apply(state)                                  # a resync: nothing to change
    assert sum(p.endswith("nrs_tbf_rule") for p in reads) == 1
    reads.clear()
    oss.run("set_param", f"{SERVICE}.nrs_tbf_rule=change vnode_user3 rate=77")   # a hand edit
    reconciler.apply(state)
    assert rules_everywhere(oss, "vnode_user3")[("regular", 0)].rate == 5         # restored
    assert sum(p.endswith("nrs_tbf_rule") for p in reads) == 1
    reads.clear()
    for uid in users.values():
        oss.serve(uid, f"dd.{uid}", offered_per_cpt=1, seconds=4, cpts=(0,))
    reconciler.usage_report("oss1")
    reconciler.usage_report("oss1")
    assert sum(p.endswith("nrs_tbf_rule") for p in reads) == 2


class HandlersThatMustNotBeScanned:
    name = "must-not-scan"
    shared_process = True

    def scan(self, identity):
        raise AssertionError("a backend without a thread placer needs no handler discovery")


def test_standin_backend_has_no_thread_placer_so_nothing_tries_to_place_for_it(oss, tmp_path):
    """TBF rules match a uid: no do-nothing placement, and callers see that from `placer`."""
    from vnode_sync.agents.compute.placement import place_processes

    backend = make_backend(oss, tmp_path)
    assert backend.placer is None
    assert not any(hasattr(backend, m) for m in ("members", "place", "release"))
    with pytest.raises(Unsupported, match="lustre-tbf cannot place job processes: it has no thread placer"):
        place_processes(backend, "alice", [1])
    reconciler = Reconciler(backend, HandlersThatMustNotBeScanned(), {"/dev/ost0": OST0})
    reconciler.apply(pb.DesiredState(
        generation=1, node_id="oss1",
        vnodes=[pb.VNodeSpec(user="alice", uid=500, priority=4,
                             shares=[pb.ResourceShare(device="/dev/ost0", read=pb.Share(ceiling_bps=100 * MB), write=pb.Share(ceiling_bps=100 * MB))])],
        default_vnode=pb.VNodeSpec(user=""), users=[pb.User(name="alice", uid=500, priority=4, active=True)]))
    assert reconciler.errors == []
    assert reconciler.place_handlers() == 0
    assert backend.vnodes() == [ALICE]


# ---- jobs as VNodes (issue 61 item 3), against the stand-in ----------------------------------------

ALICE_JOB = vnode_name("alice.1234")


def job_state(generation, jobs=(("1234", 100),), alice_mbps=100, users=("alice",)):
    """alice (uid 500) active with her running jobs as VNodes (`alice.<job>`, each its own share)."""
    def shares(mbps):
        return [pb.ResourceShare(device="/dev/ost0", read=pb.Share(ceiling_bps=mbps * MB),
                                 write=pb.Share(ceiling_bps=mbps * MB))]
    return pb.DesiredState(
        generation=generation, node_id="oss1",
        vnodes=[*(pb.VNodeSpec(user=u, uid=500, priority=4, shares=shares(alice_mbps)) for u in users),
                *(pb.VNodeSpec(user=f"alice.{job}", uid=500, priority=4, shares=shares(mbps), job=job, job_user="alice")
                  for job, mbps in jobs)],
        default_vnode=pb.VNodeSpec(user=""),
        users=[pb.User(name="alice", uid=500, priority=4, active=True)])


def listed(oss, queue="regular", cpt=0):
    return [str(r) for r in RuleList.parse(oss.run("get_param", "-n", f"{SERVICE}.nrs_tbf_rule").stdout)
            .queues[queue][cpt]]


@pytest.mark.parametrize("policy, job_expr, user_expr", [("jobid", "{1234.500}", "{*.500}"),
                                                         ("generic", "jobid={1234.500}", "uid={500}")])
def test_standin_a_job_vnode_is_a_rule_on_its_job_id_ahead_of_its_users(oss, tmp_path, policy, job_expr, user_expr):
    """Not a second rule over the user's uid: a rule on the job's Lustre job id ("%j.%u"), which the
    job's RPCs meet before their user's rule; the job's end stops it."""
    backend = make_backend(oss, tmp_path, policy=policy)
    reconciler = Reconciler(backend, NoHandlers(), {"/dev/ost0": OST0})
    reconciler.apply(job_state(1, jobs=(("1234", 200),), alice_mbps=100))
    assert reconciler.errors == []
    for queue, cpt in rules_everywhere(oss, "default"):
        assert listed(oss, queue, cpt) == [f"vnode_J1234 {job_expr} 11, ref 0", f"vnode_alice {user_expr} 5, ref 0",
                                           f"default {'*' if policy == 'generic' else '{*}'} 10000, ref 0"]
    assert backend.vnodes() == [ALICE, ALICE_JOB]
    assert oss.serve(500, "1234.500", offered_per_cpt=50, seconds=1, cpts=(0,)) == 11    # the job's rate
    assert oss.serve(500, "77.500", offered_per_cpt=50, seconds=1, cpts=(0,)) == 5       # alice's other work
    assert backend.degraded() == []

    reconciler.apply(job_state(2, jobs=()))                   # the job ended
    assert reconciler.errors == []
    assert listed(oss)[:-1] == [f"vnode_alice {user_expr} 5, ref 1"]      # ref: alice's RPCs bound it
    assert backend.vnodes() == [ALICE]


def test_standin_a_users_rule_started_again_is_put_behind_its_jobs(oss, tmp_path):
    """A rule started goes to the top of the list: a user's rule restored after a hand stop would take
    its jobs' RPCs, so the job's rule is started again right before it (rank=)."""
    backend = make_backend(oss, tmp_path, policy="jobid")
    reconciler = Reconciler(backend, NoHandlers(), {"/dev/ost0": OST0})
    reconciler.apply(job_state(1))
    oss.run("set_param", f"{SERVICE}.nrs_tbf_rule=stop vnode_alice")
    reconciler.apply(job_state(1))
    assert reconciler.errors == []
    assert [line.split()[0] for line in listed(oss, "high_priority", 3)] == ["vnode_J1234", "vnode_alice", "default"]
    assert any("came after its user's rule vnode_alice" in n for n in backend.notes)


def test_standin_uid_policy_keeps_a_jobs_io_under_its_users_rule_carrying_both_shares(oss, tmp_path):
    """`tbf uid` cannot tell a job's RPCs from its user's: no duplicate uid rule, one degraded line, and
    the user's rule carries the user's share plus its jobs' (the sum the center gave them together)."""
    backend = make_backend(oss, tmp_path)
    reconciler = Reconciler(backend, NoHandlers(), {"/dev/ost0": OST0})
    reconciler.apply(job_state(1, jobs=(("1234", 100), ("1235", 100)), alice_mbps=100))
    assert reconciler.errors == []
    assert listed(oss) == ["vnode_alice {500} 17, ref 0", "default {*} 10000, ref 0"]   # 300 MB/s: 17 per CPT
    assert reconciler.degraded == [
        "lustre.policy uid cannot tell a job's RPCs from its user's: 2 job VNode(s) (vnode.alice.1234, "
        "vnode.alice.1235) are held by their users' rules, each carrying its user's and its jobs' shares together; "
        "policy jobid or generic gives each job a rule of its own"]
    assert backend.vnodes() == [ALICE, ALICE_JOB, vnode_name("alice.1235")]

    reconciler.apply(job_state(2, jobs=(("1234", 100),)))     # job 1235 ended: its share leaves alice's rule
    assert listed(oss)[0] == "vnode_alice {500} 11, ref 0"    # 200 MB/s
    reconciler.apply(job_state(3, jobs=()))
    assert listed(oss)[0] == "vnode_alice {500} 5, ref 0"
    assert reconciler.degraded == [] and backend.vnodes() == [ALICE]


@pytest.mark.parametrize("policy", ["uid", "jobid"])
def test_standin_job_stats_count_for_the_job_not_twice_for_its_user(oss, tmp_path, policy):
    backend = make_backend(oss, tmp_path, policy=policy)
    reconciler = Reconciler(backend, NoHandlers(), {"/dev/ost0": OST0})
    reconciler.apply(job_state(1))
    oss.serve(500, "1234.500", offered_per_cpt=2, seconds=10, cpts=(0,))            # the job VNode's
    oss.serve(500, "77.500", offered_per_cpt=1, seconds=10, cpts=(0,), write=True)  # a job without a VNode: alice's
    oss.serve(501, "1234.501", offered_per_cpt=3, seconds=10, cpts=(0,))            # bob's job of the same id
    usage = backend.usage()
    assert set(usage) == {ALICE, ALICE_JOB}
    job, user = usage[ALICE_JOB].devices[OST0], usage[ALICE].devices[OST0]
    assert (job.read_ios, job.write_ios, job.read_bytes) == (20, 0, 20 * 4 * MiB)
    assert (user.read_ios, user.write_ios, user.write_bytes) == (0, 10, 10 * 4 * MiB)


def test_standin_job_rules_are_in_the_ledger_for_a_restart_and_teardown(oss, tmp_path):
    first = make_backend(oss, tmp_path, policy="jobid")
    Reconciler(first, NoHandlers(), {"/dev/ost0": OST0}).apply(job_state(1))
    restarted = make_backend(oss, tmp_path, policy="jobid")       # same ledger file, nothing in memory
    restarted.setup()
    assert restarted.vnodes() == [ALICE, ALICE_JOB]
    oss.serve(500, "1234.500", offered_per_cpt=1, seconds=3, cpts=(0,))
    assert restarted.usage()[ALICE_JOB].devices[OST0].read_ios == 3     # its job id read back from the ledger
    reconciler = Reconciler(restarted, NoHandlers(), {"/dev/ost0": OST0})
    reconciler.apply(job_state(2))                                       # its own rules: no collision
    assert reconciler.errors == []
    restarted.teardown()
    assert RuleList.parse(oss.run("get_param", "-n", f"{SERVICE}.nrs_tbf_rule").stdout).names() == {"default"}


def test_standin_a_site_rule_with_a_job_rules_name_is_a_collision(oss, tmp_path):
    backend = make_backend(oss, tmp_path, policy="jobid")
    backend.setup()
    oss.run("set_param", f"{SERVICE}.nrs_tbf_rule=start vnode_J1234 jobid={{1234.900}} rate=9")
    backend.ensure_vnode(ALICE_JOB, 500, job="1234")
    with pytest.raises(RuleCollision, match="vnode_J1234"):
        backend.apply_limits(ALICE_JOB, share(100, 100))
    assert listed(oss)[0] == "vnode_J1234 {1234.900} 9, ref 0"


def test_job_vnodes_are_checked_before_anything_reaches_lctl(oss, tmp_path):
    backend = make_backend(oss, tmp_path, policy="jobid")
    with pytest.raises(InvalidArgument, match="needs the job id"):
        backend.ensure_vnode(ALICE_JOB, 500)
    with pytest.raises(InvalidArgument, match="is not VNode vnode.alice.1234's"):
        backend.ensure_vnode(ALICE_JOB, 500, job="1235")
    with pytest.raises(InvalidArgument, match="invalid job id"):
        backend.ensure_vnode(vnode_name("alice.1234"), 500, job="1234 rate=1")
    assert backend.vnodes() == []


def test_standin_a_job_id_lustre_cannot_carry_is_held_by_its_users_rule(oss, tmp_path):
    """Lustre job ids are under 32 characters (LUSTRE_JOBID_SIZE): a longer one never matches."""
    backend = make_backend(oss, tmp_path, policy="jobid", jobid_job_rule="{job}.{uid}")
    reconciler = Reconciler(backend, NoHandlers(), {"/dev/ost0": OST0})
    job = "4242.pbs-server-01.cluster.example"
    state = job_state(1, jobs=())
    state.vnodes.append(pb.VNodeSpec(user=f"alice.{job}", uid=500, job=job, job_user="alice",
                                     shares=job_state(1).vnodes[1].shares))
    reconciler.apply(state)
    assert reconciler.errors == []
    assert [line.split()[0] for line in listed(oss)] == ["vnode_alice", "default"]
    assert listed(oss)[0] == "vnode_alice {*.500} 11, ref 0"          # alice's 100 MB/s and the job's
    assert "over 31 characters" in reconciler.degraded[0]


def test_job_rule_names_are_tbf_names_apart_from_users_and_each_other():
    def free(name):
        return False
    assert job_rule_name("vnode_", "vnode.alice.1234", "1234", free) == "vnode_J1234"
    assert job_rule_name("vnode_", "vnode.alice.12_3", "12_3", free) == "vnode_J12_3"
    pbs = job_rule_name("vnode_", "vnode.alice.123-4.server", "123[4].server", free)
    long_slurm = job_rule_name("vnode_", "vnode.alice.123456789", "123456789", free)
    for name in (pbs, long_slurm):
        assert name.startswith("vnode_H") and len(name) == 15 and re.fullmatch(r"\w+", name)
    # the same Slurm id under another user (two clusters, one file system): the digest of its VNode
    other = job_rule_name("vnode_", "vnode.bob.1234", "1234", lambda name: name == "vnode_J1234")
    assert other.startswith("vnode_H") and other != pbs
    with pytest.raises(InvalidArgument, match="another VNode's"):
        job_rule_name("vnode_", "vnode.bob.1234", "1234", lambda name: True)


def test_standin_lctl_ranks_rules_and_matches_job_ids_as_lustre_does(oss, tmp_path):
    """nrs_tbf.c: `start ... rank=R` inserts right before R, `change N rank=R` moves N right before R,
    an unknown R is ENOENT; a jobid value without '*' matches exactly ('[' is no pattern)."""
    make_backend(oss, tmp_path, policy="jobid").setup()
    for command in ("start b jobid={*.500} rate=2", "start a jobid={9.500} rate=1 rank=b",
                    "start top jobid={123[4].srv} rate=3"):
        assert oss.run("set_param", f"{SERVICE}.nrs_tbf_rule={command}").returncode == 0
    assert [line.split()[0] for line in listed(oss)] == ["top", "a", "b", "default"]
    assert oss.run("set_param", f"{SERVICE}.nrs_tbf_rule=change top rank=default").returncode == 0
    assert [line.split()[0] for line in listed(oss)] == ["a", "b", "top", "default"]
    assert "No such file or directory" in oss.run("set_param", f"{SERVICE}.nrs_tbf_rule=start c jobid={{1.5}} "
                                                               "rank=nothing").stderr
    assert oss.serve(500, "9.500", offered_per_cpt=10, seconds=1) == 1
    assert oss.serve(500, "1234.srv", offered_per_cpt=10, seconds=1) == 10          # default: '[4]' is literal
    assert oss.serve(500, "123[4].srv", offered_per_cpt=10, seconds=1) == 3


def test_job_stats_keep_job_ids_as_text():
    """"%j.%u" gives job ids like 1234.500, which YAML's resolver would read as the float 1234.5."""
    text = ("job_stats:\n- job_id:          1234.500\n  snapshot_time:   1700000000\n"
            "  read_bytes:      { samples:           3, unit: bytes, min: 4194304, max: 4194304, sum: 12582912, "
            "sumsq: 0 }\n- job_id:          007\n")
    assert [(j.job_id, j.read_rpcs, j.read_bytes) for j in JobStat.parse_all(text)] == \
        [("1234.500", 3, 12582912), ("007", 0, 0)]
    assert JobStat.parse_all("job_stats:\n") == []


def test_standin_an_agent_killed_between_recording_and_starting_a_job_rule_finds_it_its_own(oss, tmp_path):
    """The ledger is written before `start` (as for users' rules): killed in between, the restarted
    agent sees a rule of its own gone missing, not a site's rule, and starts it ahead of its user's."""
    first = make_backend(oss, tmp_path, policy="jobid")
    set_param = first.lctl.set_param

    def killed_at_the_jobs_start(param, value):
        if value.startswith("start vnode_J1234"):
            raise SystemExit("killed")
        set_param(param, value)

    first.lctl.set_param = killed_at_the_jobs_start
    with pytest.raises(SystemExit):
        Reconciler(first, NoHandlers(), {"/dev/ost0": OST0}).apply(job_state(1))
    assert "vnode_J1234" in RuleLedger(str(tmp_path / "ledger.json")).rules
    assert [line.split()[0] for line in listed(oss)] == ["vnode_alice", "default"]

    restarted = make_backend(oss, tmp_path, policy="jobid")
    reconciler = Reconciler(restarted, NoHandlers(), {"/dev/ost0": OST0})
    reconciler.apply(job_state(1))
    assert reconciler.errors == []
    assert [line.split()[0] for line in listed(oss, "high_priority", 2)] == ["vnode_J1234", "vnode_alice", "default"]
    assert any("vnode_J1234 was stopped outside vnode-sync" in n for n in restarted.notes)


def test_job_stats_entries_are_charged_to_a_job_by_its_lustre_job_id_as_tbf_reads_it():
    from vnode_sync.kernel.lustre_jobs import JobStatCharging
    charging = JobStatCharging.of({"vnode.alice.1234": "1234.500", "vnode.alice.77": "77.500.*",
                                   "vnode.bob.5-1.srv": "5[1].srv.501"})
    assert charging.job_vnode("1234.500") == "vnode.alice.1234"
    assert charging.job_vnode("1234.5001") is None                        # no '*': exact
    assert charging.job_vnode("77.500.cn7") == "vnode.alice.77"           # "%j.%u.%H" with '{job}.{uid}.*'
    assert charging.job_vnode("5[1].srv.501") == "vnode.bob.5-1.srv"
    assert charging.job_vnode("51.srv.501") is None                       # '[1]' is text, not a pattern
