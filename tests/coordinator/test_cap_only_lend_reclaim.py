"""A cap-only node end to end in one process, in simulated time: a throttle that caps each user (blkio
without BFQ: no weights, the device's own queue shares what the caps leave), the agent's one demand
estimate (agents/storage/demand.py, held by vnode_sync.kernel.held) reporting every 0.25 s, the usage
ledger, and the weight step ticking every 0.5 s, and at once when a user turns held at its cap (as the
control loop does). An idle user's share is lent within two ticks of its stopping and taken back within
two of its return (tests/e2e/test_hdfs_fair_shares.py does the same on a real HDFS)."""

import itertools

import numpy as np
import pytest

from vnode_sync.agents.storage.allocation import allocated_ceilings
from vnode_sync.agents.storage.demand import DemandEstimator
from vnode_sync.agents.storage.demand_summary import Entry, packed
from vnode_sync.coordinator.config import parse_config
from vnode_sync.coordinator.control.node_edge import CAPS_ONLY
from vnode_sync.coordinator.policy.water_filling import water_fill
from vnode_sync.coordinator.state.store import UserRecord
from vnode_sync.coordinator.state.usage_ledger import UsageLedger
from vnode_sync.coordinator.control.weight_control import WeightControl
from vnode_sync.kernel.backend import VNodeUsage
from vnode_sync.kernel.types import DeviceLimits, DeviceNumber, IoCounters
from vnode_sync.wire import vnode_pb2 as pb

MB = 1_000_000
BW = 60 * MB
DEV, NAME = DeviceNumber(7, 3), "/dev/sdb"
REPORT, TICK, STEP = 0.25, 0.5, 0.05     # seconds: the agent's reports, the coordinator's ticks, the fluid step
USERS = [UserRecord("alice", 1008, 8, True, 0, None, False, 0, 0), UserRecord("bob", 1004, 4, True, 0, None, False, 0, 0)]


class Node:
    """The throttle, its agent and the coordinator's step for one cap-only node."""

    def __init__(self):
        self.now = 1000.0
        self.ledger = UsageLedger(clock=lambda: self.now)
        self.control = WeightControl(parse_config({"policy": {"sharing": "work-conserving"}, "storage_nodes": [
            {"id": "dn0", "devices": [{"name": NAME, "read_bps": BW, "write_bps": BW}]}]}), self.ledger,
            itertools.count(1).__next__)
        self.control.register("dn0", CAPS_ONLY)
        self.poked = False
        self.control.on_capped_user_held(lambda: setattr(self, "poked", True))
        self.agent = DemandEstimator()
        self.read = {u.name: 0.0 for u in USERS}
        self.caps = {u.name: BW * u.priority // 12 for u in USERS}   # Algorithm 1 until the first tick
        self.rates: dict[str, float] = {}

    def run(self, seconds: float, reading: set[str]) -> list[tuple[float, dict[str, float]]]:
        """Users in `reading` read all they can; (seconds since the call, rates) at every fluid step."""
        start = self.now
        out = []
        for step in range(int(round(seconds / STEP))):
            want = np.array([[np.inf if u.name in reading else 0.0] for u in USERS])
            ceiling = np.minimum(want, np.array([[self.caps[u.name]] for u in USERS]))
            given = water_fill(np.ones((len(USERS), 1)), np.array([float(BW)]), ceiling)[0][:, 0]
            self.rates = {u.name: float(r) for u, r in zip(USERS, given)}
            for name, rate in self.rates.items():
                self.read[name] += rate * STEP
            self.now += STEP
            at = round(self.now / STEP)
            if at % round(REPORT / STEP) == 0:
                self.report()
            if at % round(TICK / STEP) == 0 or self.poked:
                self.poked = False
                self.control.tick(USERS)
                sequence, message = self.control.node_allocation("dn0")
                if sequence:
                    given = allocated_ceilings(pb.DesiredState.FromString(message).allocation.shares)
                    self.caps = {name: ceilings[0] for (name, device), ceilings in given.items() if device == NAME}
            out.append((self.now - start, dict(self.rates)))
        return out

    def report(self) -> None:
        usage = {f"vnode.{name}": VNodeUsage({DEV: IoCounters(int(total), 0)}) for name, total in self.read.items()}
        limits = {f"vnode.{name}": [DeviceLimits(DEV, read_bps=int(cap))] for name, cap in self.caps.items()}
        demand = self.agent.update(usage, limits, self.now)
        entries = {}
        for vnode, state in demand.items():
            read, write = state.devices[DEV]
            entries[(vnode.removeprefix("vnode."), NAME)] = Entry(read.rate, write.rate, read.held, write.held,
                                                                  read.demand, write.demand)
        self.ledger.observe(pb.UsageReport(node_id="dn0", sampled_at_unix=self.now,
                                           demand=packed(entries, True, [])), {u.name for u in USERS})


def seconds_until(trace, holds) -> float | None:
    return next((at for at, rates in trace if holds(rates)), None)


def test_a_cap_only_node_lends_an_idle_share_within_two_ticks_and_takes_it_back_within_two():
    node = Node()
    settled = node.run(10.0, {"alice", "bob"})[-1][1]
    assert settled["alice"] == pytest.approx(40 * MB, rel=0.03) and settled["bob"] == pytest.approx(20 * MB, rel=0.03)
    lent = seconds_until(node.run(5.0, {"alice"}), lambda r: r["alice"] >= 0.9 * BW)
    back = seconds_until(node.run(5.0, {"alice", "bob"}), lambda r: r["bob"] >= 0.9 * 20 * MB)
    print(f"lent in {lent:.2f} s, taken back in {back:.2f} s (ticks every {TICK} s, reports every {REPORT} s)")
    assert lent is not None and lent <= 2 * TICK + STEP
    assert back is not None and back <= 2 * TICK + STEP
