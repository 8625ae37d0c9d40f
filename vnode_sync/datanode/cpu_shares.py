"""CPU by weight for the DataNode's transfer threads (docs/edge.md G10): each thread that serves an op
sits, for that op, in its user's cpu group, whose weight follows the user's: a cgroup v1 `cpu` group
(`cpu.shares`) or, on a cgroup-v2 host, a threaded `cpu` group (`cpu.weight`), whichever the host mounts
(vnode_sync/kernel/cpu_groups.py).

The Java agent says which thread serves whom (`WATCH threads` on its control socket: a snapshot of the
ops in progress, then `THREAD tid=N [user=NAME]` at each op's start, `IDLE tid=N` at its end); this
side, as root, moves the threads. Nothing else is trusted: a user name must pass the project's
validator before it names a directory, and a TID must be a thread of the process at the other end of
the socket (SO_PEERCRED), or the line is skipped.

The groups live in one directory named after the storage agent's subtree, inside the DataNode's own
cpu cgroup, so the DataNode's threads still weigh together what they weighed without vnode-sync: the
directory's shares are a nice-0 thread's for each op in progress (CFS gives each runnable thread of
the DataNode's cgroup that much). Within it, users split by weight; within a user, its threads alike.
A thread whose op ends stays where it is until its next op (a move costs the kernel more than an
idle thread in the wrong group). With no cpu controller mounted, or a DataNode cgroup that cannot hold a
threaded subtree (cgroup v2: cpu_v2.py says what the admin must set), the node shares the cores as CFS
does and `limitation` says why.
"""

import logging
import os
import socket
import struct
import threading
import time
from dataclasses import dataclass

from vnode_sync.errors import InvalidArgument, KernelError, Unsupported, VNodeSyncError
from vnode_sync.kernel.backend import HostCgroups, vnode_name
from vnode_sync.kernel.cgroupfs import CgroupFS
from vnode_sync.kernel.cpu_groups import NICE_0_SHARES, ThreadCpuGroups
from vnode_sync.kernel.cpu_hierarchy import cpu_groups_for, unavailable
from vnode_sync.kernel.cpu_v1 import clamp_shares
from vnode_sync.validation import vnode_name as validate_vnode_name

log = logging.getLogger(__name__)

WATCH = b"WATCH threads\n"
# The largest weight's group gets ten nice-0 threads' shares: a weight 1000 times smaller still gets
# 10, above the kernel's least (2), so ratios hold to 1:1000.
LARGEST_SHARES = 10 * NICE_0_SHARES
# The Java agent writes TICK after 5 s without news (OpThreads.TICK_MS): three missed ones, it is gone.
SILENT_SECONDS = 15.0
RECONNECT_SECONDS = 1.0
READ_SECONDS = 0.5   # how often a blocked read looks whether the agent is stopping


@dataclass(frozen=True)
class OpThread:
    """One line of the watch: TID starts an op of USER (None: DEFAULT), or (idle) its op ended."""

    tid: int
    user: str | None = None
    idle: bool = False


def parse_line(line: str) -> OpThread | None:
    """A THREAD or IDLE line; None for kinds this side does not know (TICK, newer ones). InvalidArgument
    for a known kind that is malformed or names a user the validator refuses."""
    kind, _, rest = line.partition(" ")
    if kind not in ("THREAD", "IDLE"):
        return None
    fields = dict(part.partition("=")[::2] for part in rest.split())
    tid = fields.get("tid", "")
    if not tid.isdigit() or int(tid) <= 0:
        raise InvalidArgument(f"{kind} line without a TID: {line[:80]!r}")
    if kind == "IDLE":
        return OpThread(int(tid), idle=True)
    user = fields.get("user")
    return OpThread(int(tid), validate_vnode_name(user) if user is not None else None)


def peer_pid(s: socket.socket) -> int:
    pid, _, _ = struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return pid


class CpuShares:
    """Follows the Java agent's op threads and keeps each in its user's cpu group."""

    def __init__(self, socket_path: str, group_name: str, host: HostCgroups | None = None,
                 proc_root: str = "/proc", fs: CgroupFS | None = None):
        self.socket_path = socket_path
        self.group_name = group_name
        self.host = host or HostCgroups()
        self.proc_root = proc_root
        self.fs = fs or CgroupFS()
        self.unavailable = unavailable(self.host)
        self.refused: str | None = None   # why the DataNode's cgroup cannot hold the groups (cgroup v2), if so
        self._lock = threading.Lock()
        self._weights: dict[str | None, float] = {}
        self._serving: dict[int, str | None] = {}   # TID -> user of its op in progress (the Java agent's view)
        self._placed: dict[int, str] = {}           # TID -> the group it was moved to
        self._parent_shares = 0
        self.groups: ThreadCpuGroups | None = None
        self._pid = 0
        self._reported: str | None = None
        self._ensured: dict[str, int] = {}          # group -> shares written (skips a mkdir and a read per op)

    def limitation(self) -> str | None:
        return self.unavailable or (f"CPU shares: {self.refused}; transfer threads share the cores as CFS does, "
                                    f"not by weight" if self.refused else None)

    def set_weights(self, weights: dict[str | None, float]) -> None:
        """Each user's weight on this node (None: DEFAULT; 0: not weighed, its threads stay home). Called
        by the reconcile pass: a cgroup the kernel refuses is logged, never raised into it."""
        with self._lock:
            if weights == self._weights:
                return
            self._weights = dict(weights)
            self._ensured.clear()
            if self.groups is None:
                return
            wanted = {vnode_name(u) for u, w in weights.items() if w > 0}
            try:
                for tid, user in list(self._serving.items()):
                    self._place(tid, user)
                for group in self.groups.groups():
                    if group not in wanted:
                        self._forget_group(group)
                        self.groups.remove(group)
            except VNodeSyncError as e:
                log.warning("CPU shares: could not apply new weights (the next op's line tries again): %s", e)

    def _shares(self, user: str | None) -> int:
        weight = self._weights.get(user, 0.0)
        largest = max(self._weights.values(), default=0.0)
        return clamp_shares(LARGEST_SHARES * weight / largest) if weight > 0 and largest > 0 else 0

    def _place(self, tid: int, user: str | None) -> None:
        """TID serves USER now: into the user's group (made or re-weighed as needed), or home."""
        assert self.groups is not None
        shares = self._shares(user if user in self._weights else None)
        group = vnode_name(user if user in self._weights else None)
        if shares <= 0:
            if tid in self._placed:
                self.groups.release(tid)
                del self._placed[tid]
            return
        if self._ensured.get(group) != shares:
            self.groups.ensure(group, shares)
            self._ensured[group] = shares
        if self._placed.get(tid) != group:
            if self.groups.place(group, tid):
                self._placed[tid] = group
            else:
                self._serving.pop(tid, None)
                self._placed.pop(tid, None)

    def _forget_group(self, group: str) -> None:
        self._ensured.pop(group, None)
        for tid in [t for t, g in self._placed.items() if g == group]:
            del self._placed[tid]

    def _set_parent(self) -> None:
        weighed = sum(1 for tid in self._serving if tid in self._placed)
        shares = clamp_shares(NICE_0_SHARES * max(1, weighed))
        if shares != self._parent_shares:
            self.groups.set_parent_shares(shares)
            self._parent_shares = shares

    def take(self, op: OpThread) -> None:
        """One line of the watch, applied."""
        with self._lock:
            if not os.path.isdir(os.path.join(self.proc_root, str(self._pid), "task", str(op.tid))):
                self._serving.pop(op.tid, None)
                self._placed.pop(op.tid, None)
                log.debug("CPU shares: TID %d is no thread of DataNode pid %d (exited?): skipped", op.tid, self._pid)
                return
            if op.idle:
                self._serving.pop(op.tid, None)
            else:
                self._serving[op.tid] = op.user
                self._place(op.tid, op.user)
            self._set_parent()

    def attach(self, pid: int) -> None:
        """The DataNode at the socket's other end is PID: its cpu cgroup is home. Unsupported, after removing
        what an earlier agent left, if that cgroup cannot hold the groups (the refusal says what to set)."""
        groups = cpu_groups_for(self.host, pid, self.group_name, self.proc_root, self.fs)
        with self._lock:
            self._serving.clear()   # the snapshot that follows says what is in progress
            if self.groups is not None and self.groups.home == groups.home and self._pid == pid and not self.refused:
                return
            self._pid = pid
            self.groups = groups
            self._placed.clear()
            self._ensured.clear()
            self._parent_shares = 0
            for group in self.groups.groups():   # an earlier agent's or DataNode's: its threads go home
                self.groups.remove(group)
            self.refused = self.groups.refusal()
            if self.refused:
                self.groups = None   # nothing more is written there: run() logs why, and tries again
                raise Unsupported(self.refused)
            log.info("CPU shares: DataNode pid %d, groups under %s", pid, self.groups.parent)

    def follow(self, stop: threading.Event) -> None:
        """One watch: connect, take the snapshot and every line until the agent goes or STOP is set."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(READ_SECONDS)
            s.connect(self.socket_path)
            self.attach(peer_pid(s))
            s.sendall(WATCH)
            buffer, heard, first = b"", time.monotonic(), True
            while not stop.is_set():
                try:
                    chunk = s.recv(65536)
                except TimeoutError:
                    if time.monotonic() - heard > SILENT_SECONDS:
                        raise KernelError(self.socket_path, f"no word from the Java agent for {SILENT_SECONDS:.0f} s")
                    continue
                if not chunk:
                    return
                heard = time.monotonic()
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for raw in lines:
                    line = raw.decode(errors="replace")
                    if first:
                        first = False
                        if not line.startswith("OK"):
                            raise InvalidArgument(f"the Java agent on {self.socket_path} cannot watch threads "
                                                  f"(too old?): {line[:80]!r}")
                        continue
                    if line.startswith("ERR"):
                        raise InvalidArgument(f"the Java agent on {self.socket_path} ended the watch: {line[4:84]}")
                    try:
                        op = parse_line(line)
                    except InvalidArgument as e:
                        log.warning("CPU shares: skipped a line from the Java agent: %s", e)
                        continue
                    if op is not None:
                        self.take(op)

    def run(self, stop: threading.Event) -> None:
        """Watch until STOP, again after each end (a DataNode restart, an overflow), every RECONNECT_SECONDS."""
        if self.unavailable:
            log.warning("%s", self.unavailable)
            stop.wait()
            return
        while not stop.is_set():
            try:
                self.follow(stop)
                why = "the Java agent closed the watch"
            except (OSError, VNodeSyncError) as e:
                why = str(e)
            except Exception as e:  # noqa: BLE001 - the node goes on without CPU shares; logged, watched again
                why = f"{type(e).__name__}: {e}"
            if not stop.is_set() and why != self._reported:
                log.warning("CPU shares: %s; watching again every %.0f s", why, RECONNECT_SECONDS)
            self._reported = why
            stop.wait(RECONNECT_SECONDS)

    def teardown(self) -> None:
        """Every thread back in the DataNode's own cgroup, every group removed (`vnode-agent --teardown`
        too: it asks the socket whose DataNode it is)."""
        if self.groups is None and not self.unavailable:
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.settimeout(READ_SECONDS)
                    s.connect(self.socket_path)
                    self.attach(peer_pid(s))   # removes what an earlier agent left
            except (OSError, VNodeSyncError) as e:
                log.info("CPU shares: no groups removed for the DataNode on %s (%s); any left went with its threads",
                         self.socket_path, e)
        with self._lock:
            if self.groups is not None:
                try:
                    self.groups.teardown()
                except VNodeSyncError as e:
                    log.warning("CPU shares: could not remove %s: %s", self.groups.parent, e)
            self._serving.clear()
            self._placed.clear()
            self._ensured.clear()
