"""A storage agent enforces the work-conserving allocation it was sent, keeps it while the
coordinator is out of reach, then goes back to the static shares after fallback_seconds: a
real vnode-agent process on real blkio cgroups, restarted from its state cache with no
coordinator listening, and one whose live coordinator is killed."""

import os
import subprocess
import sys
import time

import yaml

from tests.conftest import needs_kernel, unique_name
from testbed.loopdev import loop_device
from testbed.processes import stop_process
from vnode_sync.agents.storage.allocation import effective_state, static_state
from vnode_sync.agents.storage.state_cache import encode_state_cache
from vnode_sync.kernel.backend import HostCgroups
from vnode_sync.wire import vnode_pb2 as pb

STATIC, ALLOCATED = 12_345_678, 40_000_000


def state(device: str) -> pb.DesiredState:
    """Work-conserving, no device capacities (the fallback keeps the static caps): the caps a cap-only
    node is sent."""
    return pb.DesiredState(
        generation=5, node_id="n1", sharing="work-conserving",
        vnodes=[pb.VNodeSpec(user="alice", uid=64_411, priority=4,
                             shares=[pb.ResourceShare(device=device, read=pb.Share(ceiling_bps=STATIC, ceiling_iops=77),
                                                      write=pb.Share(ceiling_bps=STATIC))])],
        default_vnode=pb.VNodeSpec(shares=[pb.ResourceShare(device=device, read=pb.Share(ceiling_bps=1_000_000))]),
        allocation=pb.Allocation(sequence=3, fallback_seconds=2.0, shares=pb.ShareTable(
            users=["alice"], devices=[device], read_ceilings_bps=[ALLOCATED], write_ceilings_bps=[2_000_000])))


def test_the_allocation_replaces_the_byte_ceilings_only_and_the_fallback_drops_it():
    effective = effective_state(state("/dev/x"))
    share = effective.vnodes[0].shares[0]
    assert (share.read.ceiling_bps, share.write.ceiling_bps, share.read.ceiling_iops) == (ALLOCATED, 2_000_000, 77)
    fallback = static_state(state("/dev/x"))
    assert not fallback.HasField("allocation")
    assert effective_state(fallback).vnodes[0].shares[0].read.ceiling_bps == STATIC


@needs_kernel
def test_an_agent_cut_off_from_the_coordinator_keeps_the_allocation_then_falls_back(tmp_path):
    name = unique_name("fallback")
    with loop_device(name) as (device, dev):
        cache = tmp_path / "agent.state"
        cache.write_bytes(encode_state_cache(state(device)))
        config = tmp_path / "agent.yaml"
        config.write_text(yaml.safe_dump({"node_id": "n1", "coordinator": "127.0.0.1:1", "cgroup_name": name,
                                          "devices": [device], "state_cache": str(cache),
                                          "teardown_on_exit": True}))
        limit_file = os.path.join(HostCgroups().blkio_v1, name, "vnode.alice", "blkio.throttle.read_bps_device")
        agent = subprocess.Popen([sys.executable, "-m", "vnode_sync.agents.main", "--config", str(config)],
                                 stderr=subprocess.PIPE, text=True)
        seen = []
        try:
            started = time.monotonic()
            while time.monotonic() - started < 10 and (not seen or seen[-1][1] != str(STATIC)):
                try:
                    value = open(limit_file).read().split()[1]
                    if not seen or seen[-1][1] != value:
                        seen.append((time.monotonic() - started, value))
                except (FileNotFoundError, IndexError):
                    pass
                time.sleep(0.05)
        finally:
            stop_process(agent)
        _, stderr = agent.communicate()
        print(stderr)
        assert [v for _, v in seen] == [str(ALLOCATED), str(STATIC)], seen
        assert 1.5 <= seen[1][0] <= 4.5, seen
        assert "back to the static shares" in stderr


def _throttle(path: str) -> str | None:
    try:
        return open(path).read().split()[1]
    except (OSError, IndexError):
        return None


@needs_kernel
def test_a_coordinator_killed_mid_run_its_allocation_is_kept_then_the_static_shares_return():
    """Both halves with real processes: a coordinator (work-conserving, fallback 2 s) and an agent
    on a loop device (no BFQ: caps); alice and bob are idle, so the step's caps give each the room
    left, the whole node (60 MB/s), where Algorithm 1 gives 40 and 20. SIGKILL the coordinator: the cap
    stays for 2 s, then the static shares; a coordinator started again on the same state sends the caps
    again."""
    import signal

    from testbed.local_cluster import LocalCluster, LocalNode, LocalUser

    name = unique_name("fallback-live")
    users = [LocalUser("alice", 64_421, 8), LocalUser("bob", 64_422, 4)]
    policy = {"sharing": "work-conserving", "control_seconds": 0.3, "fallback_seconds": 2}
    room, static = str(60_000_000), str(60_000_000 * 8 // 12)
    with loop_device(name) as (device, _), \
            LocalCluster(name, users, [LocalNode("n1", (device,), 60_000_000, 60_000_000)],
                         agent_settings={"report_seconds": 0.25}, coordinator_settings={"policy": policy}) as cluster:
        limit_file = os.path.join(HostCgroups().blkio_v1, cluster.cgroup_name("n1"), "vnode.alice",
                                  "blkio.throttle.read_bps_device")
        cluster.wait_for(lambda: _throttle(limit_file) == room, 20, f"alice's cap {room} in {limit_file}")
        cluster.stop_coordinator(signal.SIGKILL)
        killed, seen = time.monotonic(), []
        while time.monotonic() - killed < 10 and (not seen or seen[-1][1] != static):
            value = _throttle(limit_file)
            if not seen or seen[-1][1] != value:
                seen.append((time.monotonic() - killed, value))
            time.sleep(0.05)
        assert [v for _, v in seen] == [room, static], seen
        assert 1.5 <= seen[1][0] <= 2 + 3, f"static shares {seen[1][0]:.2f} s after the kill (fallback 2 s)"
        cluster.start_coordinator()    # the same state file and port: the agent reconnects
        cluster.wait_for(lambda: _throttle(limit_file) == room, 20, "the caps again after the restart")
        with open(os.path.join(cluster.workdir, "agent-n1.log")) as f:
            assert "back to the static shares" in f.read()


class RecordingBackend:
    """A LimitEnforcer with no placer (as Lustre TBF and the DataNode throttler are): records limits."""

    name = "recording"
    placer = None
    shares_by_weight = False
    shares_per_node = False

    def __init__(self):
        self.applied = {}
        self.node = {}
        self.capacities = []

    def limitations(self):
        return []

    def not_enforcing(self):
        return None

    def degraded(self):
        return []

    def set_capacities(self, capacities):
        self.capacities = capacities

    def setup(self):
        pass

    def vnodes(self):
        return list(self.applied)

    def ensure_vnode(self, vnode, uid=None, job=""):
        self.applied.setdefault(vnode, [])

    def remove_vnode(self, vnode):
        self.applied.pop(vnode, None)

    def limits(self, vnode):
        return {}

    def apply_limits(self, vnode, limits, node=None):
        self.applied[vnode] = limits
        self.node[vnode] = node

    def commit(self, uids, connections):
        pass

    def usage(self):
        return {}

    def teardown(self):
        pass


def test_the_allocation_reaches_any_backend_through_the_limit_enforcer_seam():
    from vnode_sync.agents.storage.reconciler import Reconciler
    from vnode_sync.kernel.types import DeviceNumber

    class NoThreads:
        name, shared_process = "none", False

        def scan(self, users):
            return []

    backend = RecordingBackend()
    Reconciler(backend, NoThreads(), {"/dev/x": DeviceNumber(7, 9)}).apply(effective_state(state("/dev/x")))
    (limit,) = backend.applied["vnode.alice"]
    assert (limit.read_bps, limit.write_bps) == (ALLOCATED, 2_000_000)


def wc_state(allocation: pb.Allocation | None = None) -> pb.DesiredState:
    """Work-conserving: alice (8) and bob (4) on /dev/x (60 MB/s read, 30 write), bob with a 20 MB/s
    ceiling and a 5 MB/s floor; the default VNode at priority 1 under its 6 MB/s ceiling. No weights:
    they come from the allocation, else from the priorities."""
    def share(ceiling=0, floor=0):
        bounds = pb.Share(ceiling_bps=ceiling, floor_bps=floor)
        return pb.ResourceShare(device="/dev/x", read=bounds, write=bounds)
    out = pb.DesiredState(generation=5, node_id="n1", sharing="work-conserving",
                          devices=[pb.Device(name="/dev/x", read_bps=60_000_000, write_bps=30_000_000)],
                          vnodes=[pb.VNodeSpec(user="alice", priority=8, shares=[share()]),
                                  pb.VNodeSpec(user="bob", priority=4, shares=[share(20_000_000, 5_000_000)])],
                          default_vnode=pb.VNodeSpec(priority=1, shares=[share(6_000_000)]))
    if allocation is not None:
        out.allocation.CopyFrom(allocation)
    return out


# The step's part for a weight edge (bob's weight; alice, unlisted, keeps her priority) and for a cap-only one.
WEIGHTS = pb.Allocation(sequence=1, fallback_seconds=2, shares=pb.ShareTable(
    users=["bob"], devices=["/dev/x"], read_weights=[2], write_weights=[2]))
CAPS = pb.Allocation(sequence=1, fallback_seconds=2, shares=pb.ShareTable(
    users=["alice", "bob"], devices=["/dev/x"], read_ceilings_bps=[50_000_000, 10_000_000], write_ceilings_bps=[1, 2]))


def shares(state: pb.DesiredState) -> dict[str, pb.ResourceShare]:
    return {v.user or "(default)": v.shares[0] for v in [*state.vnodes, state.default_vnode]}


def test_a_weight_backend_takes_the_allocations_weights_else_priorities_and_keeps_floors_and_ceilings():
    got = shares(effective_state(wc_state(WEIGHTS), shares_by_weight=True))
    assert got["alice"].read.ceiling_bps == 0
    assert (got["bob"].read.ceiling_bps, got["bob"].read.floor_bps) == (20_000_000, 5_000_000)
    # BFQ's integers per device, ratios kept (bob's local weight from the allocation: 2 of alice's 8).
    assert (got["alice"].read.weight, got["bob"].read.weight, got["(default)"].write.weight) == (1000, 250, 125)


def test_a_cap_only_backend_takes_the_allocations_ceilings_or_until_then_the_priority_split_under_ceilings():
    got = shares(effective_state(wc_state(CAPS), shares_by_weight=False))
    assert (got["alice"].read.ceiling_bps, got["bob"].read.ceiling_bps) == (50_000_000, 10_000_000)
    assert (got["alice"].read.weight, got["bob"].read.floor_bps) == (0, 0)
    got = shares(effective_state(wc_state(), shares_by_weight=False))
    assert (got["alice"].read.ceiling_bps, got["alice"].write.ceiling_bps) == (40_000_000, 20_000_000)  # 8/12 of 60, 30
    assert (got["bob"].read.ceiling_bps, got["bob"].write.ceiling_bps) == (20_000_000, 10_000_000)      # 4/12, under 20
    assert got["(default)"].read.ceiling_bps == 6_000_000


def test_a_table_whose_arrays_do_not_add_up_is_no_allocation():
    broken = pb.Allocation(sequence=1, shares=pb.ShareTable(users=["alice", "bob"], devices=["/dev/x"],
                                                            read_ceilings_bps=[1], write_ceilings_bps=[1]))
    got = shares(effective_state(wc_state(broken), shares_by_weight=False))
    assert got["alice"].read.ceiling_bps == 40_000_000   # the priority split, as with none


def test_without_the_coordinator_a_weight_backend_falls_back_to_the_priority_weights():
    fallback = effective_state(static_state(wc_state(WEIGHTS)), shares_by_weight=True)
    assert shares(fallback)["bob"].read.weight == 500 and not fallback.HasField("allocation")   # 4 of alice's 8


def test_the_reconciler_hands_local_weights_floors_and_capacities_to_the_backend():
    from vnode_sync.agents.storage.reconciler import Reconciler
    from vnode_sync.kernel.types import DeviceCapacity, DeviceNumber

    class NoThreads:
        name, shared_process = "none", False

        def scan(self, users):
            return []

    backend = RecordingBackend()
    Reconciler(backend, NoThreads(), {"/dev/x": DeviceNumber(7, 9)}).apply(
        effective_state(wc_state(), shares_by_weight=True))
    (bob,) = backend.applied["vnode.bob"]
    assert (bob.weight, bob.read_bps) == (500, 20_000_000)   # BFQ's integer: 4 of alice's 8
    assert backend.capacities == [DeviceCapacity(DeviceNumber(7, 9), 60_000_000, 30_000_000)]


def test_a_backend_that_shares_the_node_gets_the_node_share_as_sent_with_no_sum_over_devices():
    """Two devices, and the node's own share (device ""): the node's floor and ceiling are the user's,
    once, and its weight the step's for the node."""
    from vnode_sync.agents.storage.reconciler import Reconciler
    from vnode_sync.kernel.types import DeviceNumber, Share, Shares

    class NoThreads:
        name, shared_process = "none", False

        def scan(self, users):
            return []

    bounds = pb.Share(ceiling_bps=20_000_000, floor_bps=5_000_000)
    state = pb.DesiredState(
        generation=5, node_id="n1", sharing="work-conserving",
        devices=[pb.Device(name=d, read_bps=60_000_000, write_bps=30_000_000) for d in ("/dev/x", "/dev/y")],
        vnodes=[pb.VNodeSpec(user="bob", priority=4, shares=[pb.ResourceShare(device=d, read=bounds, write=bounds)
                                                             for d in ("/dev/x", "/dev/y", "")])],
        allocation=pb.Allocation(sequence=1, shares=pb.ShareTable(users=["bob"], devices=[""], read_weights=[2.5],
                                                                  write_weights=[1.5])))
    backend = RecordingBackend()
    Reconciler(backend, NoThreads(), {"/dev/x": DeviceNumber(7, 9), "/dev/y": DeviceNumber(7, 10)}).apply(
        effective_state(state, shares_by_weight=True))
    assert backend.node["vnode.bob"] == Shares(Share(2.5, 5_000_000, 20_000_000), Share(1.5, 5_000_000, 20_000_000))
    assert [l.read_bps for l in backend.applied["vnode.bob"]] == [20_000_000, 20_000_000]


def test_each_edge_reads_only_its_own_part_of_the_table():
    """A weight edge sent a cap-only edge's table (it registered as the other kind since) takes no cap
    for a weight: it weighs by priority; a cap-only edge sent weights splits by priority."""
    weighed = shares(effective_state(wc_state(CAPS), shares_by_weight=True))
    assert (weighed["alice"].read.weight, weighed["bob"].read.weight) == (1000, 500)   # 8 : 4
    capped = shares(effective_state(wc_state(WEIGHTS), shares_by_weight=False))
    assert capped["alice"].read.ceiling_bps == 40_000_000                             # 8/12 of 60
