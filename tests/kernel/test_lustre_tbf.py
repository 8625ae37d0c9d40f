"""The Lustre NRS TBF backend.

Lustre cannot run on these machines. Every test whose name contains "standin" runs the
backend against tests/lustre_standin/lctl, a STAND-IN for `lctl` modelled on Lustre's
source and manual (docs/lustre.md) -- not against a real OSS. The other tests check
pure value types and arithmetic.
"""

import pytest

from tests.fakes.clock import Clock
from tests.lustre_standin import SERVICE, StandInOss
from vnode_sync.agents.storage.reconciler import Reconciler
from vnode_sync.errors import InvalidArgument, Unsupported
from vnode_sync.kernel.backend import DEFAULT_VNODE, vnode_name
from vnode_sync.kernel.lustre_lctl import Lctl, LctlError
from vnode_sync.kernel.lustre_ledger import RuleLedger
from vnode_sync.kernel.lustre_rates import IoMix, RateConversion, combined_target
from vnode_sync.kernel.lustre_rules import RuleList, RuleMatch, TbfRule, rule_name_for
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
