"""The work-conserving control loop's state: demand from usage, allocations, hysteresis, pushes."""

import math

import pytest

from vnode_sync.coordinator.allocation import Allocator, DemandEstimator
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
    """Cumulative counters per (user, node), as agents report them, advanced at given rates."""

    def __init__(self, allocator):
        self.allocator, self.t, self.bytes = allocator, 1000.0, {}

    def step(self, rates: dict, seconds=1.0):
        self.t += seconds
        for node in ("dn0", "dn1"):
            usage = []
            for (u, n), rate in rates.items():
                if n == node:
                    self.bytes[(u, n)] = self.bytes.get((u, n), 0) + int(rate * seconds)
            for (u, n), total in self.bytes.items():   # an agent reports every VNode, idle or not
                if n == node:
                    usage.append(pb.UserUsage(user=u, device="/dev/sdb", read_bytes=total))
            self.allocator.observe(pb.UsageReport(node_id=node, sampled_at_unix=self.t, usage=usage))
        return self.t


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
    assert est.update("k", [0.0], None, False, 0) == 0
    assert est.update("k", [9 * MB], 10 * MB, False, 1) == math.inf           # at 90% of its allocation
    assert est.update("k", [2 * MB], 10 * MB, True, 2) == math.inf            # the backend says held
    assert est.update("k", [4 * MB], 10 * MB, False, 3) == 9 * MB * 1.25      # a dip: the recent peak holds
    assert est.update("k", [], 10 * MB, False, 4) == 9 * MB * 1.25            # no report: nothing new
    assert est.update("k", [1 * MB], 10 * MB, False, 5) == 4 * MB * 1.25      # 9 has left the window
    assert est.update("k", [0.0, 0.0, 0.0], 10 * MB, False, 6) == 0           # three idle reports in one tick
    est.raised("k", 7)
    assert est.update("k", [1 * MB], 30 * MB, False, 8) == 30 * MB            # just raised: not lowered yet


@pytest.mark.parametrize("policy,message", [
    ({"allocation": "fair"}, "policy.allocation: got 'fair'; allowed: one of static, work-conserving"),
    ({"allocation": "work-conserving", "mode": "weight"},
     "policy.mode: got 'weight'; allowed: throttle with allocation work-conserving (it sets bytes/s limits)"),
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
    returning = allocator.observe(pb.UsageReport(node_id="dn0", sampled_at_unix=feed.t, usage=[
        pb.UserUsage(user="bob", device="/dev/sdb", read_bytes=int(0.6 * probe * 0.5))]))
    assert returning, "60% of his probe: bob is back"
    allocator.tick(users, feed.t)
    assert given(allocator, "dn0")["bob"] == pytest.approx(20 * MB, rel=0.05)   # his weighted share
