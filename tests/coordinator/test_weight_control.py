"""The work-conserving loop, for nodes whose edges share by weight: the weight step fed by the usage
ledger, each node sent its local weights only when a user's rate there would move, as a packed
ShareTable that the storage agent reads back (agents.storage.allocation). Cap-only nodes:
test_cap_only_nodes.py."""

import itertools
import time

import pytest

from vnode_sync.agents.storage.allocation import allocated_weights, effective_state
from vnode_sync.agents.storage.demand_summary import Entry, packed
from vnode_sync.coordinator.config import parse_config
from vnode_sync.coordinator.state.groups import GroupRecord
from vnode_sync.coordinator.state.store import UserRecord
from vnode_sync.coordinator.state.usage_ledger import UsageLedger
from vnode_sync.coordinator.control.node_edge import Edge
from vnode_sync.coordinator.control.weight_control import WeightControl
from vnode_sync.wire import vnode_pb2 as pb

MB = 1_000_000
BW = 60 * MB
CONFIG = {"policy": {"sharing": "work-conserving"},
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
                given = allocated_weights(pb.DesiredState.FromString(message).allocation.shares)
                self[node] = {(name, k): weights[k] for (name, device), weights in given.items()
                              if device == "/dev/sdb" for k in (0, 1)}


@pytest.fixture
def control():
    """A WeightControl over dn0 and dn1 (their backends share by weight; dn2's agent never registered),
    and what it sent each node (refreshed by tick())."""
    ledger = UsageLedger()
    control = WeightControl(parse_config(CONFIG), ledger, itertools.count(1).__next__)
    for node in ("dn0", "dn1"):
        control.register(node, Edge(by_weight=True))
    sent = Sent(control)
    tick = control.tick

    def tick_and_read(users, groups=()):
        changed = tick(users, groups)
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
    assert "dn2" not in sent and control.given("dn2") == {}   # not registered: not in the step
    totals = control.given_totals()   # the metrics' one series per user: the same step, summed over nodes
    for name in ("alice", "bob"):
        assert totals[name][0] == pytest.approx(sum(given[node][name].allocated_read_bps
                                                    for node in given if name in given[node]), rel=1e-6)


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
    assert {user: given.weight_read_share for user, given in control.given("dn1").items()} == {"bob": 1.0}   # alone there


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


WHOLE_NODES = {"policy": {"sharing": "work-conserving"},
               "storage_nodes": [{"id": dn, "devices": [{"name": f"/dev/sd{d}", "read_bps": BW, "write_bps": BW}
                                                       for d in "bcd"]} for dn in ("dn0", "dn1")]}


def test_a_node_weighed_as_a_whole_is_one_resource_of_all_its_devices_and_gets_one_weight_for_it():
    """The DataNode's scheduler shares the node (3 disks, 180 MB/s) as a whole and reports its bytes
    for the node (device ""). alice (8) reads on dn0 only, bob (4) on both: her max-min total is all of
    dn0 but a trace, which the center can see only if dn0 counts as 180 MB/s, not one disk's 60."""
    ledger = UsageLedger()
    control = WeightControl(parse_config(WHOLE_NODES), ledger, itertools.count(1).__next__)
    for node in ("dn0", "dn1"):
        control.register(node, Edge(by_weight=True, per_node=True))
    for node, flows in (("dn0", {"alice": 120 * MB, "bob": 60 * MB}), ("dn1", {"bob": 180 * MB})):
        entries = {(u, ""): Entry(rate, 0.0, True, False, 4 * rate, 0.0) for u, rate in flows.items()}
        ledger.observe(pb.UsageReport(node_id=node, sampled_at_unix=time.time(), demand=packed(entries, True, [])),
                       {"alice", "bob"})
    users = [user("alice", 8), user("bob", 4)]
    assert control.tick(users) == {"dn0", "dn1"}
    assert control.given("dn0")["alice"].allocated_read_bps == pytest.approx(175 * MB, rel=0.03)
    assert control.given("dn1")["bob"].allocated_read_bps == pytest.approx(180 * MB, rel=0.01)
    sent = table(control, "dn0")
    assert list(sent.devices) == [""], "one weight per user and direction for the node, not one per disk"
    given = allocated_weights(sent)
    assert given[("alice", "")][0] > 10 * given[("bob", "")][0]


def test_the_agent_applies_a_weight_table_and_ignores_one_that_does_not_add_up():
    share = pb.ResourceShare(device="")   # the node's: local weights as sent (a device's become BFQ integers)
    state = pb.DesiredState(sharing="work-conserving",
                            vnodes=[pb.VNodeSpec(user="alice", priority=8, shares=[share])])
    table = pb.ShareTable(users=["alice"], devices=[""], read_weights=[3.5], write_weights=[2.5])
    state.allocation.CopyFrom(pb.Allocation(sequence=1, shares=table))
    applied = effective_state(state, shares_by_weight=True).vnodes[0].shares[0]
    assert (applied.read.weight, applied.write.weight) == (3.5, 2.5)
    del state.allocation.shares.write_weights[:]
    untouched = effective_state(state, shares_by_weight=True).vnodes[0].shares[0]
    assert (untouched.read.weight, untouched.write.weight) == (8.0, 8.0)


def test_a_node_whose_agent_is_gone_is_not_awaited_so_the_next_step_does_not_wait_for_it():
    """A dead agent's node would hold the next step back AWAIT_PERIODS after every tick that sent it
    weights; its last stream closing, or having none as they are sent, drops it from the wait."""
    from vnode_sync.coordinator.cluster import Cluster
    from vnode_sync.coordinator.state.store import StateStore
    cluster = Cluster(parse_config(CONFIG), StateStore(":memory:"))
    nodes = ("dn0", "dn1", "dn2")
    for node in nodes:
        cluster.runtime.register_node(node, [pb.Device(name="/dev/sdb")], "datanode-throttle", [],
                                      Edge(by_weight=True))
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


def nodes(*devices_of: tuple[str, tuple[str, ...]]) -> dict:
    return {**CONFIG, "storage_nodes": [{"id": node, "devices": [{"name": d, "read_bps": BW, "write_bps": BW}
                                                                  for d in devices]} for node, devices in devices_of]}


def table(control, node) -> pb.ShareTable:
    return pb.DesiredState.FromString(control.node_allocation(node)[1]).allocation.shares


def test_nodes_and_devices_added_and_removed_at_runtime_keep_what_stays_and_send_what_is_new(control):
    """`vnodectl nodes add|set|remove` under work-conserving, with no restart: the arrays are laid out
    again between two ticks. dn2 removed and dn3 added: dn0 and dn1 keep their demand, warm start and what
    they were sent (nothing is sent to them again); dn3 is weighed once its agent registers and reports;
    dn2 is forgotten. A device added to dn0: dn0's table is sent again, listing it. dn1 removed: bob's
    weight comes back to dn0, where he now reads only."""
    control, ledger, sent = control
    users = [user("alice", 8), user("bob", 4)]
    report(ledger, "dn0", {"alice": (40 * MB, True), "bob": (20 * MB, True)})
    report(ledger, "dn1", {"bob": (60 * MB, True)})
    assert control.tick(users) == {"dn0", "dn1"}
    before = {node: control.node_allocation(node) for node in ("dn0", "dn1")}

    control.set_nodes(parse_config(nodes(("dn0", ("/dev/sdb",)), ("dn1", ("/dev/sdb",)), ("dn3", ("/dev/sdb",)))))
    assert control.manages("dn0") and control.manages("dn1") and not control.manages("dn3")
    assert control.tick(users) == set(), "dn0 and dn1 as they were: nothing moved there"
    assert {node: control.node_allocation(node) for node in ("dn0", "dn1")} == before
    control.register("dn3", Edge(by_weight=True))
    report(ledger, "dn3", {"alice": (30 * MB, True), "bob": (30 * MB, True)})
    assert "dn3" in control.tick(users)
    assert set(table(control, "dn3").users) == {"alice", "bob"}

    control.set_nodes(parse_config(nodes(("dn0", ("/dev/sdb", "/dev/sdc")), ("dn1", ("/dev/sdb",)),
                                         ("dn3", ("/dev/sdb",)))))
    assert "dn0" in control.tick(users)
    assert list(table(control, "dn0").devices) == ["/dev/sdb", "/dev/sdc"]

    alice_before = control.given("dn0")["alice"].allocated_read_bps
    control.set_nodes(parse_config(nodes(("dn0", ("/dev/sdb", "/dev/sdc")), ("dn3", ("/dev/sdb",)))))
    assert control.node_allocation("dn1") == (0, b"") and "dn1" not in control.updates
    assert "dn0" in control.tick(users)
    assert control.given("dn0")["alice"].allocated_read_bps < 0.9 * alice_before, "bob's share of dn0 grew back"


def test_a_node_change_during_a_tick_waits_for_its_end_and_the_next_tick_steps_on_the_new_layout(control,
                                                                                                 monkeypatch):
    """The control loop ticks off the event loop while the store thread changes the nodes: a change made
    while the weight step runs is laid out only once that tick has ended (its arrays are indexed by the
    columns it began with)."""
    import threading
    import vnode_sync.coordinator.control.weight_control as weight_control
    control, ledger, _ = control
    users = [user("alice", 8), user("bob", 4)]
    report(ledger, "dn0", {"alice": (40 * MB, True), "bob": (20 * MB, True)})
    changed_at, stepped = [], []
    change = threading.Thread(target=lambda: (control.set_nodes(parse_config(
        nodes(("dn0", ("/dev/sdb", "/dev/sdc")), ("dn4", ("/dev/sdd",))))), changed_at.append(time.monotonic())))

    def step_while_the_nodes_change(*args, **kwargs):
        if not stepped:
            change.start()
            change.join(0.3)     # the change is under way, and must wait
        stepped.append(time.monotonic())
        return local_weights(*args, **kwargs)
    local_weights = weight_control.local_weights
    monkeypatch.setattr(weight_control, "local_weights", step_while_the_nodes_change)
    assert control.tick(users) == {"dn0", "dn1"}, "the nodes it began with (dn1 is sent its first weights)"
    change.join(10)
    assert changed_at and changed_at[0] > stepped[0], "the change was laid out during the tick"
    assert list(table(control, "dn0").devices) == ["/dev/sdb"], "the tick's message is of the layout it began on"
    assert "dn0" in control.tick(users) and list(table(control, "dn0").devices) == ["/dev/sdb", "/dev/sdc"]


def test_with_groups_the_step_gives_users_weights_that_realise_the_tree():
    """Groups g1 (2) and g2 (1), one user in g1 and three in g2, every user at the same priority, all
    reading on dn0 and dn1 as much as they get: the groups' totals split 2 : 1 and g2's users share
    its third evenly; with one of g2's users idle, its part goes to its own group's users, not to g1.
    Without groups (or with none holding an active user) the step is today's: four equal users."""
    ledger = UsageLedger()
    control = WeightControl(parse_config(CONFIG), ledger, itertools.count(1).__next__)
    for node in ("dn0", "dn1"):
        control.register(node, Edge(by_weight=True))
    users = [UserRecord(n, 2000 + i, 10, True, 0, None, False, group=g)
             for i, (n, g) in enumerate((("a", "g1"), ("b", "g2"), ("c", "g2"), ("d", "g2")))]
    names = [u.name for u in users]
    groups = [GroupRecord("g1", 2), GroupRecord("g2", 1)]

    def everyone_reads(idle=()):
        for node in ("dn0", "dn1"):
            report(ledger, node, {n: (15 * MB, True) for n in names if n not in idle}, names)

    def totals():
        return {name: read for name, (read, _) in control.given_totals().items()}

    everyone_reads()
    control.tick(users)
    assert totals() == {n: pytest.approx(30 * MB, rel=0.02) for n in names}, "no groups: four equal users"
    control.tick(users, groups)
    given = totals()
    assert given["a"] == pytest.approx(80 * MB, rel=0.05)
    assert {n: given[n] for n in "bcd"} == {n: pytest.approx(40 * MB / 3, rel=0.05) for n in "bcd"}
    everyone_reads(idle=("d",))
    control.tick(users, groups)
    given = totals()
    assert given["a"] == pytest.approx(80 * MB, rel=0.05), "g1 keeps its two thirds"
    assert given["b"] == pytest.approx(20 * MB, rel=0.05) and given["c"] == pytest.approx(20 * MB, rel=0.05)
    assert given.get("d", 0.0) < 1 * MB
    # g2 gone (the store refuses that while it holds users; a snapshot may trail): its users sit under the
    # root beside g1, their priorities (10) against its weight (2)
    control.tick(users, [GroupRecord("g1", 2)])
    assert totals()["a"] == pytest.approx(120 * MB * 2 / 22, rel=0.05)

