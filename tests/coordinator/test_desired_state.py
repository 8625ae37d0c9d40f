"""Each Share field means one thing whatever the sharing: the desired state gives every VNode a share
per device and one for the node as a whole (device ""), ceilings and floors only; weights come from
the step alone."""

from vnode_sync.coordinator.config import parse_config
from vnode_sync.coordinator.control.desired_state import build_desired_state
from vnode_sync.coordinator.state.store import UserRecord

MB = 1_000_000
DEVICES = [{"name": "/dev/sdb", "read_bps": 60 * MB, "write_bps": 30 * MB, "read_iops": 600},
           {"name": "/dev/sdc", "read_bps": 40 * MB, "write_bps": 30 * MB}]


def state(sharing: str, users: list[UserRecord]):
    config = parse_config({"policy": {"sharing": sharing, "default_vnode_fraction": 0.1},
                           "storage_nodes": [{"id": "dn1", "devices": DEVICES}]})
    return build_desired_state(7, config.storage_nodes[0], users, config.policy)


def shares(state):
    return {(v.user or "(default)", s.device): s for v in [*state.vnodes, state.default_vnode] for s in v.shares}


def test_static_ceilings_are_algorithm_1_on_each_device_and_on_the_node_and_nothing_else_is_set():
    got = shares(state("static", [UserRecord("alice", 1001, 4, True, 0, None, False),
                                  UserRecord("bob", 1002, 8, True, 0, None, False)]))
    assert got[("alice", "/dev/sdb")].read.ceiling_bps == 20 * MB        # 4/12 of 60
    assert got[("alice", "/dev/sdb")].read.ceiling_iops == 200           # and of its 600 iops
    assert got[("bob", "/dev/sdc")].write.ceiling_bps == 20 * MB         # 8/12 of 30
    assert got[("alice", "")].read.ceiling_bps == 100 * MB * 4 // 12     # the node's 100 MB/s, split once
    assert got[("alice", "")].read.ceiling_iops == 0                     # iops are capped per device only
    assert got[("(default)", "")].read.ceiling_bps == 10 * MB
    assert all(s.read.weight == s.write.weight == 0 and s.read.floor_bps == 0 for s in got.values())


def test_work_conserving_floors_and_ceilings_are_the_users_on_every_resource_once_and_no_weight_is_sent():
    bob = UserRecord("bob", 1002, 8, True, 0, None, False, reservation_bps=5 * MB, limit_bps=20 * MB)
    got = shares(state("work-conserving", [UserRecord("alice", 1001, 4, True, 0, None, False), bob]))
    for device in ("/dev/sdb", "/dev/sdc", ""):   # the node's own: not the sum of its devices'
        assert (got[("bob", device)].read.floor_bps, got[("bob", device)].read.ceiling_bps) == (5 * MB, 20 * MB)
        assert (got[("alice", device)].write.floor_bps, got[("alice", device)].write.ceiling_bps) == (0, 0)
    assert got[("(default)", "/dev/sdb")].read.ceiling_iops == 0
    assert all(s.read.weight == s.write.weight == 0 for s in got.values()), "a priority reaches an edge by the step"
