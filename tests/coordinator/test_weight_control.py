"""The work-conserving loop for nodes whose edges share by weight: the weight step fed by the usage
ledger, each node sent its local weights only when a user's rate there would move, as a packed
WeightTable that the storage agent reads back (agents.storage.allocation)."""

import itertools
import time

import pytest

from vnode_sync.agents.storage.allocation import allocated_shares, effective_state
from vnode_sync.agents.storage.demand_summary import Entry, packed
from vnode_sync.coordinator.config import parse_config
from vnode_sync.coordinator.store import UserRecord
from vnode_sync.coordinator.usage_ledger import UsageLedger
from vnode_sync.coordinator.weight_control import WeightControl
from vnode_sync.wire import vnode_pb2 as pb

MB = 1_000_000
BW = 60 * MB
CONFIG = {"policy": {"allocation": "work-conserving"},
          "storage_nodes": [{"id": dn, "devices": [{"name": "/dev/sdb", "read_bps": BW, "write_bps": BW}]}
                            for dn in ("dn0", "dn1", "dn2")]}


def user(name, priority):
    return UserRecord(name, 1000 + priority, priority, True, 0, None, False, 0, 0)


class Sent(dict):
    """node -> {(user, direction): weight on /dev/sdb}, read back from each node's last message."""

    def __init__(self, control):
        super().__init__()
        self.control = control

    def refresh(self):
        self.clear()
        for node in ("dn0", "dn1", "dn2"):
            sequence, message = self.control.node_allocation(node)
            if sequence:
                given = allocated_shares(pb.DesiredState.FromString(message).allocation)
                self[node] = {(name, k): getattr(shares["/dev/sdb"], f"{d}_weight")
                              for name, shares in given.items() for k, d in enumerate(("read", "write"))}


@pytest.fixture
def control():
    """A WeightControl over dn0 and dn1 (their backends share by weight; dn2 only caps), and what it
    sent each node (refreshed by tick())."""
    ledger = UsageLedger()
    control = WeightControl(parse_config(CONFIG), ledger, itertools.count(1).__next__)
    for node, yes in (("dn0", True), ("dn1", True), ("dn2", False)):
        control.shares_by_weight(node, yes)
    sent = Sent(control)
    tick = control.tick

    def tick_and_read(users):
        changed = tick(users)
        sent.refresh()
        return changed

    control.tick = tick_and_read
    return control, ledger, sent


def report(ledger, node, flows, users=("alice", "bob")):
    """A full demand summary: user -> read bytes/s (held: it wants more than it moves)."""
    entries = {(u, "/dev/sdb"): Entry(rate, 0.0, held, False, rate * (4 if held else 1), 0.0)
               for u, (rate, held) in flows.items()}
    ledger.observe(pb.UsageReport(node_id=node, sampled_at_unix=time.time(), demand=packed(entries, True, [])),
                   set(users))


def test_a_users_weight_moves_to_where_its_demand_is_and_totals_reach_the_max_min(control):
    """alice (8) reads from dn0 only, bob (4) from dn0 and dn1, both wanting more: per node, Algorithm
    1 gives alice 40 and bob 20 + 60; the weighted max-min is 60 and 60."""
    control, ledger, sent = control
    users = [user("alice", 8), user("bob", 4)]
    report(ledger, "dn0", {"alice": (40 * MB, True), "bob": (20 * MB, True)})
    report(ledger, "dn1", {"bob": (60 * MB, True)})
    assert control.tick(users) == {"dn0", "dn1"}
    given = {node: control.given(node) for node in ("dn0", "dn1")}
    assert given["dn0"]["alice"].allocated_read_bps == pytest.approx(58 * MB, rel=0.05)
    assert given["dn1"]["bob"].allocated_read_bps == pytest.approx(60 * MB, rel=0.01)
    assert sent["dn0"][("alice", 0)] > 10 * sent["dn0"][("bob", 0)]
    assert not control.manages("dn2") and "dn2" not in sent
    totals = control.given_totals()   # the metrics' one series per user: the same step, summed over nodes
    for name in ("alice", "bob"):
        assert totals[name][0] == pytest.approx(sum((given[node][name].allocated_read_bps if name in given[node] else 0) for node in given))


def test_status_shows_each_users_part_of_the_weights_the_node_was_sent(control):
    """What an operator reads off `vnodectl status --node`: the weights the node holds, as each
    listed user's part of them (its share while all are backlogged), not the step's latest."""
    control, ledger, sent = control
    users = [user("alice", 8), user("bob", 4)]
    report(ledger, "dn0", {"alice": (40 * MB, True), "bob": (20 * MB, True)})
    control.tick(users)
    assert control.given("dn1") == {}       # nobody wants anything there: no line
    report(ledger, "dn1", {"alice": (30 * MB, True), "bob": (30 * MB, True)})
    control.tick(users)
    for node in ("dn0", "dn1"):
        held = sent[node]
        total = held[("alice", 0)] + held[("bob", 0)]
        given = control.given(node)
        assert given["alice"].weight_read_share == pytest.approx(held[("alice", 0)] / total, rel=1e-4)
        assert given["alice"].weight_read_share + given["bob"].weight_read_share == pytest.approx(1.0)
        assert given["alice"].weight_write_share + given["bob"].weight_write_share == pytest.approx(1.0)   # nobody writes: standby weights
    report(ledger, "dn1", {"alice": (0.0, False), "bob": (60 * MB, True)})
    before = control.given("dn0")["alice"].weight_read_share
    assert control.tick(users) == {"dn0"}      # alice's weight moves to dn0, where she still reads
    assert control.given("dn0")["alice"].weight_read_share > before
    assert control.given("dn0")["alice"].weight_read_share == pytest.approx(
        sent["dn0"][("alice", 0)] / (sent["dn0"][("alice", 0)] + sent["dn0"][("bob", 0)]), rel=1e-4)
    assert {user: share.weight_read_share for user, share in control.given("dn1").items()} == {"bob": 1.0}   # alone there


def test_steady_demand_sends_nothing_and_a_change_goes_only_where_rates_would_move(control):
    """alice stops reading on dn1: its edge gives bob her bytes by itself (no message); her weight
    moves to dn0, where she now deserves more of what she shares with bob."""
    control, ledger, sent = control
    users = [user("alice", 8), user("bob", 4)]
    report(ledger, "dn0", {"alice": (40 * MB, True), "bob": (20 * MB, True)})
    report(ledger, "dn1", {"alice": (30 * MB, True), "bob": (30 * MB, True)})
    control.tick(users)
    assert control.tick(users) == set()
    before = control.given("dn0")["alice"].allocated_read_bps
    report(ledger, "dn1", {"alice": (0.0, False), "bob": (60 * MB, True)})
    assert control.tick(users) == {"dn0"}
    assert control.given("dn0")["alice"].allocated_read_bps > 1.2 * before
    assert control.updates == {"dn0": 2, "dn1": 1}


def test_a_new_priority_reaches_every_node_where_its_user_wants_something_though_no_rate_would_move(control):
    """Both read 15 MB/s of 60 on dn0 and dn1, given all they ask: at the configured capacity any
    weights give them that. A node that delivers less (encryption holds it at 30) splits by the weights
    it has, so alice's new priority goes to both nodes; to a node where she wants nothing only once
    she does."""
    control, ledger, sent = control
    report(ledger, "dn0", {"alice": (15 * MB, False), "bob": (15 * MB, False)})
    report(ledger, "dn1", {"alice": (15 * MB, False), "bob": (15 * MB, False)})
    control.tick([user("alice", 8), user("bob", 8)])
    assert sent["dn0"][("alice", 0)] == pytest.approx(sent["dn0"][("bob", 0)])
    assert control.tick([user("alice", 8), user("bob", 8)]) == set()
    assert control.tick([user("alice", 4), user("bob", 8)]) == {"dn0", "dn1"}
    for node in ("dn0", "dn1"):
        assert sent[node][("bob", 0)] == pytest.approx(2 * sent[node][("alice", 0)])
    assert control.tick([user("alice", 4), user("bob", 8)]) == set()
    report(ledger, "dn1", {"bob": (15 * MB, False)})
    assert control.tick([user("alice", 6), user("bob", 8)]) == {"dn0"}
    assert control.tick([user("alice", 6), user("bob", 8)]) == set()
    report(ledger, "dn1", {"alice": (15 * MB, False), "bob": (15 * MB, False)})
    assert control.tick([user("alice", 6), user("bob", 8)]) == {"dn1"}
    assert sent["dn1"][("bob", 0)] == pytest.approx(8 / 6 * sent["dn1"][("alice", 0)])


def test_the_next_tick_is_owed_reports_measured_under_the_weights_sent_until_each_node_has_one(control):
    control, ledger, sent = control
    users = [user("alice", 8), user("bob", 4)]
    assert not control.awaiting_reports()
    report(ledger, "dn0", {"alice": (40 * MB, True), "bob": (20 * MB, True)})
    report(ledger, "dn1", {"alice": (30 * MB, True), "bob": (30 * MB, True)})
    assert control.tick(users) == {"dn0", "dn1"}
    sequences = {node: control.node_allocation(node)[0] for node in ("dn0", "dn1")}
    assert control.awaiting_reports()
    control.measured("dn0", sequences["dn0"] - 1)    # the report sent as it applied them: the old weights'
    control.measured("dn1", 0)                       # a span that reaches back past the change
    control.measured("dn2", 10**6)                   # a node that was sent nothing
    assert control.awaiting_reports()
    control.measured("dn0", sequences["dn0"])
    assert control.awaiting_reports()
    control.measured("dn1", sequences["dn1"])
    assert not control.awaiting_reports()
    assert control.tick(users) == set() and not control.awaiting_reports()


def test_a_user_given_all_it_asked_keeps_a_standby_weight_and_an_idle_one_too(control):
    control, ledger, sent = control
    users = [user("alice", 8), user("bob", 4), user("carol", 2)]
    report(ledger, "dn0", {"alice": (5 * MB, False), "bob": (55 * MB, True)}, ("alice", "bob", "carol"))
    report(ledger, "dn1", {"bob": (60 * MB, True)}, ("alice", "bob", "carol"))
    control.tick(users)
    weights = sent["dn0"]
    assert weights[("alice", 0)] == pytest.approx(8)                # all it asked: its whole weight
    assert weights[("carol", 0)] == pytest.approx(2)                # idle everywhere: its priority
    assert weights[("bob", 0)] < 4                                  # bob's weight is spread over two nodes


WHOLE_NODES = {"policy": {"allocation": "work-conserving"},
               "storage_nodes": [{"id": dn, "devices": [{"name": f"/dev/sd{d}", "read_bps": BW, "write_bps": BW}
                                                       for d in "bcd"]} for dn in ("dn0", "dn1")]}


def test_a_node_weighed_as_a_whole_is_one_resource_of_all_its_devices_and_gets_its_weight_on_each():
    """The DataNode's scheduler shares the node (3 disks, 180 MB/s) as a whole and reports all its
    bytes on one device. alice (8) reads on dn0 only, bob (4) on both: her max-min total is all of
    dn0 but a trace, which the center can see only if dn0 counts as 180 MB/s, not one disk's 60."""
    ledger = UsageLedger()
    control = WeightControl(parse_config(WHOLE_NODES), ledger, itertools.count(1).__next__)
    for node in ("dn0", "dn1"):
        control.shares_by_weight(node, True, per_node=True)
    for node, flows in (("dn0", {"alice": 120 * MB, "bob": 60 * MB}), ("dn1", {"bob": 180 * MB})):
        entries = {(u, "/dev/sdc"): Entry(rate, 0.0, True, False, 4 * rate, 0.0) for u, rate in flows.items()}
        ledger.observe(pb.UsageReport(node_id=node, sampled_at_unix=time.time(), demand=packed(entries, True, [])),
                       {"alice", "bob"})
    users = [user("alice", 8), user("bob", 4)]
    assert control.tick(users) == {"dn0", "dn1"}
    assert control.given("dn0")["alice"].allocated_read_bps == pytest.approx(175 * MB, rel=0.03)
    assert control.given("dn1")["bob"].allocated_read_bps == pytest.approx(180 * MB, rel=0.01)
    given = allocated_shares(pb.DesiredState.FromString(control.node_allocation("dn0")[1]).allocation)
    assert set(given["alice"]) == {"/dev/sdb", "/dev/sdc", "/dev/sdd"}
    alice = {s.read_weight for s in given["alice"].values()}
    bob = {s.read_weight for s in given["bob"].values()}
    assert len(alice) == 1 and len(bob) == 1 and alice.pop() > 10 * bob.pop()


def test_the_agent_applies_a_weight_table_and_ignores_one_that_does_not_add_up():
    share = pb.DeviceShare(device="/dev/sdb", read_weight=8.0, write_weight=8.0)
    state = pb.DesiredState(allocation_policy="work-conserving",
                            vnodes=[pb.VNodeSpec(user="alice", shares=[share])])
    table = pb.WeightTable(users=["alice"], devices=["/dev/sdb"], read_weights=[3.5], write_weights=[2.5])
    state.allocation.CopyFrom(pb.Allocation(sequence=1, weights=table))
    applied = effective_state(state, shares_by_weight=True).vnodes[0].shares[0]
    assert (applied.read_weight, applied.write_weight) == (3.5, 2.5)
    del state.allocation.weights.write_weights[:]
    untouched = effective_state(state, shares_by_weight=True).vnodes[0].shares[0]
    assert (untouched.read_weight, untouched.write_weight) == (8.0, 8.0)


def test_a_node_whose_agent_is_gone_is_not_awaited_so_the_next_step_does_not_wait_for_it():
    """A dead agent's node would hold the next step back AWAIT_PERIODS after every tick that sent it
    weights; its last stream closing, or having none as they are sent, drops it from the wait."""
    from vnode_sync.coordinator.cluster import Cluster
    from vnode_sync.coordinator.store import StateStore
    cluster = Cluster(parse_config(CONFIG), StateStore(":memory:"))
    nodes = ("dn0", "dn1", "dn2")
    for node in nodes:
        cluster.runtime.register_node(node, [pb.Device(name="/dev/sdb")], "datanode-throttle", [],
                                      shares_by_weight=True)
        cluster.runtime.stream_opened(node)
        report(cluster.ledger, node, {"alice": (40 * MB, True), "bob": (20 * MB, True)})
    users = [user("alice", 8), user("bob", 4)]
    assert cluster.weights.tick(users) == set(nodes) and cluster.awaiting_reports()
    for node in ("dn1", "dn2"):
        cluster.weights.measured(node, cluster.weights.node_allocation(node)[0])
    assert cluster.awaiting_reports()                     # dn0 owes its report...
    cluster.runtime.stream_closed("dn0")
    assert not cluster.awaiting_reports()                 # ...until its agent is gone
    # bob stops on dn2: his weight moves to dn0 and dn1, and dn0 is sent weights with no stream to take them.
    report(cluster.ledger, "dn2", {"alice": (60 * MB, True), "bob": (0.0, False)})
    assert {"dn0", "dn1"} <= cluster.control_tick(users)
    assert cluster.awaiting_reports()                     # dn1's agent is there: its report is owed
    cluster.weights.measured("dn1", cluster.weights.node_allocation("dn1")[0])
    assert not cluster.awaiting_reports()                 # and only dn1's
