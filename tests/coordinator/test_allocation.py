"""The work-conserving control loop's state: demand from usage, allocations, hysteresis, pushes."""

import math
import random

import pytest

from tests.fakes.reports import usage_report
from vnode_sync.agents.storage.demand_summary import Entry, packed
from vnode_sync.coordinator.allocation import Allocator, DemandEstimator
from vnode_sync.coordinator.usage_ledger import UsageLedger
from vnode_sync.coordinator.config import parse_config
from vnode_sync.coordinator.store import UserRecord
from vnode_sync.wire import vnode_pb2 as pb

MB = 1_000_000
BW = 60 * MB
CONFIG = {"policy": {"allocation": "work-conserving", "probe_fraction": 0.02},
          "storage_nodes": [{"id": dn, "devices": [{"name": "/dev/sdb", "read_bps": BW, "write_bps": BW}]}
                            for dn in ("dn0", "dn1")]}


def user(name, priority, active=True, reservation=0, limit=0):
    return UserRecord(name, 1000 + priority, priority, active, 0, None, False, reservation, limit)


class Feed:
    """Each node's full report of every VNode it has, idle or not, at the rates given for a step."""

    def __init__(self, allocator):
        self.allocator, self.t, self.seen = allocator, 1000.0, set()
        self.ledger = UsageLedger()

    def step(self, rates: dict, seconds=1.0):
        self.t += seconds
        self.seen |= set(rates)
        for node in ("dn0", "dn1"):
            observe(self.allocator, self.ledger, usage_report(node, self.t, {
                (u, "/dev/sdb"): (rates.get((u, n), 0.0), 0.0) for u, n in self.seen if n == node}))
        return self.t


def observe(allocator, ledger, report) -> bool:
    """A report as the coordinator takes it: booked in the ledger, whose samples the allocator reads."""
    return allocator.observe(report.node_id, ledger.observe(report, set(report.demand.users)))


def given(allocator, node):
    return {u: s.allocated_read_bps for u, s in allocator.status(node).items()}


def saturate(allocator, feed, users, now, ticks=3):
    """Each user reads at whatever it is given (it always wants more)."""
    changed = set()
    for _ in range(ticks):
        rates = {(u.name, n): given(allocator, n).get(u.name, 30 * MB) for u in users for n in ("dn0", "dn1")}
        now = feed.step(rates)
        changed = allocator.tick(users, now)
    return now, changed


def test_two_saturating_users_get_weighted_shares_on_every_node():
    allocator = Allocator(parse_config(CONFIG))
    users = [user("alice", 8), user("bob", 4)]
    saturate(allocator, Feed(allocator), users, 0)
    for node in ("dn0", "dn1"):
        assert given(allocator, node)["alice"] == pytest.approx(40 * MB, rel=0.01)
        assert given(allocator, node)["bob"] == pytest.approx(20 * MB, rel=0.01)


def test_an_idle_users_share_is_lent_within_three_reports_and_taken_back_in_one():
    allocator = Allocator(parse_config(CONFIG))
    feed = Feed(allocator)
    users = [user("alice", 8), user("bob", 4)]
    now, _ = saturate(allocator, feed, users, 0)
    for _ in range(3):   # bob stops; alice reads all she gets
        now = feed.step({("alice", n): given(allocator, n)["alice"] for n in ("dn0", "dn1")})
        allocator.tick(users, now)
    for node in ("dn0", "dn1"):
        assert given(allocator, node)["alice"] >= 0.9 * BW
        assert given(allocator, node)["bob"] == pytest.approx(0.02 * BW, rel=0.01)   # the probe
    # bob returns: he reads all of his probe, so he is taken to want more: his share at once.
    now = feed.step({**{("alice", n): given(allocator, n)["alice"] for n in ("dn0", "dn1")},
                     **{("bob", n): given(allocator, n)["bob"] for n in ("dn0", "dn1")}})
    allocator.tick(users, now)
    for node in ("dn0", "dn1"):
        assert given(allocator, node)["bob"] == pytest.approx(20 * MB, rel=0.01)


def test_an_unchanged_allocation_is_not_pushed_again():
    allocator = Allocator(parse_config(CONFIG))
    users = [user("alice", 8), user("bob", 4)]
    feed = Feed(allocator)
    now, _ = saturate(allocator, feed, users, 0)
    sequence = allocator.node_allocation("dn0")[0]
    now, changed = saturate(allocator, feed, users, now, ticks=5)
    assert changed == set()
    assert allocator.node_allocation("dn0")[0] == sequence


def test_only_the_node_whose_allocation_moved_is_pushed():
    allocator = Allocator(parse_config(CONFIG))
    users = [user("alice", 8), user("bob", 4)]
    feed = Feed(allocator)
    where = {"alice": "dn0", "bob": "dn1"}
    for _ in range(3):      # alice reads on dn0 only, bob on dn1 only
        allocator.tick(users, feed.step({(u, n): given(allocator, n).get(u, 30 * MB) for u, n in where.items()}))
    sequences = {n: allocator.node_allocation(n)[0] for n in ("dn0", "dn1")}
    changed = set()
    for _ in range(3):      # bob stops: only dn1's allocation moves
        changed |= allocator.tick(users, feed.step({("alice", "dn0"): given(allocator, "dn0")["alice"]}))
    assert changed == {"dn1"}
    assert allocator.node_allocation("dn0")[0] == sequences["dn0"]
    assert allocator.node_allocation("dn1")[0] > sequences["dn1"]


def run_noisy(feed, bob_reads, ticks, seed=1):
    """alice reads 90-100% of what she is given, bob min(given, bob_reads() MB/s); reports every 0.5 s.
    Returns each node's pushes and alice's allocations on dn0, tick by tick."""
    rng = random.Random(seed)
    allocator, users = feed.allocator, [user("alice", 8), user("bob", 4)]
    pushes, alice = {"dn0": 0, "dn1": 0}, []
    for _ in range(ticks):
        rates = {}
        for node in ("dn0", "dn1"):
            now = given(allocator, node)
            rates[("alice", node)] = now.get("alice", 30 * MB) * rng.uniform(0.9, 1.0)
            rates[("bob", node)] = min(now.get("bob", 30 * MB), bob_reads(rng) * MB)
        for node in allocator.tick(users, feed.step(rates, 0.5)):
            pushes[node] += 1
        alice.append(given(allocator, "dn0")["alice"])
    return pushes, alice


def test_a_light_reader_near_its_probe_keeps_it_and_does_not_flip_to_its_share():
    """Reading 1 MB/s against a 1.2 MB/s probe is light, not coming back from idle."""
    allocator = Allocator(parse_config(CONFIG))
    feed = Feed(allocator)
    run_noisy(feed, lambda rng: 1.0, 10)
    pushes, alice = run_noisy(feed, lambda rng: 1.0, 40)
    assert pushes == {"dn0": 0, "dn1": 0}
    assert given(allocator, "dn0")["bob"] <= 1.5 * MB and min(alice) >= 0.95 * BW


@pytest.mark.parametrize("seed", range(5))
def test_a_noisy_reader_below_its_share_does_not_make_allocations_oscillate(seed):
    """bob reads 10 MB/s +-20% (his share is 20): his allocation settles above his peaks, and
    neither it nor alice's moves at every tick."""
    feed = Feed(Allocator(parse_config(CONFIG)))
    run_noisy(feed, lambda rng: 10 * rng.uniform(0.8, 1.2), 12, seed)
    pushes, alice = run_noisy(feed, lambda rng: 10 * rng.uniform(0.8, 1.2), 60, seed + 100)
    assert max(pushes.values()) <= 3, pushes              # 30 s: at most one new allocation per 10 s
    assert (max(alice) - min(alice)) / max(alice) <= 0.1, (min(alice), max(alice))


def test_held_at_its_limit_counts_only_for_the_direction_the_user_moves_bytes_in():
    """Lustre TBF says 'held' per user: a reader held by its rule wants more reads, not writes."""
    allocator = Allocator(parse_config(CONFIG))
    users = [user("alice", 8)]
    ledger = UsageLedger()
    for t in (1000.0, 1000.5, 1001.0):
        observe(allocator, ledger, pb.UsageReport(node_id="dn0", sampled_at_unix=t, demand=packed(
            {("alice", "/dev/sdb"): Entry(20 * MB, 0.0, True, False, 40 * MB, 0.0)}, True, [])))
    allocator.tick(users, 1001.0)
    status = allocator.status("dn0")["alice"]
    assert status.demand_read_bps == math.inf and status.demand_write_bps < math.inf


def test_inactive_users_get_no_allocation_and_a_limit_is_a_ceiling():
    allocator = Allocator(parse_config(CONFIG))
    users = [user("alice", 8, limit=10 * MB), user("bob", 4), user("carol", 50, active=False)]
    saturate(allocator, Feed(allocator), users, 0)
    shares = given(allocator, "dn0")
    assert "carol" not in shares
    assert shares["alice"] == 10 * MB
    assert shares["bob"] == pytest.approx(50 * MB, rel=0.01)


def test_the_pushed_allocation_lists_each_users_device_bytes_per_second():
    allocator = Allocator(parse_config(CONFIG))
    allocator.tick([user("alice", 8)], 1000.0)
    state = pb.DesiredState.FromString(allocator.node_allocation("dn0")[1])
    assert state.allocation.fallback_seconds == 30.0
    (alice,) = state.allocation.users
    assert alice.user == "alice" and alice.shares[0].device == "/dev/sdb"
    assert alice.shares[0].read_bps == pytest.approx(0.02 * BW, rel=0.01)


def test_estimator_unbounded_at_allocation_else_recent_peak_with_headroom():
    est = DemandEstimator()
    probe = 1 * MB

    def update(rates, allocated, now, held=False, returning=False):
        return est.update("k", [(r * MB, 0.25) for r in rates], allocated, held, now, probe, returning)

    assert update([0.0], None, 0) == 0 and est.idle("k")                     # never read: idle
    assert update([9, 9], 10 * MB, 1) == math.inf                           # two reports at 90% of it
    assert update([2], 10 * MB, 2, held=True) == math.inf                   # the backend says held
    assert update([4], 10 * MB, 3) == 9 * MB * 1.25                         # mean 3: the 3-s peak holds
    assert est.update("k", [], 10 * MB, False, 4, probe) == 9 * MB * 1.25    # no report: nothing new
    assert update([8, 8.5], 12 * MB, 5) == 12 * MB                           # peak 9 + 25% is within 20%: kept
    for t in range(6, 18):                                                  # 3 s of 1 MB/s: the peak left
        demand = update([1], 12 * MB, t)
    assert demand == 1.25 * MB and not est.idle("k")                        # light, not idle
    assert update([0.1, 0.0, 0.2], 1.25 * MB, 19) == 0.2 * MB * 1.25 and est.idle("k")   # 0.75 s quiet: idle
    assert update([], 1 * MB, 20, returning=True) == math.inf               # an idle user reading again
    est.raised("k", 21)
    assert update([1], 30 * MB, 23) == 30 * MB                              # just raised: not lowered yet
    assert update([1], 30 * MB, 21 + 2.5) == 1.25 * MB                      # after the grace, it is
    est.raised("k", 25)
    assert update([0.0, 0.0], 30 * MB, 25.5) == 0                           # idle: no grace to wait out


@pytest.mark.parametrize("policy,message", [
    ({"allocation": "fair"}, "policy.allocation: got 'fair'; allowed: one of static, work-conserving"),
    ({"allocation": "work-conserving", "mode": "shares"}, "policy.mode: got 'shares'; allowed: one of throttle, weight"),
    ({"allocation": "work-conserving", "control_seconds": 0},
     "policy.control_seconds: got 0; allowed: a number from 0.05 to 3600 (seconds)"),
    ({"allocation": "work-conserving", "fallback_seconds": "soon"},
     "policy.fallback_seconds: got 'soon'; allowed: a number from 1 to 86400 (seconds)"),
])
def test_bad_allocation_settings_are_refused_in_one_line(policy, message):
    from vnode_sync.errors import InvalidSetting
    with pytest.raises(InvalidSetting) as e:
        parse_config({**CONFIG, "policy": policy}, "c.yaml")
    assert str(e.value) == f"config c.yaml: {message}"


def test_work_conserving_no_longer_needs_mode_throttle():
    """It shares by weight wherever the backend can, so mode weight (BFQ) is accepted with it."""
    assert parse_config({**CONFIG, "policy": {"allocation": "work-conserving", "mode": "weight"}}).policy.mode == "weight"


def test_static_is_the_default_and_makes_no_allocator():
    from vnode_sync.coordinator.cluster import Cluster
    from vnode_sync.coordinator.store import StateStore
    config = parse_config({k: v for k, v in CONFIG.items() if k != "policy"})
    assert config.policy.allocation == "static"
    assert Cluster(config, StateStore(":memory:")).allocator is None


def test_a_report_of_a_user_back_from_idle_asks_for_a_tick_now_and_it_is_unbounded():
    allocator = Allocator(parse_config(CONFIG))
    users = [user("alice", 8), user("bob", 4)]
    feed = Feed(allocator)
    for _ in range(3):       # alice reads all she gets, bob nothing: he is held at his probe
        allocator.tick(users, feed.step({("alice", "dn0"): given(allocator, "dn0").get("alice", 30 * MB),
                                         ("bob", "dn0"): 0}))
    probe = given(allocator, "dn0")["bob"]
    assert probe == pytest.approx(0.02 * BW, rel=0.01)
    feed.t += 0.5
    returning = observe(allocator, feed.ledger, usage_report("dn0", feed.t, {("bob", "/dev/sdb"): (0.6 * probe, 0.0)},
                                                             full=False))
    assert returning, "60% of his probe: bob is back"
    allocator.tick(users, feed.t)
    assert given(allocator, "dn0")["bob"] == pytest.approx(20 * MB, rel=0.05)   # his weighted share
