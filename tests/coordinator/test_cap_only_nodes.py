"""Nodes whose backend can only cap (blkio throttle without BFQ, io.max, Lustre TBF) in the one
weight step: sent the step's allocation as caps, with the room left and a probe, only when a cap moves;
and the one `sharing` setting that decides whether there is a step at all."""

import itertools
import time

import pytest

from vnode_sync.agents.storage.allocation import allocated_ceilings, effective_state
from vnode_sync.agents.storage.demand_summary import Entry, packed
from vnode_sync.coordinator.config import parse_config
from vnode_sync.coordinator.control.node_edge import CAPS_ONLY, Edge
from vnode_sync.coordinator.state.store import UserRecord
from vnode_sync.coordinator.state.usage_ledger import UsageLedger
from vnode_sync.coordinator.control.weight_control import WeightControl
from vnode_sync.errors import InvalidSetting
from vnode_sync.wire import vnode_pb2 as pb

MB = 1_000_000
BW = 60 * MB
NODES = ("dn0", "dn1")
CONFIG = {"policy": {"sharing": "work-conserving", "probe_fraction": 0.03},
          "storage_nodes": [{"id": dn, "devices": [{"name": "/dev/sdb", "read_bps": BW, "write_bps": BW}]}
                            for dn in NODES]}


def user(name, priority, limit=0, active=True):
    return UserRecord(name, 1000 + priority, priority, active, 0, None, False, 0, limit)


@pytest.fixture
def capped():
    """A WeightControl over two cap-only nodes, and the read caps it last sent: node -> user -> bytes/s."""
    ledger = UsageLedger()
    control = WeightControl(parse_config(CONFIG), ledger, itertools.count(1).__next__)
    for node in NODES:
        control.register(node, CAPS_ONLY)

    def caps(node):
        sequence, message = control.node_allocation(node)
        given = allocated_ceilings(pb.DesiredState.FromString(message).allocation.shares) if sequence else {}
        return {name: ceilings[0] for (name, device), ceilings in given.items() if device == "/dev/sdb"}

    return control, ledger, caps


def report(ledger, node, flows, users=("alice", "bob", "carol")):
    """A full demand summary, as the agent's estimate sends it: user -> (read bytes/s, held)."""
    entries = {(u, "/dev/sdb"): Entry(rate, 0.0, held, False, rate * (4 if held else 1), 0.0)
               for u, (rate, held) in flows.items()}
    ledger.observe(pb.UsageReport(node_id=node, sampled_at_unix=time.time(), demand=packed(entries, True, [])),
                   set(users))


def test_two_users_held_at_their_caps_get_weighted_caps_on_every_node(capped):
    control, ledger, caps = capped
    users = [user("alice", 8), user("bob", 4)]
    for node in NODES:
        report(ledger, node, {"alice": (30 * MB, True), "bob": (30 * MB, True)})
    assert control.tick(users) == set(NODES)
    for node in NODES:
        assert caps(node)["alice"] == pytest.approx(40 * MB, rel=0.01)
        assert caps(node)["bob"] == pytest.approx(20 * MB, rel=0.01)
        assert control.given(node)["bob"].allocated_read_bps == caps(node)["bob"]   # status shows the caps sent
    assert control.tick(users) == set()      # nothing moved: nothing sent again


def test_an_idle_users_share_is_lent_in_one_tick_and_taken_back_in_the_next_once_held_at_its_probe(capped):
    """bob stops: his cap falls to his probe and alice's rises to the node. He comes back: his agent sees
    him held at the probe (vnode_sync.kernel.held) and the next tick gives him his weighted share."""
    control, ledger, caps = capped
    users = [user("alice", 8), user("bob", 4)]
    report(ledger, "dn0", {"alice": (40 * MB, True), "bob": (20 * MB, True)})
    control.tick(users)
    report(ledger, "dn0", {"alice": (40 * MB, True), "bob": (0.0, False)})
    assert control.tick(users) == {"dn0"}
    probe = 0.03 * BW
    assert caps("dn0")["alice"] == pytest.approx(BW, rel=0.01)
    assert caps("dn0")["bob"] == pytest.approx(probe, rel=0.01)
    report(ledger, "dn0", {"alice": (BW, True), "bob": (probe, True)})
    assert control.tick(users) == {"dn0"}
    assert caps("dn0")["bob"] == pytest.approx(20 * MB, rel=0.02)
    assert caps("dn0")["alice"] == pytest.approx(40 * MB, rel=0.02)


def test_a_light_user_may_grow_into_the_room_left_and_a_limit_is_a_ceiling(capped):
    control, ledger, caps = capped
    users = [user("alice", 8), user("bob", 4, limit=10 * MB), user("carol", 4, active=False)]
    report(ledger, "dn0", {"alice": (5 * MB, False), "bob": (10 * MB, True)})
    control.tick(users)
    # 45 MB/s of the node is left: alice, given the 5 she wants, may take it at once; bob stops at his limit
    assert caps("dn0")["alice"] == pytest.approx(50 * MB, rel=0.01)
    assert caps("dn0")["bob"] == 10 * MB
    assert "carol" not in caps("dn0")    # inactive: no cap, the default VNode's


def test_a_cap_only_backend_takes_the_caps_and_drops_weights_and_floors():
    share = pb.ResourceShare(device="/dev/sdb", read=pb.Share(floor_bps=5 * MB))
    state = pb.DesiredState(sharing="work-conserving", devices=[pb.Device(name="/dev/sdb", read_bps=BW, write_bps=BW)],
                            vnodes=[pb.VNodeSpec(user="alice", priority=8, shares=[share])])
    state.allocation.CopyFrom(pb.Allocation(sequence=3, shares=pb.ShareTable(
        users=["alice"], devices=["/dev/sdb"], read_ceilings_bps=[42 * MB], write_ceilings_bps=[7 * MB])))
    applied = effective_state(state, shares_by_weight=False).vnodes[0].shares[0]
    assert (applied.read.ceiling_bps, applied.write.ceiling_bps, applied.read.weight, applied.read.floor_bps) == (
        42 * MB, 7 * MB, 0.0, 0)


def test_a_node_that_registers_again_with_another_backend_is_sent_anew(capped):
    control, ledger, caps = capped
    users = [user("alice", 8), user("bob", 4)]
    report(ledger, "dn0", {"alice": (30 * MB, True), "bob": (30 * MB, True)})
    control.tick(users)
    assert control.tick(users) == set()
    control.register("dn0", Edge(by_weight=True))   # BFQ now: weights, not caps
    assert control.tick(users) == {"dn0"}
    allocation = pb.DesiredState.FromString(control.node_allocation("dn0")[1]).allocation
    table = allocation.shares
    assert list(table.users) == ["alice", "bob"] and len(table.read_weights) == 2 and not table.read_ceilings_bps


@pytest.mark.parametrize("policy,message", [
    ({"allocation": "work-conserving"},
     "policy.allocation: got 'work-conserving'; allowed: no longer a key: policy.sharing replaces allocation and "
     "mode (sharing: static or work-conserving)"),
    ({"mode": "weight"},
     "policy.mode: got 'weight'; allowed: no longer a key: policy.sharing replaces allocation and mode "
     "(sharing: static or work-conserving)"),
    ({"sharing": "fair"}, "policy.sharing: got 'fair'; allowed: one of static, work-conserving"),
    ({"sharing": "work-conserving", "control_seconds": 0},
     "policy.control_seconds: got 0; allowed: a number from 0.05 to 3600 (seconds)"),
])
def test_the_old_keys_and_bad_sharing_settings_are_refused_in_one_line(policy, message):
    with pytest.raises(InvalidSetting) as e:
        parse_config({**CONFIG, "policy": policy}, "c.yaml")
    assert str(e.value) == f"config c.yaml: {message}"


def test_static_is_the_default_and_makes_no_step():
    from vnode_sync.coordinator.cluster import Cluster
    from vnode_sync.coordinator.state.store import StateStore
    config = parse_config({k: v for k, v in CONFIG.items() if k != "policy"})
    assert config.policy.sharing == "static"
    assert Cluster(config, StateStore(":memory:")).weights is None
