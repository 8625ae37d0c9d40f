"""The `datanode-throttle` backend: per-user rates enforced inside the DataNode by its Java agent.

A LimitEnforcer with no placer: the Java agent knows the user of each transfer itself (block
token, else the client socket's owner), so no thread is moved and no cgroup is made or
written. Buffered writes are throttled too: the throttle sits where the DataNode receives
the bytes, before the page cache. A user's rate is the sum of its shares over the node's
devices (the DataNode throttles per node, not per disk); counters are reported on the
node's first device. Limits are buffered by apply_limits and sent whole by commit().
"""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated

from pydantic import Field

from vnode_sync.config_loading import Allowed, Settings

from vnode_sync.datanode.channel import Counters, Rates, ThrottleChannel, ThrottleSettings
from vnode_sync.errors import Unavailable
from vnode_sync.kernel.backend import DEFAULT_VNODE, HELD_MEASURED, VNodeUsage, user_of_vnode
from vnode_sync.kernel.types import DeviceLimits, DeviceNumber, IoCounters

log = logging.getLogger(__name__)

# A user waited at least this share of the last report interval in its throttler: held at its limit.
HELD_FRACTION = 0.1


class DataNodeThrottleSettings(Settings):
    """The agent's `datanode_throttle:` section, for backend datanode-throttle."""

    socket: Annotated[str, Field(pattern=r"^/"), Allowed("an absolute path")]
    """The Java agent's control socket: its -javaagent socket= argument (docs/datanode-throttle.md)."""


@dataclass
class _Sample:
    at: float
    wait_ns: int


@dataclass
class DataNodeThrottleBackend:
    channel: ThrottleChannel
    devices: list[DeviceNumber] = field(default_factory=list)
    clock: Callable[[], float] = time.monotonic

    name = "datanode-throttle"
    placer = None

    def __post_init__(self):
        self._limits: dict[str, list[DeviceLimits]] = {}
        self._applied: ThrottleSettings | None = None
        self._generation = 0
        self._samples: dict[str, _Sample] = {}

    def limitations(self) -> list[str]:
        return ["rates are per DataNode, not per disk: a user's rate is the sum of its device shares",
                "a client on another host with block access tokens off is charged to the default VNode "
                "unless a compute agent reports its connection"]

    def setup(self) -> None:
        """Nothing to make: the Java agent holds the throttlers."""

    def vnodes(self) -> list[str]:
        return sorted(self._limits)

    def ensure_vnode(self, vnode: str, uid: int | None = None) -> None:
        self._limits.setdefault(vnode, [])

    def remove_vnode(self, vnode: str) -> None:
        self._limits.pop(vnode, None)

    def limits(self, vnode: str) -> dict[DeviceNumber, DeviceLimits]:
        return {l.device: l for l in self._limits.get(vnode, [])}

    def apply_limits(self, vnode: str, limits: list[DeviceLimits]) -> None:
        self._limits[vnode] = list(limits)

    def _rates(self, vnode: str) -> Rates:
        limits = self._limits.get(vnode, [])
        return Rates(sum(l.read_bps for l in limits), sum(l.write_bps for l in limits))

    def commit(self, uids: dict[int, str], connections: dict[tuple[str, int], str]) -> None:
        """Send the whole set if it changed; the DataNode applies it at once or not at all."""
        users = {user_of_vnode(v): self._rates(v) for v in self._limits if v != DEFAULT_VNODE}
        wanted = ThrottleSettings(self._generation, self._rates(DEFAULT_VNODE), users, dict(uids), dict(connections))
        if self._applied is not None and wanted == self._applied:
            return
        self._generation += 1
        wanted = ThrottleSettings(self._generation, wanted.default, users, wanted.uids, wanted.connections)
        self.channel.apply(wanted)
        self._applied = wanted
        log.info("DataNode throttle: generation %d, default %s, users %s", self._generation, wanted.default,
                 {u: (r.read_bps, r.write_bps) for u, r in sorted(users.items())})

    def usage(self) -> dict[str, VNodeUsage]:
        stats = self.channel.stats()
        if self._applied is not None and stats.generation < self._applied.generation:
            self._applied = None  # the DataNode restarted and lost our rates: send them again
        now = self.clock()
        counted = {DEFAULT_VNODE: stats.default, **{f"vnode.{u}": c for u, c in stats.users.items()}}
        return {vnode: VNodeUsage(self._on_first_device(c), self._held(vnode, c, now), HELD_MEASURED,
                                  c.read_wait_ns / 1e9, c.write_wait_ns / 1e9)
                for vnode, c in counted.items() if vnode in self._limits}

    def _on_first_device(self, c: Counters) -> dict[DeviceNumber, IoCounters]:
        if not self.devices:
            return {}
        return {self.devices[0]: IoCounters(c.read_bytes, c.write_bytes, c.read_ops, c.write_ops)}

    def _held(self, vnode: str, c: Counters, now: float) -> bool:
        wait = c.read_wait_ns + c.write_wait_ns
        previous, self._samples[vnode] = self._samples.get(vnode), _Sample(now, wait)
        if previous is None or now <= previous.at:
            return False
        return (wait - previous.wait_ns) / 1e9 >= HELD_FRACTION * (now - previous.at)

    def teardown(self) -> None:
        """Lift every limit in the DataNode (it keeps running); its counters stay."""
        self._limits.clear()
        try:
            self._generation += 1
            self.channel.apply(ThrottleSettings(self._generation, Rates()))
        except Unavailable as e:
            log.warning("DataNode throttle: could not lift the limits: %s", e)
