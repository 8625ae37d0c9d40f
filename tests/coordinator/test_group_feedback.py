"""The tree step inside the control loop's feedback: what a user is given next depends on what it
moved under the weights it was sent (its demand is its rate, grown where it waited), so the weights
must not hold a user to what it moved. The loop is the real one (UsageLedger reports, WeightControl
ticks, the ShareTables read back); the edge is a DataNode's scheduler as a fluid: every resource split
among its readers by the weights sent, each up to what its client takes.

The shape of tests/e2e/test_hdfs_groups.py: g1 (weight 2) with one user, g2 (weight 1) with three, every
user at priority 10, every reader backlogged on every node."""

import itertools
import time

import numpy as np
import pytest

from vnode_sync.agents.storage.allocation import allocated_weights
from vnode_sync.agents.storage.demand import Flow, held_growth
from vnode_sync.agents.storage.demand_summary import Entry, packed
from vnode_sync.coordinator.config import parse_config
from vnode_sync.coordinator.control.node_edge import Edge
from vnode_sync.coordinator.control.weight_control import WeightControl
from vnode_sync.coordinator.policy.water_filling import water_fill
from vnode_sync.coordinator.state.groups import GroupRecord
from vnode_sync.coordinator.state.store import UserRecord
from vnode_sync.coordinator.state.usage_ledger import UsageLedger
from vnode_sync.kernel.held import waited_held
from vnode_sync.shares import NODE
from vnode_sync.wire import vnode_pb2 as pb

MB = 1_000_000
BW = 60 * MB
INTERVAL = 0.5      # seconds between two reports (and ticks)
TICKS = 8
USERS = {"a": "g1", "b": "g2", "c": "g2", "d": "g2"}
GROUPS = [GroupRecord("g1", 2), GroupRecord("g2", 1)]
SHARE = {"a": 2 / 3, "b": 1 / 9, "c": 1 / 9, "d": 1 / 9}   # of every node, all four backlogged


LATE, SLOW_CLIENT, SLOW_NODE = ("a reader starts two ticks after the others", "g1's reader is slow for three ticks",
                                "the node delivers two thirds of what it is configured")


def _client_speed(scenario: str, user: str, tick: int) -> float:
    """What the user's client takes, bytes/s per node (inf: all it is given); 0: not reading yet."""
    if scenario == LATE and user == "d" and tick < 2:
        return 0.0
    if scenario == SLOW_CLIENT and user == "a" and tick < 3:
        return 5 * MB
    return np.inf


def _delivered(scenario: str) -> float:
    """What each node delivers, bytes/s (the step is told BW): a loaded host's DataNode moved ~40 of
    its configured 60 MB/s in tests/e2e/test_hdfs_groups.py."""
    return BW * 2 / 3 if scenario == SLOW_NODE else BW


def _closed_loop(nodes: list[str], scenario: str) -> list[dict[str, float]]:
    """Per tick, each user's rate summed over the nodes, as the edges gave it under the weights in force."""
    config = {"policy": {"sharing": "work-conserving"},
              "storage_nodes": [{"id": n, "devices": [{"name": "/dev/sdb", "read_bps": BW, "write_bps": BW}]}
                                for n in nodes]}
    ledger = UsageLedger()
    control = WeightControl(parse_config(config), ledger, itertools.count(1).__next__)
    for node in nodes:
        control.register(node, Edge(by_weight=True, per_node=True))
    users = [UserRecord(name, 2000 + i, 10, True, 0, None, False, group=group)
             for i, (name, group) in enumerate(USERS.items())]
    names = list(USERS)
    weights = {node: np.ones(len(names)) for node in nodes}   # before the first table: priorities, all alike
    rates = []
    for tick in range(TICKS):
        speed = np.array([_client_speed(scenario, name, tick) for name in names])
        moved = {}
        for node in nodes:
            delivered = _delivered(scenario)
            given, _ = water_fill(weights[node][:, None], np.array([delivered]), np.minimum(speed, delivered)[:, None])
            moved[node] = given[:, 0]
            ledger.observe(pb.UsageReport(node_id=node, sampled_at_unix=time.time(),
                                          demand=packed(_entries(names, given[:, 0], speed, delivered), True, [])),
                           set(names))
        rates.append({name: float(sum(moved[node][i] for node in nodes)) for i, name in enumerate(names)})
        control.tick(users, GROUPS)
        for node in nodes:
            sequence, message = control.node_allocation(node)
            if sequence:
                table = allocated_weights(pb.DesiredState.FromString(message).allocation.shares)
                weights[node] = np.array([table[(name, NODE)][0] for name in names])
    return rates


def _entries(names: list[str], rate: np.ndarray, speed: np.ndarray, delivered: float) -> dict:
    """What the DataNode's agent reports: a reader waited for the time it was not moving, of what its
    client would have taken alone (the node, or its client's speed), and its demand follows
    agents/storage/demand.py from that wait."""
    out = {}
    for name, moved, client in zip(names, rate, speed):
        alone = min(delivered, float(client))
        waited = INTERVAL * (1 - moved / alone) if alone > 0 else 0.0
        held = waited_held(waited, INTERVAL)
        demand = Flow(float(moved), held, held_growth(waited, INTERVAL)).demand
        out[(name, NODE)] = Entry(float(moved), 0.0, held, False, demand, 0.0)
    return out


@pytest.mark.parametrize("nodes", [["dn0"], ["dn0", "dn1"]], ids=["one node", "two nodes"])
@pytest.mark.parametrize("scenario", [LATE, SLOW_CLIENT, SLOW_NODE])
def test_every_backlogged_reader_gets_its_share_of_the_tree_within_a_few_ticks(nodes, scenario):
    rates = _closed_loop(nodes, scenario)
    for tick in (-2, -1):
        got = rates[tick]
        g1, g2 = got["a"], got["b"] + got["c"] + got["d"]
        assert g1 / g2 == pytest.approx(2.0, rel=0.10), f"tick {len(rates) + tick}: {got}"
        for name, share in SHARE.items():
            assert got[name] == pytest.approx(share * _delivered(scenario) * len(nodes), rel=0.10), \
                f"{name} at tick {len(rates) + tick}: {got}"
