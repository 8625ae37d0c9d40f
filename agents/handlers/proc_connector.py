"""Thread events for one process: the netlink process connector, or fast polling without it.

The process connector (kernel `drivers/connector/cn_proc.c`, uapi `linux/cn_proc.h`)
multicasts a record for every fork (threads included: child_pid is the TID, child_tgid
the process), exec, comm change (prctl PR_SET_NAME) and exit on the host. It needs
CONFIG_PROC_EVENTS and CAP_NET_ADMIN. Each record carries `ktime_get_ns()`, the same
clock as `time.monotonic_ns()`, which lets benchmarks time capture from thread birth.

Every record goes to every listener, so a busy host (job start-up, JVMs making and
naming threads) would wake the agent hundreds of times a second for other processes.
`ProcConnector.watch(tgid)` attaches a classic BPF socket filter that lets through only
exec records and records about the watched process; the kernel drops the rest before
they are queued, so the agent wakes only for what it acts on.

Where the connector is missing or refuses us, `PollingThreadEvents` lists
/proc/<pid>/task every few milliseconds instead; `describe()` says which is in use.
"""

import ctypes
import errno
import logging
import os
import select
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Protocol

from vnode_sync.kernel.procfs import task_ids

log = logging.getLogger(__name__)

NETLINK_CONNECTOR = 11
CN_IDX_PROC = 1
CN_VAL_PROC = 1
NLMSG_NOOP, NLMSG_ERROR, NLMSG_DONE, NLMSG_OVERRUN = 1, 2, 3, 4
PROC_CN_MCAST_LISTEN, PROC_CN_MCAST_IGNORE = 1, 2
SO_RCVBUFFORCE = 33
SO_ATTACH_FILTER = 26

PROC_EVENT_NONE = 0x0
PROC_EVENT_FORK = 0x1
PROC_EVENT_EXEC = 0x2
PROC_EVENT_COMM = 0x200
PROC_EVENT_EXIT = 0x80000000

_NLMSGHDR = struct.Struct("=IHHII")      # len, type, flags, seq, pid
_CN_MSG = struct.Struct("=IIIIHH")       # cb_id.idx, cb_id.val, seq, ack, len, flags
_EVENT_HEADER = struct.Struct("=IIQ")    # what, cpu, timestamp_ns
_FORK = struct.Struct("=iiii")           # parent_pid, parent_tgid, child_pid, child_tgid
_PID_TGID = struct.Struct("=ii")         # exec, and the first fields of comm and exit
_COMM = struct.Struct("=ii16s")

# Byte offsets in a record, from the start of its netlink header: the event's `what`, the
# tgid of the process it is about (process_tgid; parent_tgid for a fork, whose parent is
# the creator's parent for a thread), and a fork's child_tgid.
_WHAT_AT = _NLMSGHDR.size + _CN_MSG.size
_TGID_AT = _WHAT_AT + _EVENT_HEADER.size + 4
_CHILD_TGID_AT = _WHAT_AT + _EVENT_HEADER.size + 12
# classic BPF opcodes (linux/filter.h)
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_RET_K = 0x20, 0x15, 0x06
_SOCK_FILTER = struct.Struct("=HBBI")    # code, jt, jf, k


class EventSourceUnavailable(OSError):
    """The process connector cannot be used here (kernel option, privilege, or no events)."""


@dataclass(frozen=True)
class ProcEvent:
    """One process-connector record; `tid`/`tgid` are the thread and its process."""

    kind: int
    tid: int
    tgid: int
    timestamp_ns: int
    comm: str | None = None


def parse_proc_events(datagram: bytes) -> list[ProcEvent]:
    """Decode the netlink messages in one datagram; records we do not use are skipped."""
    events = []
    offset = 0
    while offset + _NLMSGHDR.size <= len(datagram):
        length, msg_type, _, _, _ = _NLMSGHDR.unpack_from(datagram, offset)
        if length < _NLMSGHDR.size:
            break
        body = offset + _NLMSGHDR.size
        if msg_type == NLMSG_DONE and body + _CN_MSG.size + _EVENT_HEADER.size <= offset + length:
            idx, val, _, _, payload_len, _ = _CN_MSG.unpack_from(datagram, body)
            if (idx, val) == (CN_IDX_PROC, CN_VAL_PROC):
                event = _decode_event(datagram, body + _CN_MSG.size)
                if event is not None:
                    events.append(event)
        offset += (length + 3) & ~3  # NLMSG_ALIGN
    return events


def _decode_event(buf: bytes, at: int) -> ProcEvent | None:
    what, _, stamp = _EVENT_HEADER.unpack_from(buf, at)
    data = at + _EVENT_HEADER.size
    if what == PROC_EVENT_FORK:
        _, _, child_pid, child_tgid = _FORK.unpack_from(buf, data)
        return ProcEvent(what, child_pid, child_tgid, stamp)
    if what == PROC_EVENT_COMM:
        pid, tgid, raw = _COMM.unpack_from(buf, data)
        return ProcEvent(what, pid, tgid, stamp, raw.split(b"\0", 1)[0].decode(errors="replace"))
    if what in (PROC_EVENT_EXEC, PROC_EVENT_EXIT):
        pid, tgid = _PID_TGID.unpack_from(buf, data)
        return ProcEvent(what, pid, tgid, stamp)
    return None


def _as_loaded(value: int) -> int:
    """A host-order u32 as a BPF absolute load sees it: the filter reads words big-endian."""
    return int.from_bytes(struct.pack("=I", value & 0xFFFFFFFF), "big")


def watch_filter(tgid: int | None) -> bytes:
    """The socket filter program: keep exec records, and the others only about `tgid`
    (a fork only when the child is in `tgid`); with `tgid` None, exec records alone."""
    watched = _as_loaded(tgid or 0)  # no process has TGID 0: None keeps exec records only
    program = [
        (_BPF_LD_W_ABS, 0, 0, _WHAT_AT),
        (_BPF_JEQ_K, 5, 0, _as_loaded(PROC_EVENT_EXEC)),     # -> keep
        (_BPF_JEQ_K, 0, 2, _as_loaded(PROC_EVENT_FORK)),     # not a fork -> process tgid
        (_BPF_LD_W_ABS, 0, 0, _CHILD_TGID_AT),
        (_BPF_JEQ_K, 2, 3, watched),                         # -> keep, or drop
        (_BPF_LD_W_ABS, 0, 0, _TGID_AT),
        (_BPF_JEQ_K, 0, 1, watched),                         # -> keep, or drop
        (_BPF_RET_K, 0, 0, 0xFFFFFFFF),                      # keep: the whole record
        (_BPF_RET_K, 0, 0, 0),                               # drop
    ]
    return b"".join(_SOCK_FILTER.pack(*instruction) for instruction in program)


def _listen_request(nl_pid: int, op: int) -> bytes:
    payload = struct.pack("=I", op)
    cn = _CN_MSG.pack(CN_IDX_PROC, CN_VAL_PROC, 0, 0, len(payload), 0) + payload
    return _NLMSGHDR.pack(_NLMSGHDR.size + len(cn), NLMSG_DONE, 0, 0, nl_pid) + cn


class ProcConnector:
    """A subscribed process-connector socket. Raises EventSourceUnavailable when it cannot be."""

    def __init__(self, receive_buffer: int = 8 << 20):
        try:
            self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_CONNECTOR)
        except OSError as e:
            raise EventSourceUnavailable(e.errno, f"no netlink connector socket: {e.strerror}") from e
        try:
            try:  # a burst of forks elsewhere on the host must not overflow us
                self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, receive_buffer)
            except OSError:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
            self.sock.bind((0, CN_IDX_PROC))
            self.nl_pid = self.sock.getsockname()[0]
            self.sock.sendto(_listen_request(self.nl_pid, PROC_CN_MCAST_LISTEN), (0, 0))
        except OSError as e:
            self.sock.close()
            raise EventSourceUnavailable(e.errno, f"cannot subscribe to process events: {e.strerror} "
                                                  "(needs CAP_NET_ADMIN and CONFIG_PROC_EVENTS)") from e
        self.sock.setblocking(False)
        self.lost = False  # set when the kernel dropped records because we read too slowly

    def watch(self, tgid: int | None) -> None:
        """From now on the kernel queues only exec records and those about `tgid` (see
        watch_filter); records already queued are still delivered."""
        program = watch_filter(tgid)
        buffer = ctypes.create_string_buffer(program, len(program))
        fprog = struct.pack("HL", len(program) // _SOCK_FILTER.size, ctypes.addressof(buffer))  # struct sock_fprog
        self.sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)  # the kernel copies the program

    def fileno(self) -> int:
        return self.sock.fileno()

    def read(self, timeout: float) -> list[ProcEvent]:
        """The records that arrive within `timeout` seconds of the first wait (maybe none)."""
        ready, _, _ = select.select([self.sock], [], [], max(0.0, timeout))
        if not ready:
            return []
        events: list[ProcEvent] = []
        while True:
            try:
                datagram = self.sock.recv(65536)
            except BlockingIOError:
                return events
            except OSError as e:
                if e.errno == errno.ENOBUFS:
                    self.lost = True
                    continue
                raise
            events.extend(parse_proc_events(datagram))

    def close(self) -> None:
        try:
            self.sock.sendto(_listen_request(self.nl_pid, PROC_CN_MCAST_IGNORE), (0, 0))
        except OSError:
            pass
        self.sock.close()

    def self_test(self, timeout: float = 0.5) -> bool:
        """Start a thread of our own and see its fork record arrive: proves events really flow."""
        own = os.getpid()
        seen: set[int] = set()
        probe = threading.Thread(target=lambda: seen.add(threading.get_native_id()), name="cn-probe")
        probe.start()
        probe.join()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in self.read(deadline - time.monotonic()):
                if event.kind == PROC_EVENT_FORK and event.tgid == own and event.tid in seen:
                    return True
        return False


@dataclass
class ThreadChanges:
    """What happened to the watched process's threads since the last wait."""

    born: dict[int, int] = field(default_factory=dict)      # TID -> birth, monotonic ns
    renamed: dict[int, str] = field(default_factory=dict)   # TID -> new comm
    exited: set[int] = field(default_factory=set)
    started: set[int] = field(default_factory=set)          # PIDs that exec'd (a new process?)
    lost: bool = False  # records may be missing: rescan everything

    def wants_attention(self) -> bool:
        return bool(self.born or self.renamed or self.started or self.lost)


class ThreadEvents(Protocol):
    """Wakes its caller when threads of one process are born or renamed."""

    def describe(self) -> str: ...

    def wait(self, tgid: int | None, timeout: float) -> ThreadChanges:
        """Return as soon as something happens to `tgid`'s threads, or after `timeout` seconds.

        With `tgid` None (the process is not known yet) new processes wake the caller.
        """
        ...

    def close(self) -> None: ...


_NOT_WATCHING = -1  # no process has TGID -1


class NetlinkThreadEvents:
    """Thread events from the process connector; records about other processes are dropped,
    by the kernel (socket filter) and again here for those queued before the filter changed."""

    def __init__(self, connector: ProcConnector):
        self.connector = connector
        self._watched: int | None = _NOT_WATCHING  # no filter until the first wait: keep what comes before

    def describe(self) -> str:
        return "netlink process connector (fork/comm/exit events, filtered in the kernel)"

    def wait(self, tgid: int | None, timeout: float) -> ThreadChanges:
        if tgid != self._watched:
            try:
                self.connector.watch(tgid)
            except OSError as e:  # still correct without it: records are filtered here as well
                log.warning("thread events: no kernel-side filter (%s); every host record wakes the agent", e)
            self._watched = tgid
        changes = ThreadChanges()
        deadline = time.monotonic() + timeout
        while True:
            for event in self.connector.read(deadline - time.monotonic()):
                if event.kind == PROC_EVENT_EXEC:
                    if tgid is None or event.tgid == tgid:
                        changes.started.add(event.tgid)
                elif event.tgid != tgid or tgid is None:
                    continue
                elif event.kind == PROC_EVENT_FORK:
                    changes.born[event.tid] = event.timestamp_ns
                elif event.kind == PROC_EVENT_COMM:
                    changes.renamed[event.tid] = event.comm or ""
                elif event.kind == PROC_EVENT_EXIT:
                    changes.exited.add(event.tid)
            if self.connector.lost:
                self.connector.lost = False
                changes.lost = True
            if changes.wants_attention() or time.monotonic() >= deadline:
                return changes

    def close(self) -> None:
        self.connector.close()


class PollingThreadEvents:
    """Lists /proc/<tgid>/task every `interval` seconds and reports the difference.

    Comm changes are not seen here; the caller re-reads the comm of young threads.
    """

    def __init__(self, proc_root: str = "/proc", interval: float = 0.002, reason: str = ""):
        self.proc_root = proc_root
        self.interval = interval
        self.reason = reason
        self._tgid: int | None = None
        self._known: set[int] = set()

    def describe(self) -> str:
        why = f" ({self.reason})" if self.reason else ""
        return f"polling /proc every {self.interval * 1000:g} ms{why}"

    def _tasks(self, tgid: int) -> set[int] | None:
        tids = task_ids(self.proc_root, tgid)
        return None if tids is None else set(tids)

    def wait(self, tgid: int | None, timeout: float) -> ThreadChanges:
        changes = ThreadChanges()
        if tgid is None:
            time.sleep(timeout)
            changes.lost = True  # the caller should look for the process again
            return changes
        if tgid != self._tgid:
            self._tgid, self._known = tgid, self._tasks(tgid) or set()
        deadline = time.monotonic() + timeout
        while True:
            current = self._tasks(tgid)
            if current is None:
                changes.exited |= self._known
                changes.started.add(tgid)
                self._known = set()
                return changes
            now = time.monotonic_ns()
            for tid in current - self._known:
                changes.born[tid] = now
            changes.exited |= self._known - current
            self._known = current
            if changes.born or time.monotonic() >= deadline:
                return changes
            time.sleep(min(self.interval, max(0.0, deadline - time.monotonic())))

    def close(self) -> None:
        pass


def open_thread_events(proc_root: str = "/proc", source: str = "auto",
                       poll_interval: float = 0.002) -> ThreadEvents:
    """`source`: "netlink", "poll", or "auto" (netlink when it works, else polling)."""
    if source not in ("auto", "netlink", "poll"):
        raise ValueError(f"event source {source!r} is not one of auto, netlink, poll")
    if source == "poll":
        return PollingThreadEvents(proc_root, poll_interval, "configured")
    reason = ""
    if proc_root.rstrip("/") != "/proc":
        reason = f"proc_root {proc_root} is not the live /proc"
    else:
        try:
            connector = ProcConnector()
        except EventSourceUnavailable as e:
            reason = str(e)
        else:
            if connector.self_test():
                return NetlinkThreadEvents(connector)
            connector.close()
            reason = "subscribed, but our own test thread produced no fork event"
    if source == "netlink":
        raise EventSourceUnavailable(errno.ENOTSUP, f"netlink process connector: {reason}")
    log.warning("thread events: falling back to polling: %s", reason)
    return PollingThreadEvents(proc_root, poll_interval, reason)
