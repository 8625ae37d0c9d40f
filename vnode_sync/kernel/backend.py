"""The enforcement seam, VNode names, and detection of what the host has.

Two protocols, because backends differ in one thing: whether a user's I/O is charged by
where its handler threads sit.
- LimitEnforcer, what every backend is (blkio-v1, io-v2, Lustre TBF, the DataNode's
  throttler): VNodes with limits, and their usage read in one pass for all VNodes (Lustre
  reads each OST's job_stats once per report, not once per user) together with whether each
  is held at its limit (False where a backend cannot tell).
- ThreadPlacer, what only cgroup backends are: moving handler threads (or, on cgroup v2,
  whole processes) into VNodes.
A LimitEnforcer names its placer in the attribute `placer`: itself for the cgroup backends,
None for backends whose limits find the user by themselves (a TBF rule matches a uid; the
DataNode's throttler knows the user of each transfer). Callers test `backend.placer is None`,
never the backend's class, so a new backend is one more implementation, not one more case.

Errors from the kernel cross this seam as vnode-sync's own (cgroupfs.refused): ThreadGone
for a thread that exited, KernelError naming path, value and what the file allows.
"""

import os
from dataclasses import dataclass, field
from typing import Protocol

from vnode_sync.errors import InvalidArgument
from vnode_sync.kernel.types import DeviceCapacity, DeviceLimits, DeviceNumber, IoCounters, Shares

USER_VNODE_PREFIX = "vnode."
DEFAULT_VNODE = "vnode-default"


def vnode_name(user: str | None) -> str:
    """The cgroup directory name of a user's VNode (user names are validated before this)."""
    return DEFAULT_VNODE if not user else USER_VNODE_PREFIX + user


def user_of_vnode(name: str) -> str | None:
    if name == DEFAULT_VNODE:
        return None
    if name.startswith(USER_VNODE_PREFIX):
        return name[len(USER_VNODE_PREFIX):]
    raise InvalidArgument(f"{name!r} is not a VNode name")


def is_vnode_name(name: str) -> bool:
    return name == DEFAULT_VNODE or name.startswith(USER_VNODE_PREFIX)


# VNodeUsage.held_source: how the backend knows a VNode is held at its limit.
HELD_MEASURED = "measured"      # its throttle times every wait (the DataNode's throttler)
HELD_ESTIMATED = "estimated"    # from its own counters against the limit (Lustre TBF)


@dataclass(frozen=True)
class VNodeUsage:
    """What one VNode did: cumulative counters per device, and whether it is held at its limit."""

    devices: dict[DeviceNumber, IoCounters] = field(default_factory=dict)
    held_at_limit: bool = False   # False also where the backend cannot tell
    # HELD_MEASURED or HELD_ESTIMATED; None: the backend cannot tell (a cgroup does not say whether
    # it throttled), and the agent estimates from the rate against the limit.
    held_source: str | None = None
    # Measured only: cumulative seconds the backend's throttle made this VNode's I/O wait, summed
    # over its transfers (several transfers waiting at once add up). None where not measured.
    read_wait_seconds: float | None = None
    write_wait_seconds: float | None = None


@dataclass(frozen=True)
class VolumeQueue:
    """One data volume of a node whose backend dispatches its packets itself (the DataNode's SFQ(D),
    docs/edge.md), as of the backend's last usage read: how deep it lets the volume's queue be, what
    the volume moved over the dispatcher's last interval, and how many packets waited for a slot."""

    volume: str               # the DataNode's storage ID, or "node" where a block's volume is not known
    depth: int
    moved_bytes_per_second: float
    waiting: int


class ThreadPlacer(Protocol):
    """Moves handler threads into VNodes: what cgroup backends do besides enforcing limits."""

    places_threads: bool      # False: placing a TID moves its whole process (cgroup v2 io)

    def members(self, vnode: str) -> set[int]: ...
    def place(self, vnode: str, tid: int) -> None: ...       # ThreadGone if it has exited
    def release(self, tid: int) -> None: ...                 # back to unlimited; gone is fine


class LimitEnforcer(Protocol):
    """What every backend is: one VNode per user under the agent's own root, each with its limits.

    Nothing outside the agent's root is touched. Backends whose limits follow the user by
    themselves (Lustre TBF rules match a uid; the DataNode's throttler knows the user of each
    transfer) have no `placer`; cgroup backends are their own placer.
    """

    name: str                         # "blkio-v1", "io-v2", "lustre-tbf", ...
    placer: ThreadPlacer | None
    # True where the backend shares each device by the VNodes' local weights at every request (BFQ,
    # iocost, the DataNode's scheduler): work-conserving by itself, so the coordinator sends it local
    # weights and its ceilings are only the users' limits; False: it can only cap, and is sent caps as ceilings.
    shares_by_weight: bool
    # True where that sharing is per node, not per device (the DataNode's one scheduler per direction):
    # the center then weighs the node as one resource per direction, and the backend takes the node's
    # share (apply_limits' `node`) rather than its devices'.
    shares_per_node: bool
    # Where that sharing is by a dispatcher of the backend's own (the DataNode's): each volume's queue
    # as of the last usage() read. () for every other backend, before the first read, and after a read
    # that failed. Kept for the metrics to read at scrape time.
    volume_queues: tuple[VolumeQueue, ...]

    def limitations(self) -> list[str]: ...
    # Why it cannot enforce the shares on this host now (a hook the Java agent could not weave, a
    # handshake refused); None while it does. Asked after each reconcile pass.
    def not_enforcing(self) -> str | None: ...
    # What it enforces with less than it should while it does enforce (the DataNode's Java agent of another
    # release), one line each; [] when nothing. Asked after each reconcile pass.
    def degraded(self) -> list[str]: ...
    # What the node's devices are configured to deliver (the desired state's), before apply_limits.
    def set_capacities(self, capacities: list[DeviceCapacity]) -> None: ...
    def setup(self) -> None: ...
    def vnodes(self) -> list[str]: ...
    # `uid`: the user's (a job's VNode: its user's); `job`: a job's VNode's batch job id, "" for a user's. Only
    # a backend that matches I/O by identity (Lustre TBF) needs them.
    def ensure_vnode(self, vnode: str, uid: int | None = None, job: str = "") -> None: ...
    def remove_vnode(self, vnode: str) -> None: ...
    def limits(self, vnode: str) -> dict[DeviceNumber, DeviceLimits]: ...
    # Its shares: per device (`limits`), and of the node as a whole (`node`); a backend takes the one it
    # shares by (shares_per_node), as the desired state carries both.
    def apply_limits(self, vnode: str, limits: list[DeviceLimits], node: Shares = Shares()) -> None: ...
    # After a reconcile pass: a backend that buffers limits sends them whole; who is who, for
    # backends that identify users themselves (uid -> user, (client ip, port) -> user).
    def commit(self, uids: dict[int, str], connections: dict[tuple[str, int], str]) -> None: ...
    def usage(self) -> dict[str, VNodeUsage]: ...  # every VNode in one pass
    def teardown(self) -> None: ...


@dataclass(frozen=True)
class HostCgroups:
    """Where the hierarchies are mounted; pass a temp dir in tests."""

    root: str = "/sys/fs/cgroup"

    @property
    def blkio_v1(self) -> str:
        return os.path.join(self.root, "blkio")

    def has_blkio_v1(self) -> bool:
        return os.path.exists(os.path.join(self.blkio_v1, "blkio.throttle.read_bps_device"))

    @property
    def cpu_v1(self) -> str:
        return os.path.join(self.root, "cpu")

    def has_cpu_v1(self) -> bool:
        return os.path.exists(os.path.join(self.cpu_v1, "cpu.shares"))

    def has_cpu_v2(self) -> bool:
        """Whether a cgroup2 mount offers the cpu controller (threaded: it can weigh single threads)."""
        return self.cpu_v2_mount() is not None

    def cpu_v2_mount(self) -> str | None:
        """The cgroup2 mount that offers the cpu controller, if any."""
        return self._v2_mount_offering("cpu")

    def v2_mount(self) -> str | None:
        """The cgroup2 mount that offers the io controller, if any."""
        return self._v2_mount_offering("io")

    def _v2_mount_offering(self, controller: str) -> str | None:
        for candidate in (self.root, os.path.join(self.root, "unified")):
            try:
                with open(os.path.join(candidate, "cgroup.controllers")) as f:
                    if controller in f.read().split():
                        return candidate
            except OSError:
                continue
        return None
