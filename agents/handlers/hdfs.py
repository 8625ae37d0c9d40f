"""HDFS handler discovery: each DataXceiver thread of one DataNode, and the user it serves.

A DataNode serves every client connection in a thread of its own whose native name
(comm) is "DataXceiver for" (the Java name, truncated to 15 bytes, is set at the start
of DataXceiver.run(), before any block I/O). Capture is a race (architecture.md), so
this plug-in wakes on the netlink process connector's fork and comm records for the
DataNode process (polling /proc every 2 ms without it) and keeps `scan()` cheap: one
listing of /proc/<pid>/task (0.2 ms for a DataNode's ~60 threads), and a port-filtered
sock_diag dump of the TCP sockets (about 1 ms) only while a young thread is not linked.

Which connection a thread serves (sockets.py says why fds cannot tell):
1. elimination: the DataXceiverServer accepts a connection before it starts its
   thread, so one young unlinked thread and one established connection on the data port
   that no live handler owns belong together. This is the common case, and needs nothing
   from the thread itself;
2. evidence: the socket the thread is blocked on (sendfile, read, epoll, poll), from
   /proc/<pid>/task/<tid>/syscall. Exact, but reading it waits while the thread is on a
   CPU, so it is asked only when elimination cannot decide (several new threads at once)
   and, 20 ms later, to confirm an elimination; a contradiction relinks the thread;
3. agreement: with several new threads and connections at once, if every unowned
   connection belongs to the same user, the threads are that user's before they link.

Whose the connection is:
- client on this host (same network namespace): the uid owning the client end of the
  socket (sock_diag's uid, as in /proc/net/tcp{,6}), mapped through UserDirectory.users_by_uid;
- client elsewhere: UserDirectory.connections[(client address, client port)], reported by
  compute agents through the coordinator (addresses in sockets.normalise_address form).
A thread not identified yet is returned with user None (the default VNode) and is
resolved again on every later scan, so it moves when the identity arrives.

WebHDFS reads stay unidentified on purpose: the HTTP server inside the DataNode reads
through the DataNode's own DFSClient, so both ends of that connection belong to the
DataNode process (same uid, the client socket among its own fds); the end user is only
in the WebHDFS request and the NameNode audit log, which a thread's sockets cannot show.
Such threads are marked internal and never placed in a user's VNode.

Read-ahead: a DataNode that loads libhadoop (production ones do) reads ahead of each reader
(dfs.datanode.readahead.bytes, 4 MiB by default) with posix_fadvise from a pool of its own
("Readahead Thread #N"). Those threads serve every client, so the disk reads they issue, most of a
sequential reader's, are charged to no user's VNode and read shares cannot hold; the discovery says
so (`not_enforcing`). With dfs.datanode.readahead.bytes=0 the kernel reads ahead instead, in each
handler's own thread, charged to its user.

Write helpers: a DataXceiver receiving a block starts a PacketResponder thread
("PacketResponder"), which with dfs.datanode.synconclose does the block's fsync. It is
returned as inheriting (base.HandlerThread): it keeps the VNode it was born in, and is
moved to a user's only when every handler young at its birth serves that one user.

Born throttled: on cgroup v1 a new thread starts in its creator's cgroup, and every
DataXceiver is created by the DataXceiverServer thread, which does no block I/O itself.
Its comm says little (Hadoop names it after the Runnable: "org.apache.hado"), so it is
found as the thread blocked in accept() on the data port's listening socket. With
`spawner_in_default` (the default) it is returned as an unidentified handler, so the
agent puts it in the default VNode and each new DataXceiver is born there: what it reads
before capture is throttled as the default VNode's, never free. Capture then only has to
move it to its user's VNode.
"""

import logging
import os
import time
import xml.etree.ElementTree as ElementTree
from collections import Counter
from dataclasses import dataclass
from threading import Lock
from typing import Annotated, Literal

import annotated_types as at

from vnode_sync.agents.handlers.base import HandlerThread, UserDirectory
from vnode_sync.agents.handlers.generic import real_uid, threads_of, thread_comm
from vnode_sync.agents.handlers.proc_connector import ThreadChanges, open_thread_events
from vnode_sync.agents.handlers.sockets import (TCP_LISTEN, TcpSocket, peer_of, socket_inodes,
                                                sockets_in_use, tcp_sockets)
from vnode_sync.config_loading import MEASURED, Seconds, Settings
from vnode_sync.kernel.procfs import read_text

log = logging.getLogger(__name__)

DATANODE_CLASS = "org.apache.hadoop.hdfs.server.datanode.DataNode"
HANDLER_COMM = "DataXceiver for"
RESPONDER_COMM = "PacketResponder"
# ReadaheadPool's threads ("Readahead Thread #N"), started where libhadoop is loaded: they read ahead
# for every client, so no user's VNode can hold them.
READAHEAD_COMM = "Readahead Threa"
# Asking a thread for evidence can wait for it to leave the CPU: not more often than this, seconds.
CHECK_SECONDS = 0.02


@dataclass
class _Responder:
    tid: int
    first_seen: float
    candidates: frozenset[int]          # handlers young when it appeared: its creator is one of them
    user: str | None = None
    decided: bool = False


@dataclass
class _Handler:
    tid: int
    first_seen: float                   # monotonic seconds
    connection: TcpSocket | None = None  # the DataNode's end of the client connection
    how: str = ""                       # evidence | elimination | confirmed elimination | agreement
    agreed_user: str | None = None      # from agreement, until it links
    client_uid: int | None = None       # owner of the client end, when on this host
    internal: bool = False              # the DataNode's own client (WebHDFS)
    next_check: float = 0.0             # when to ask the thread's syscall file again


@dataclass
class _Thread:
    """One thread of the DataNode as discovery knows it; what it is follows from its name."""

    tid: int
    first_seen: float                   # monotonic seconds
    comm: str | None = None             # its name; None until read
    exiting: bool = False               # its exit record came before its /proc entry went
    spawner: bool = False               # the DataXceiverServer, accepting on the data port
    handler: _Handler | None = None     # a DataXceiver
    responder: _Responder | None = None  # a PacketResponder


def _cmdline(proc_root: str, pid: int) -> list[str]:
    text = read_text(os.path.join(proc_root, str(pid), "cmdline"))
    return text.rstrip("\0").split("\0") if text else []


def find_datanodes(proc_root: str, cmdline_contains: str | None = None) -> list[int]:
    """PIDs whose command line runs the DataNode main class (and holds `cmdline_contains`)."""
    found = []
    for entry in os.listdir(proc_root):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        args = _cmdline(proc_root, int(entry))
        if DATANODE_CLASS in args and (cmdline_contains is None or cmdline_contains in "\0".join(args)):
            found.append(int(entry))
    return sorted(found)


def configured_data_port(proc_root: str, pid: int) -> int | None:
    """dfs.datanode.address's port from the hdfs-site.xml on the DataNode's classpath or conf dir."""
    args = _cmdline(proc_root, pid)
    dirs = []
    for flag, value in zip(args, args[1:]):
        if flag in ("-cp", "-classpath", "--class-path"):
            dirs.extend(p for p in value.split(":") if p and not p.endswith("*") and not p.endswith(".jar"))
    environ = read_text(os.path.join(proc_root, str(pid), "environ")) or ""
    for entry in environ.split("\0"):
        if entry.startswith("HADOOP_CONF_DIR="):
            dirs.append(entry.split("=", 1)[1])
    cwd = os.path.join(proc_root, str(pid), "cwd")
    for directory in dirs:
        path = os.path.join(directory if os.path.isabs(directory) else os.path.join(cwd, directory),
                            "hdfs-site.xml")
        try:
            root = ElementTree.parse(path).getroot()
        except (OSError, ElementTree.ParseError):
            continue
        for prop in root.iter("property"):
            if (prop.findtext("name") or "").strip() == "dfs.datanode.address":
                port = (prop.findtext("value") or "").strip().rpartition(":")[2]
                return int(port) or None if port.isdigit() else None  # 0: chosen at start, learnt later
    return None


def accepting_threads(proc_root: str, pid: int, port: int, tids: list[int] | None = None) -> list[int]:
    """Threads of `pid` blocked in accept() on its listening socket for `port` (the spawner)."""
    listening = {s.inode for s in tcp_sockets(proc_root, pid, port) if s.state == TCP_LISTEN and s.local[1] == port}
    if not listening:
        return []
    return [tid for tid in (tids if tids is not None else threads_of(proc_root, pid))
            if sockets_in_use(proc_root, pid, tid) & listening]


class HdfsDiscoverySettings(Settings):
    """The `discovery:` section with kind: hdfs; each key is an HdfsDiscovery argument."""

    kind: Literal["hdfs"] = "hdfs"
    pid: Annotated[int, at.Gt(0)] | None = None
    """The DataNode's pid, where it is fixed (tests); unset: found by pid_file or command line."""
    pid_file: Annotated[str, at.MinLen(1)] | None = None
    """The DataNode's pid file (HADOOP_PID_DIR/hadoop-hdfs-datanode.pid)."""
    cmdline_contains: Annotated[str, at.MinLen(1)] | None = None
    """Text in the DataNode's command line, to pick one where a host runs several (its conf dir)."""
    data_port: Annotated[int, at.Ge(1), at.Le(65535)] | None = None
    """dfs.datanode.address's port; unset: read from the DataNode's hdfs-site.xml, else learnt."""
    events: Annotated[Literal["auto", "netlink", "poll"], MEASURED] = "auto"
    """Where thread births come from: netlink's proc connector when it works, else polling /proc."""
    poll_seconds: Annotated[Seconds, MEASURED] = 0.002
    """Polling interval without netlink, and the retry while a young thread is not linked yet:
    2 ms, so a new handler's first bytes are mostly charged to its user."""
    settle_seconds: Annotated[Seconds, MEASURED] = 2.0
    """How long a thread counts as young (its connection may not be visible yet)."""
    spawner_in_default: Annotated[bool, MEASURED] = True
    """Keep the DataXceiverServer thread in the default VNode (see "Born throttled" above)."""


class HdfsDiscovery:
    """DataXceiver threads of one DataNode, found by pid, pid file, or command line.

    `cmdline_contains` picks one DataNode when a host runs several (e.g. its conf dir).
    `data_port` is dfs.datanode.address's port; by default it is read from the DataNode's
    hdfs-site.xml, else learnt from the first thread seen blocked on a socket.
    `events`: "auto", "netlink" or "poll" (see proc_connector.py). `poll_seconds` is the
    polling interval without netlink, and the retry interval while a young thread is not
    linked yet; `settle_seconds` how long a thread counts as young. `spawner_in_default`:
    see "Born throttled" above.
    """

    name = "hdfs"
    shared_process = True

    def __init__(self, proc_root: str = "/proc", pid: int | None = None, pid_file: str | None = None,
                 cmdline_contains: str | None = None, data_port: int | None = None,
                 events: str = "auto", poll_seconds: float = 0.002, settle_seconds: float = 2.0,
                 spawner_in_default: bool = True):
        self.proc_root = proc_root
        self.fixed_pid = int(pid) if pid is not None else None
        self.pid_file = pid_file
        self.cmdline_contains = cmdline_contains
        self.fixed_port = int(data_port) if data_port is not None else None
        self.poll_seconds = poll_seconds
        self.spawner_in_default = bool(spawner_in_default)
        self.settle_seconds = settle_seconds
        self.events = open_thread_events(proc_root, events, poll_seconds)
        self.event_source = self.events.describe()
        log.info("hdfs discovery: thread events from %s", self.event_source)
        self.pid: int | None = None
        self.data_port: int | None = None
        self._datanode_uid: int | None = None
        self._next_lookup = 0.0
        self._ambiguous: list[int] = []
        self._threads: dict[int, _Thread] = {}
        self._next_relink = 0.0
        self._next_spawner_search = 0.0
        self._pending = ThreadChanges()
        self._pending_lock = Lock()
        self.link_counts: Counter[str] = Counter()  # how handlers got their connection, for benchmarks
        self.reads_ahead_in_pool: int | None = None  # the DataNode pid seen with ReadaheadPool threads

    # ---- the DataNode process ---------------------------------------------

    def _lookup_pid(self) -> int | None:
        if self.fixed_pid is not None:
            return self.fixed_pid
        if self.pid_file:
            text = read_text(self.pid_file)
            return int(text.strip()) if text and text.strip().isdigit() else None
        found = find_datanodes(self.proc_root, self.cmdline_contains)
        if len(found) > 1:
            if found != self._ambiguous:
                log.warning("hdfs discovery: %d DataNodes match (pids %s); set cmdline_contains to pick one",
                            len(found), found)
            self._ambiguous = found
            return None
        return found[0] if found else None

    def _datanode(self, force: bool = False) -> int | None:
        if self.pid is not None and os.path.exists(os.path.join(self.proc_root, str(self.pid), "task")):
            return self.pid
        now = time.monotonic()
        if not force and now < self._next_lookup:
            return None
        self._next_lookup = now + 1.0  # scanning all of /proc costs milliseconds: not every pass
        pid = self._lookup_pid()
        if pid is None or not os.path.exists(os.path.join(self.proc_root, str(pid), "task")):
            if self.pid is not None:
                log.info("hdfs discovery: DataNode %d is gone", self.pid)
            self.pid = None
            return None
        if pid != self.pid:
            self.pid, self._threads = pid, {}
            self.data_port = self.fixed_port or configured_data_port(self.proc_root, pid)
            self._datanode_uid = real_uid(self.proc_root, pid)
            log.info("hdfs discovery: DataNode pid %d, data port %s", pid,
                     self.data_port or "unknown (learnt from the first handler)")
        return self.pid

    # ---- events -----------------------------------------------------------

    def wait_for_change(self, timeout: float) -> None:
        changes = self.events.wait(self.pid, self._wait_limit(timeout))
        with self._pending_lock:
            p = self._pending
            p.born.update(changes.born)
            p.renamed.update(changes.renamed)
            p.exited |= changes.exited
            p.started |= changes.started
            p.lost = p.lost or changes.lost

    def _handlers(self) -> list[_Handler]:
        return [t.handler for t in self._threads.values() if t.handler is not None]

    def _handler(self, tid: int) -> _Handler | None:
        thread = self._threads.get(tid)
        return thread.handler if thread is not None else None

    def _take_pending(self) -> ThreadChanges:
        with self._pending_lock:
            changes, self._pending = self._pending, ThreadChanges()
        return changes

    def _wait_limit(self, timeout: float) -> float:
        """Seconds to wait for events: poll_seconds while a young thread is not linked (its
        evidence shows up within milliseconds), until the next check of a young elimination."""
        now = time.monotonic()
        for h in self._handlers():
            if h.internal or now - h.first_seen >= self.settle_seconds:
                continue
            if h.connection is None:
                timeout = min(timeout, self.poll_seconds)
            elif h.how == "elimination":
                timeout = min(timeout, max(0.0, h.next_check - now))
        return timeout

    # ---- scan ---------------------------------------------------------------

    def scan(self, identity: UserDirectory) -> list[HandlerThread]:
        changes = self._take_pending()
        pid = self._datanode(force=bool(changes.started) or changes.lost)
        if pid is None:
            return []
        now = time.monotonic()
        listed = set(threads_of(self.proc_root, pid))
        for tid in (self._threads.keys() - listed) | changes.born.keys():
            self._threads.pop(tid, None)  # gone, or a reused TID: forget the old thread
        for tid in (changes.exited - changes.born.keys()) & listed:
            # An exit record comes before the thread's /proc entry goes: do not take it for a new thread.
            self._threads[tid] = _Thread(tid, now, exiting=True)
        polling = self.event_source.startswith("polling")
        new_responders = []
        for tid in listed:
            thread = self._threads.setdefault(tid, _Thread(tid, now))
            if thread.exiting:
                continue
            named = thread.comm
            if tid in changes.renamed:
                thread.comm = changes.renamed[tid]
            elif (thread.comm is None or tid in changes.born or changes.lost
                  or polling and thread.comm != HANDLER_COMM and now - thread.first_seen < self.settle_seconds):
                # without comm records, a young thread is read again: it renames itself after birth
                thread.comm = thread_comm(self.proc_root, pid, tid) or ""
                if not polling and tid in changes.born and thread.comm == HANDLER_COMM:
                    # Born with its creator's name: a DataXceiver's own thread (a PacketResponder)
                    # that the JVM has not named yet; its comm record follows.
                    thread.comm = ""
            if thread.comm != named and thread.comm.startswith(READAHEAD_COMM) and self.reads_ahead_in_pool != pid:
                self.reads_ahead_in_pool = pid
                log.error("hdfs discovery: %s", self.not_enforcing())
            if thread.comm != HANDLER_COMM:
                thread.handler = None
            elif thread.handler is None:
                thread.handler = _Handler(tid, thread.first_seen)
            if thread.comm != RESPONDER_COMM:
                thread.responder = None
            elif thread.responder is None:
                new_responders.append(thread)
        young = frozenset(h.tid for h in self._handlers()
                          if not h.internal and now - h.first_seen < self.settle_seconds)
        for thread in new_responders:  # after the loop: a handler seen in the same pass is a candidate too
            thread.responder = _Responder(thread.tid, thread.first_seen, young)
        if self._needs_linking(now):
            self._link(pid, identity, now)
        found = [HandlerThread(pid, h.tid, self._user(h, identity)) for h in self._handlers()]
        found += [HandlerThread(pid, t.tid, self._responder_user(t.responder, identity, now), inherits=True)
                  for t in self._threads.values() if t.responder is not None]
        if self.spawner_in_default:
            found += [HandlerThread(pid, tid, None) for tid in self._find_spawners(pid, now)]
        return found

    def _find_spawners(self, pid: int, now: float) -> list[int]:
        alive = [t for t in self._threads.values() if not t.exiting]
        spawners = [t.tid for t in alive if t.spawner]
        if not spawners and self.data_port is not None and now >= self._next_spawner_search:
            self._next_spawner_search = now + 1.0  # it may be busy starting a thread: look again later
            candidates = sorted(t.tid for t in alive if t.handler is None)
            spawners = accepting_threads(self.proc_root, pid, self.data_port, candidates)
            for tid in spawners:
                self._threads[tid].spawner = True
            if spawners:
                log.info("hdfs discovery: DataXceiverServer thread(s) %s go to the default VNode, so "
                         "handlers are born there", sorted(spawners))
        return spawners

    def _needs_linking(self, now: float) -> bool:
        stale = False
        for h in self._handlers():
            if h.internal:
                continue
            young = now - h.first_seen < self.settle_seconds
            if young and (h.connection is None or h.how == "elimination" and now >= h.next_check):
                return True
            # An elimination never confirmed may be wrong, and nothing else would correct it.
            stale = stale or h.connection is None or h.how == "elimination"
        if stale and now >= self._next_relink:  # old unlinked or unconfirmed threads: once a second
            self._next_relink = now + 1.0
            return True
        return False

    # ---- linking threads to connections -------------------------------------

    def _link(self, pid: int, identity: UserDirectory, now: float) -> None:
        sockets = tcp_sockets(self.proc_root, pid, self.data_port)
        if self.data_port is None:
            self._learn_port(pid, sockets)
            if self.data_port is None:
                return
            sockets = [s for s in sockets if self.data_port in (s.local[1], s.remote[1])]
        served = {s.inode: s for s in sockets if s.local[1] == self.data_port and s.established}
        if self._eliminate(pid, served, sockets, now):
            return  # the common case, one new connection and one new thread: no evidence needed
        # Reading the syscall file of a thread that is on a CPU waits until it is off it
        # (task_current_syscall -> wait_task_inactive), so evidence is asked for only when
        # elimination cannot decide, and to confirm an elimination a little later.
        for h in self._handlers():
            if h.internal or now < h.next_check or (h.connection is not None and h.how != "elimination"):
                continue
            h.next_check = now + CHECK_SECONDS
            seen = sockets_in_use(self.proc_root, pid, h.tid) & served.keys()
            if len(seen) == 1:
                inode = seen.pop()
                if h.connection is None or h.connection.inode != inode:
                    self._attach(pid, h, served[inode], "evidence", sockets)
                else:
                    h.how = "confirmed elimination"
        if not self._eliminate(pid, served, sockets, now):
            self._agree(pid, served, sockets, identity, now)

    def _young_unlinked(self, now: float) -> list[_Handler]:
        return [h for h in self._handlers()
                if h.connection is None and not h.internal and now - h.first_seen < self.settle_seconds]

    def _unowned(self, served: dict[int, TcpSocket]) -> list[TcpSocket]:
        owned = {h.connection.inode for h in self._handlers() if h.connection is not None}
        return [s for inode, s in served.items() if inode not in owned]

    def _eliminate(self, pid: int, served: dict[int, TcpSocket], sockets: list[TcpSocket], now: float) -> bool:
        waiting, unowned = self._young_unlinked(now), self._unowned(served)
        if len(waiting) == 1 and len(unowned) == 1:
            self._attach(pid, waiting[0], unowned[0], "elimination", sockets)
            waiting[0].next_check = now + CHECK_SECONDS
            return True
        return False

    def _agree(self, pid: int, served: dict[int, TcpSocket], sockets: list[TcpSocket], identity: UserDirectory,
               now: float) -> None:
        waiting, unowned = self._young_unlinked(now), self._unowned(served)
        if not waiting or not unowned:
            return
        users = {self._user_of_connection(pid, s, sockets, identity) for s in unowned}
        if len(users) == 1 and None not in users:
            user = users.pop()
            for h in waiting:
                if h.agreed_user is None:
                    self.link_counts["agreement"] += 1
                h.agreed_user, h.how = user, "agreement"

    def _learn_port(self, pid: int, sockets: list[TcpSocket]) -> None:
        by_inode = {s.inode: s for s in sockets if s.established}
        for h in self._handlers():
            for inode in sockets_in_use(self.proc_root, pid, h.tid):
                if inode in by_inode:
                    self.data_port = by_inode[inode].local[1]
                    log.info("hdfs discovery: learnt data port %d from handler %d", self.data_port, h.tid)
                    return

    def _attach(self, pid: int, h: _Handler, connection: TcpSocket, how: str, sockets: list[TcpSocket]) -> None:
        h.connection, h.how, h.agreed_user = connection, how, None
        peer = peer_of(sockets, connection)
        h.client_uid = peer.uid if peer is not None else None
        h.internal = peer is not None and self._is_own_socket(pid, peer)
        self.link_counts[how] += 1
        log.debug("hdfs discovery: handler %d serves %s:%d (client uid %s, %s%s)", h.tid,
                  connection.remote[0], connection.remote[1], h.client_uid, how,
                  ", DataNode's own client" if h.internal else "")

    def _is_own_socket(self, pid: int, peer: TcpSocket) -> bool:
        # Only a client running as the DataNode's uid can be the DataNode itself; listing all
        # its fds costs a millisecond or two, so other uids skip it.
        return peer.uid == self._datanode_uid and peer.inode in socket_inodes(self.proc_root, pid)

    # ---- identity -----------------------------------------------------------

    def _user_of_connection(self, pid: int, connection: TcpSocket, sockets: list[TcpSocket],
                            identity: UserDirectory) -> str | None:
        peer = peer_of(sockets, connection)
        if peer is not None:
            if self._is_own_socket(pid, peer):
                return None
            user = identity.user_for_uid(peer.uid)
            if user is not None:
                return user
        return identity.connections.get(connection.remote)

    def _user(self, h: _Handler, identity: UserDirectory) -> str | None:
        if h.internal:
            return None
        if h.connection is None:
            return h.agreed_user
        if h.client_uid is not None:
            user = identity.user_for_uid(h.client_uid)
            if user is not None:
                return user
        return identity.connections.get(h.connection.remote)

    def _responder_user(self, r: _Responder, identity: UserDirectory, now: float) -> str | None:
        """A PacketResponder's user: the one every candidate creator serves, once all are known.

        HDFS starts a write's PacketResponder from the DataXceiver receiving the block,
        and with dfs.datanode.synconclose it is the responder that fsyncs the block. If that
        DataXceiver was already in its user's VNode, the responder was born there too; if
        not, it was born in the default VNode, and is moved when the handlers that were
        young when it appeared all turn out to serve one user. Otherwise it stays where it
        was born (inherits), never released to the root cgroup.
        """
        if not r.decided:
            users = {self._user(h, identity) for h in map(self._handler, r.candidates) if h is not None}
            if None in users and now - r.first_seen < self.settle_seconds:
                return None  # a candidate not identified yet: ask again on the next scan
            r.user, r.decided = (users.pop() if len(users) == 1 else None), True
        return r.user

    def not_enforcing(self) -> str | None:
        """Why shares placed by thread cannot hold on this DataNode, once its threads show it."""
        if self.reads_ahead_in_pool is None or self.reads_ahead_in_pool != self.pid:
            return None
        return (f"DataNode {self.pid} reads ahead in a thread pool that serves every user (libhadoop loaded, "
                "dfs.datanode.readahead.bytes above 0): its disk reads are charged to no user's VNode, so read "
                "shares do not hold; set dfs.datanode.readahead.bytes to 0 (the kernel then reads ahead in each "
                "handler's own thread)")

    def close(self) -> None:
        self.events.close()
