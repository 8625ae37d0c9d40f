"""The `datanode-throttle` backend: per-user shares enforced inside the DataNode by its Java agent.

A LimitEnforcer with no placer: the Java agent knows the user of each transfer itself (block
token, else the client socket's owner), so no thread is moved for its I/O. With `cpu_shares` (off by
default) each transfer thread is also moved, for its op, into its user's cpu group (cgroup v1 cpu, or
v2's threaded cpu; cpu_shares.py, docs/edge.md G10); without it no cgroup is made or written. Buffered writes are held too: the dispatcher sits where the DataNode receives the
bytes, before the page cache. The Java agent dispatches each data volume by the node's weights
(docs/edge.md), so it takes each user's share of the node as a whole (the desired state's node
share, apply_limits' `node`) as it is, and no device's; the node's configured capacity (the sum of
its devices') is sent for what it reports, and the edge does not use it. Counters are the node's
as a whole (WHOLE_NODE, the wire's device ""). Shares are buffered by apply_limits and sent whole by commit().

With `sharing: weights` (the default) the Java agent shares each volume by weight at every packet
(work-conserving by itself), and takes the coordinator's weight step's local weights. `sharing:
rates` registers the node as cap-only: it is sent no weights, and the agent only holds each user
to its ceiling (the step's caps, or the static shares). Each usage() also keeps each
volume's queue from STATS (its depth, waiting packets, what it moved) for the metrics.

The Java agent must pass the handshake (protocol 2) and report every hook it needs as woven;
otherwise not_enforcing() says why and the storage agent reports the node as not enforcing. A Java agent
of another release than this storage agent's (its HELLO's version) still enforces, if it passes the
handshake; degraded() names the two versions (one release is one version for everything: make dist),
and each required setting the HELLO shows missing (requirements.py: the JVM, block tokens).
"""

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import Field

from vnode_sync.config_loading import Allowed, Settings
from vnode_sync.datanode.channel import (REQUIRED_HOOKS, AgentHello, Counters, NodeCapacity, Share,
                                         Shares, ThrottleChannel, ThrottleSettings)
from vnode_sync.datanode.cpu_shares import CpuShares
from vnode_sync.datanode.requirements import unmet
from vnode_sync.distribution import version as release_version
from vnode_sync.errors import Unavailable, VNodeSyncError
from vnode_sync.kernel.backend import DEFAULT_VNODE, HELD_MEASURED, VNodeUsage, user_of_vnode
from vnode_sync.kernel.held import waited_held
from vnode_sync.kernel.types import WHOLE_NODE, DeviceCapacity, DeviceLimits, DeviceNumber, IoCounters

log = logging.getLogger(__name__)

# Weights go to the Java agent scaled so the largest on the node is this (only ratios matter; the
# scale keeps small ones exact in the decimal on the wire).
WEIGHT_SCALE = 1000.0
SHARINGS = ("weights", "rates")


class DataNodeThrottleSettings(Settings):
    """The agent's `datanode_throttle:` section, for backend datanode-throttle."""

    socket: Annotated[str, Field(pattern=r"^/"), Allowed("an absolute path")]
    """The Java agent's control socket: its -javaagent socket= argument (docs/datanode-throttle.md)."""
    sharing: Literal[SHARINGS] = "weights"
    """weights: the Java agent shares the node by local weight at every packet (work-conserving by
    itself). rates: it only caps each user at the rates it is sent (the weight step's caps)."""
    cpu_shares: bool = False
    """Move each transfer thread, for its op, into its user's cpu group weighed by the user's weight, so
    the cores are shared by weight too where the CPU binds (docs/edge.md G10). Needs the cgroup v1 cpu
    controller, or cgroup v2's cpu with a DataNode cgroup that can hold a threaded subtree (on systemd:
    Delegate=yes on its unit); without them the node runs on, its cores shared as CFS does, and the
    agent says why. Off by default: on the CPU-bound profile it moved 4-11 % less than without it, for
    a reason not yet found."""


@dataclass
class _Sample:
    at: float
    wait_ns: int


@dataclass
class DataNodeThrottleBackend:
    channel: ThrottleChannel
    devices: list[DeviceNumber] = field(default_factory=list)
    clock: Callable[[], float] = time.monotonic
    sharing: str = "weights"
    version: str = field(default_factory=release_version)   # this storage agent's, which the jar's should be
    cpu: CpuShares | None = None

    name = "datanode-throttle"
    placer = None
    volume_queues = ()   # until usage() reads the Java agent's STATS

    def __post_init__(self):
        self._limits: dict[str, list[DeviceLimits]] = {}
        self._shares: dict[str, Shares] = {}   # VNode -> its share of the node, as applied
        self._capacities: list[DeviceCapacity] = []
        self._applied: ThrottleSettings | None = None
        self._generation = 0
        self._samples: dict[str, _Sample] = {}
        self._hello: AgentHello | None = None
        self._refused: str | None = None
        self._reported: str | None = None

    shares_per_node = True   # one scheduler per direction for the whole DataNode

    @property
    def shares_by_weight(self) -> bool:
        return self.sharing == "weights"

    def limitations(self) -> list[str]:
        return ["shares are per DataNode, not per disk: a user has one weight, floor and ceiling per "
                "direction on the node",
                "a client on another host with block access tokens off is charged to the default VNode "
                "unless a compute agent reports its connection"] + (
                [self.cpu.limitation()] if self.cpu is not None and self.cpu.limitation() else [])

    def side_loops(self) -> list[tuple[str, Callable[[threading.Event], None]]]:
        """Loops the storage agent runs beside its own: the CPU shares' watch of the op threads."""
        return [("cpu-shares", self.cpu.run)] if self.cpu is not None else []

    def setup(self) -> None:
        """The handshake, once per DataNode start (and until every hook it needs is woven). A DataNode
        that does not answer or refuses is reported by not_enforcing(); the pass goes on, as it must
        while a DataNode restarts."""
        if self._hello is not None and not self._hello.missing_hooks():
            return
        try:
            hello = self.channel.hello()
        except VNodeSyncError as e:
            self._hello, self._refused = None, str(e)
            return
        if self._hello is None or hello != self._hello:
            missing = hello.missing_hooks()
            log.info("DataNode throttle agent %s, protocol %d, Hadoop %s, hooks %s", hello.version, hello.protocol,
                     hello.hadoop, ", ".join(f"{h}={s}" for h, s in sorted(hello.hooks.items())) or "none")
            if missing:
                log.warning("DataNode throttle agent %s: %s", hello.version, _missing_text(missing))
        self._hello, self._refused = hello, None

    def not_enforcing(self) -> str | None:
        if self._refused is not None:
            why = f"DataNode throttle: {self._refused}"
        elif self._hello is None:
            why = "DataNode throttle: no handshake with the Java agent yet"
        elif missing := self._hello.missing_hooks():
            why = (f"DataNode throttle agent {self._hello.version} (Hadoop {self._hello.hadoop}): "
                   f"{_missing_text(missing)}")
        else:
            why = None
        if why != self._reported:
            (log.warning if why else log.info)("%s", why or "DataNode throttle: enforcing again")
            self._reported = why
        return why

    def degraded(self) -> list[str]:
        # CPU shares refused by the DataNode's cgroup (cgroup v2) show here at once; limitations() only at
        # the next registration.
        cpu = [self.cpu.limitation()] if self.cpu is not None and self.cpu.refused else []
        if self._hello is None:
            return cpu
        other_release = [] if self._hello.version == self.version else [
            f"DataNode throttle: the Java agent is version {self._hello.version}, this storage agent "
            f"{self.version}: install the jar of release {self.version} and restart the DataNode"]
        return other_release + unmet(self._hello) + cpu

    def set_capacities(self, capacities: list[DeviceCapacity]) -> None:
        self._capacities = list(capacities)

    def vnodes(self) -> list[str]:
        return sorted(self._shares)

    def ensure_vnode(self, vnode: str, uid: int | None = None, job: str = "") -> None:
        self._shares.setdefault(vnode, Shares())
        self._limits.setdefault(vnode, [])

    def remove_vnode(self, vnode: str) -> None:
        self._shares.pop(vnode, None)
        self._limits.pop(vnode, None)

    def limits(self, vnode: str) -> dict[DeviceNumber, DeviceLimits]:
        return {l.device: l for l in self._limits.get(vnode, [])}

    def apply_limits(self, vnode: str, limits: list[DeviceLimits], node: Shares = Shares()) -> None:
        """The node's share is what the Java agent enforces; the device limits are kept only to be read
        back (limits())."""
        self._shares[vnode] = node
        self._limits[vnode] = list(limits)

    def _scaled(self, vnode: str, scale: float) -> Shares:
        shares = self._shares.get(vnode, Shares())
        return Shares(*(Share(scale * s.weight, s.floor_bps, s.ceiling_bps) for s in (shares.read, shares.write)))

    def _weight_scale(self) -> float:
        largest = max((s.weight for shares in self._shares.values() for s in (shares.read, shares.write)),
                      default=0.0)
        return WEIGHT_SCALE / largest if largest > 0 else 1.0

    def _node(self) -> NodeCapacity:
        if not self.shares_by_weight:
            return NodeCapacity()
        return NodeCapacity(sum(c.read_bps for c in self._capacities), sum(c.write_bps for c in self._capacities),
                            tuple(self.devices))

    def commit(self, uids: dict[int, str], connections: dict[tuple[str, int], str]) -> None:
        """Send the whole set if it changed; the DataNode applies it at once or not at all."""
        scale = self._weight_scale()
        users = {user_of_vnode(v): self._scaled(v, scale) for v in self._shares if v != DEFAULT_VNODE}
        wanted = ThrottleSettings(self._generation, self._scaled(DEFAULT_VNODE, scale), users, dict(uids),
                                  dict(connections), self._node())
        if self.cpu is not None:
            # A thread's CPU weight is its user's larger direction's: it may read and write.
            self.cpu.set_weights({user: max(shares.read.weight, shares.write.weight)
                                  for user, shares in {None: wanted.default, **users}.items()})
        if self._applied is not None and wanted == self._applied:
            return
        self._generation += 1
        wanted = ThrottleSettings(self._generation, wanted.default, users, wanted.uids, wanted.connections, wanted.node)
        self.channel.apply(wanted)
        self._applied = wanted
        log.info("DataNode throttle: generation %d, capacity %s, default %s, users %s", self._generation,
                 wanted.node, wanted.default, dict(sorted(users.items())))

    def usage(self) -> dict[str, VNodeUsage]:
        self.volume_queues = ()   # a DataNode that does not answer shows no queue rather than its last
        stats = self.channel.stats()
        self.volume_queues = stats.volumes
        if self._applied is not None and stats.generation < self._applied.generation:
            self._applied = None  # the DataNode restarted and lost our shares: send them again
        if self._hello is not None and stats.started_ms != self._hello.started_ms:
            self._hello = None    # another DataNode (perhaps another jar): shake hands again
        now = self.clock()
        counted = {DEFAULT_VNODE: stats.default, **{f"vnode.{u}": c for u, c in stats.users.items()}}
        return {vnode: VNodeUsage({WHOLE_NODE: IoCounters(c.read_bytes, c.write_bytes, c.read_ops, c.write_ops)},
                                  self._held(vnode, c, now), HELD_MEASURED, c.read_wait_ns / 1e9, c.write_wait_ns / 1e9)
                for vnode, c in counted.items() if vnode in self._shares}

    def _held(self, vnode: str, c: Counters, now: float) -> bool:
        wait = c.read_wait_ns + c.write_wait_ns
        previous, self._samples[vnode] = self._samples.get(vnode), _Sample(now, wait)
        if previous is None or now <= previous.at:
            return False
        return waited_held((wait - previous.wait_ns) / 1e9, now - previous.at)

    def teardown(self) -> None:
        """Lift every share in the DataNode (it keeps running); its counters stay."""
        self._limits.clear()
        self._shares.clear()
        if self.cpu is not None:
            self.cpu.teardown()
        try:
            self._generation += 1
            self.channel.apply(ThrottleSettings(self._generation, Shares()))
        except Unavailable as e:
            log.warning("DataNode throttle: could not lift the shares: %s", e)


def _missing_text(missing: dict[str, str]) -> str:
    return "; ".join(f"hook {hook} {state}: {REQUIRED_HOOKS[hook]}" for hook, state in sorted(missing.items())) \
        + ": the node is not enforcing"
