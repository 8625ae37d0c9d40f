"""How fast a new DataXceiver thread is captured, and how many bytes it reads before that.

    sudo .venv/bin/python -m benchmarks.capture_latency [--target fake|hdfs] [--reads 200]

Each read is a new client connection, run as uid 64001 (alice) or 64002 (bob) in turn,
one at a time, so the DataNode starts one handler thread per read. The storage agent's
own capture code runs in this process: HdfsDiscovery + Reconciler + the blkio-v1
backend on a cgroup subtree of its own, in one of these modes (same run, same data):

  event-born-default  netlink wake-ups; the DataXceiverServer thread sits in the default
                      VNode, so handlers are born there (throttled) and are then moved
  event               netlink wake-ups; handlers are born in an unthrottled cgroup
  poll-1s             the baseline: a capture pass every second, born unthrottled

Capture latency = from the kernel's fork record of the thread (observed by a separate
process-connector socket) to the end of the write that put it into its user's VNode;
"id p99" stops earlier, when discovery first returned the thread with its user (the
rest is the kernel moving the thread: without the agent's fast thread moves, --slow-moves,
it waits for an RCU grace period); "named p99" stops when the thread took its handler
name, the first moment any capture can know what it is (the JVM's thread start before).
Bytes are the blkio counters on the read device: "unattributed" = bytes of the read not
charged to the user's VNode; "escaped" = the part charged to the unthrottled birth cgroup
(read before any placement); "in default" = the part charged to the default VNode (born
there, read before the move); what is in none of them was not block I/O (page cache).
The default VNode is throttled (--default-mibps, 10 MiB/s), the users' VNodes are not.
--realtime runs the capture thread SCHED_FIFO. --busy N runs N processes spinning on
the CPU and starting threads for the whole run (a loaded host).

--target fake: a Python DataNode stand-in (testbed/fake_datanode.py) reading
with O_DIRECT from a file on the root disk. --target hdfs: a real 2-DataNode HDFS from
testbed.hdfs_cluster, native-client reads (one JVM per read) of a file on
DataNode 0, page cache evicted before each read.
"""

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from benchmarks.percentile import percentile  # noqa: E402
from testbed.names import unique_name  # noqa: E402
from testbed.fake_datanode import connect_as  # noqa: E402
from vnode_sync.agents.handlers.base import UserDirectory  # noqa: E402
from vnode_sync.agents.handlers.hdfs import (DATANODE_CLASS, HANDLER_COMM, HdfsDiscovery,  # noqa: E402
                                             accepting_threads)
from vnode_sync.agents.handlers.proc_connector import (PROC_EVENT_COMM, PROC_EVENT_FORK,  # noqa: E402
                                                       ProcConnector)
from vnode_sync.agents.storage.capture import CaptureLoop  # noqa: E402
from vnode_sync.agents.storage.reconciler import Reconciler  # noqa: E402
from vnode_sync.kernel.backend import DEFAULT_VNODE, HostCgroups, vnode_name  # noqa: E402
from vnode_sync.kernel.blkio_v1 import BlkioV1Backend  # noqa: E402
from vnode_sync.kernel.devices import device_number  # noqa: E402
from vnode_sync.kernel.fast_moves import FastMoves  # noqa: E402
from vnode_sync.kernel.types import DeviceNumber, IoCounters  # noqa: E402
from vnode_sync.wire import vnode_pb2 as pb  # noqa: E402

MiB = 1 << 20
USERS = {"alice": 64001, "bob": 64002}
MODES = ("event-born-default", "event", "poll-1s")
BIRTH_CGROUP = "birth"


class RecordingBackend(BlkioV1Backend):
    """The real backend, noting when each thread first entered each VNode."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.entered: dict[tuple[int, str], int] = {}

    def place(self, vnode: str, tid: int) -> None:
        super().place(vnode, tid)
        self.entered.setdefault((tid, vnode), time.monotonic_ns())


class RecordingDiscovery(HdfsDiscovery):
    """The real discovery, noting when each thread was first returned with its user."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.identified: dict[int, int] = {}

    def scan(self, identity: UserDirectory):
        found = super().scan(identity)
        now = time.monotonic_ns()
        for h in found:
            if h.user is not None:
                self.identified.setdefault(h.tid, now)
        return found


class BirthWatch:
    """When each thread of `tgid` was born and named, from a process-connector socket in a
    child process (so it takes no GIL time from the capture thread it measures)."""

    def __init__(self, tgid: int):
        self.tgid = tgid
        self.born: dict[int, int] = {}
        self.comm: dict[int, str] = {}
        self.named: dict[int, int] = {}  # when it took the handler name
        self._child = subprocess.Popen([sys.executable, "-m", "benchmarks.capture_latency", "--watch-births", str(tgid)],
                                       stdout=subprocess.PIPE, text=True, cwd=ROOT)
        assert self._child.stdout.readline().strip() == "ready"
        os.set_blocking(self._child.stdout.fileno(), False)
        self._partial = ""

    def _drain(self) -> None:
        chunk = self._child.stdout.read() or ""
        lines = (self._partial + chunk).split("\n")
        self._partial = lines.pop()
        for line in lines:
            kind, tid, stamp, *comm = line.split(" ", 3)
            if kind == "F":
                self.born[int(tid)] = int(stamp)
            else:
                self.comm[int(tid)] = comm[0] if comm else ""
                if self.comm[int(tid)] == HANDLER_COMM:
                    self.named.setdefault(int(tid), int(stamp))

    def handlers_born_after(self, since_ns: int) -> list[int]:
        time.sleep(0.005)
        self._drain()
        return [t for t, at in self.born.items() if at >= since_ns and self.comm.get(t) == HANDLER_COMM]

    def close(self) -> None:
        self._child.kill()
        self._child.wait()


def watch_births(tgid: int) -> None:
    connector = ProcConnector()
    print("ready", flush=True)
    while True:
        for e in connector.read(1.0):
            if e.tgid == tgid and e.kind == PROC_EVENT_FORK:
                print(f"F {e.tid} {e.timestamp_ns}", flush=True)
            elif e.tgid == tgid and e.kind == PROC_EVENT_COMM:
                print(f"C {e.tid} {e.timestamp_ns} {e.comm}", flush=True)


@dataclass
class Connection:
    user: str
    bytes_read: int
    unattributed: int
    escaped: int
    in_default: int                   # charged to the default VNode (born throttled, not moved yet)
    latency_ms: float | None          # birth -> in the user's VNode; None: never captured
    identified_ms: float | None       # birth -> discovery returned it with its user
    named_ms: float | None            # birth -> the thread took the handler name


@dataclass
class ModeResult:
    mode: str
    connections: list[Connection] = field(default_factory=list)


# ---- targets ---------------------------------------------------------------------


def device_path(dev: int) -> str:
    with open(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}/uevent") as f:
        name = dict(line.split("=", 1) for line in f.read().split())["DEVNAME"]
    return f"/dev/{name}"


class FakeTarget:
    name = "fake (Python DataXceiver stand-in, O_DIRECT reads of a file on the root disk)"

    def __init__(self, size: int):
        self.size = size
        self.workdir = tempfile.mkdtemp(prefix="vnode-sync-test.capture.", dir="/var/tmp")
        self.path = os.path.join(self.workdir, "block")
        with open(self.path, "wb") as f:
            f.write(os.urandom(size))
            os.fsync(f.fileno())
        self.device = device_path(os.stat(self.path).st_dev)
        tag = os.path.basename(self.workdir)
        self.server = subprocess.Popen([sys.executable, "-m", "testbed.fake_datanode", "--tag", tag,
                                        DATANODE_CLASS], stdout=subprocess.PIPE, text=True, cwd=ROOT)
        self.port = int(self.server.stdout.readline().split()[1])
        self.pid = self.server.pid
        self.data_port = self.port
        self.discovery_args = {"pid": self.pid, "data_port": self.port}

    def read(self, user: str) -> int:
        client = connect_as(USERS[user], self.port, f"READ {self.path} {self.size}\n")
        received = client.received()
        self.server.stdout.readline()  # its SERVE line
        client.close()
        return received

    def close(self) -> None:
        self.server.kill()
        self.server.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)


class HdfsTarget:
    name = "real HDFS 3.4.2 (testbed, 2 DataNodes, native client JVM per read, page cache evicted)"

    def __init__(self, size: int):
        from testbed.hdfs_cluster import HdfsCluster
        self.size = size
        # No client socket cache: every read is a new connection, served by a new DataXceiver.
        self.cluster = HdfsCluster(unique_name("capture-hdfs"), datanodes=2,
                                   hdfs_site={"dfs.client.socketcache.capacity": 0}).start()
        self.dn = self.cluster.datanodes[0]
        self.cluster.write_file("/bench/block.bin", size, hdfs_user="alice", on_datanode=self.dn)
        self.device = self.dn.loop_device
        self.pid = self.dn.pid
        self.data_port = self.dn.ports.data
        self.discovery_args = {"pid": self.pid}

    def read(self, user: str) -> int:
        self.cluster.evict_page_cache()
        return self.cluster.read_file("/bench/block.bin", as_uid=USERS[user], hdfs_user=user).bytes

    def close(self) -> None:
        self.cluster.stop()


# ---- one mode ----------------------------------------------------------------------


def desired_state(device: str, default_bps: int) -> pb.DesiredState:
    return pb.DesiredState(
        generation=1, node_id="bench",
        vnodes=[pb.VNodeSpec(user=u, uid=uid, priority=1, shares=[pb.ResourceShare(device=device)])
                for u, uid in USERS.items()],
        default_vnode=pb.VNodeSpec(shares=[pb.ResourceShare(device=device, read=pb.Share(ceiling_bps=default_bps))]),
        users=[pb.User(name=u, uid=uid, active=True) for u, uid in USERS.items()])


def read_bytes(backend: BlkioV1Backend, cgroups: tuple[str, ...], dev: DeviceNumber) -> tuple[int, ...]:
    """Bytes read from `dev` so far by each of the named cgroups under the backend's root."""
    return tuple(backend.counters(name).get(dev, IoCounters()).read_bytes for name in cgroups)


def move(hierarchy_path: str, tids: list[int]) -> None:
    for tid in tids:
        try:
            with open(os.path.join(hierarchy_path, "tasks"), "w") as f:
                f.write(str(tid))
        except OSError:  # ended meanwhile
            pass


def run_mode(target, mode: str, reads: int, realtime: bool, default_bps: int) -> ModeResult:
    hierarchy = HostCgroups().blkio_v1
    backend = RecordingBackend(hierarchy, unique_name("capture"))
    dev = device_number(target.device)
    discovery = RecordingDiscovery(events="poll" if mode == "poll-1s" else "netlink",
                              spawner_in_default=(mode == "event-born-default"), **target.discovery_args)
    reconciler = Reconciler(backend, discovery, {target.device: dev})
    reconciler.apply(desired_state(target.device, default_bps))
    birth = os.path.join(backend.root, BIRTH_CGROUP)
    os.mkdir(birth)
    spawners = accepting_threads("/proc", target.pid, target.data_port)
    assert spawners, "no thread of the DataNode is accepting on its data port"
    if mode != "event-born-default":
        move(birth, spawners)
    watch = BirthWatch(target.pid)
    capture = CaptureLoop(reconciler, discovery, wait_seconds=0.5, every_seconds=1.0 if mode == "poll-1s" else None,
                          realtime_priority=10 if realtime else None)
    result = ModeResult(mode)
    stack = contextlib.ExitStack()
    try:
        stack.enter_context(capture.running())
        for i in range(reads):
            user = ("alice", "bob")[i % 2]
            counted = (vnode_name(user), BIRTH_CGROUP, DEFAULT_VNODE)
            before = read_bytes(backend, counted, dev)
            started = time.monotonic_ns()
            got = target.read(user)
            time.sleep(0.02)  # counters of the last bios settle
            after = read_bytes(backend, counted, dev)
            tids = watch.handlers_born_after(started)
            charged, escaped = after[0] - before[0], after[1] - before[1]
            placed = [backend.entered.get((t, vnode_name(user))) for t in tids]
            latency = identified = named = None
            if tids and None not in placed:
                latency = max(at - watch.born[t] for at, t in zip(placed, tids)) / 1e6
                identified = max(discovery.identified[t] - watch.born[t] for t in tids) / 1e6
                named = max(watch.named[t] - watch.born[t] for t in tids) / 1e6
            result.connections.append(Connection(user, got, max(0, got - charged), escaped, after[2] - before[2],
                                                 latency, identified, named))
    finally:
        stack.close()
        watch.close()
        move(hierarchy, spawners)
        with open(os.path.join(birth, "tasks")) as f:
            move(hierarchy, [int(t) for t in f.read().split()])
        os.rmdir(birth)
        backend.teardown()
        discovery.close()
    print(f"  {mode}: thread events from {discovery.event_source}; links {dict(discovery.link_counts)}",
          flush=True)
    return result


def spin() -> None:
    """A busy host: burn CPU, and start and end a thread now and then (fork/exit, as JVMs do)."""
    while True:
        deadline = time.monotonic() + 0.05
        while time.monotonic() < deadline:
            pass
        worker = threading.Thread(target=lambda: None)
        worker.start()
        worker.join()


@contextlib.contextmanager
def busy_host(processes: int):
    spinners = [subprocess.Popen([sys.executable, "-m", "benchmarks.capture_latency", "--spin"], cwd=ROOT) for _ in range(processes)]
    try:
        yield
    finally:
        for p in spinners:
            p.kill()
            p.wait()


@contextlib.contextmanager
def fast_moves(enabled: bool):
    """The agent's fast thread moves (favordynmods, on by default there), for the duration."""
    if not enabled:
        yield
        return
    fast = FastMoves(os.path.join("/run/vnode-sync", unique_name("fast-moves")))
    print(f"fast thread moves: {fast.enable()}", flush=True)
    try:
        yield
    finally:
        fast.disable()


def report(results: list[ModeResult]) -> None:
    print(f"\n{'mode':20s} {'conns':>5s} {'captured':>8s} {'p50 ms':>8s} {'p99 ms':>8s} {'max ms':>8s} "
          f"{'named p99':>9s} {'id p99':>8s} {'unattr. mean/p99/max KiB':>26s} {'escaped mean/max KiB':>22s} "
          f"{'in default mean/max KiB':>25s}")
    for r in results:
        lat = [c.latency_ms for c in r.connections if c.latency_ms is not None]
        first = [c.identified_ms for c in r.connections if c.identified_ms is not None]
        named = [c.named_ms for c in r.connections if c.named_ms is not None]
        un = [c.unattributed / 1024 for c in r.connections]
        esc = [c.escaped / 1024 for c in r.connections]
        default = [c.in_default / 1024 for c in r.connections]
        fmt = (lambda v: f"{v:8.2f}") if lat else (lambda v: f"{'-':>8s}")
        print(f"{r.mode:20s} {len(r.connections):5d} {len(lat):8d} "
              f"{fmt(statistics.median(lat) if lat else 0)} {fmt(percentile(lat, 99) if lat else 0)} "
              f"{fmt(max(lat) if lat else 0)} {(f'{percentile(named, 99):9.2f}' if named else '        -')} "
              f"{(f'{percentile(first, 99):8.2f}' if first else '       -')} "
              f"{statistics.mean(un):8.0f}/{percentile(un, 99):7.0f}/{max(un):7.0f}  "
              f"{statistics.mean(esc):10.0f}/{max(esc):9.0f}  {statistics.mean(default):13.0f}/{max(default):9.0f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=("fake", "hdfs"), default="fake")
    parser.add_argument("--reads", type=int, default=200, help="reads (connections) per mode")
    parser.add_argument("--size-mib", type=float, default=8, help="bytes per read, MiB")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--default-mibps", type=float, default=10, help="the default VNode's read cap, MiB/s")
    parser.add_argument("--realtime", action="store_true", help="run the capture thread SCHED_FIFO")
    parser.add_argument("--slow-moves", action="store_true",
                        help="without the agent's fast thread moves (favordynmods): each move waits for RCU")
    parser.add_argument("--busy", type=int, default=0, help="CPU-spinning processes running meanwhile")
    parser.add_argument("--watch-births", type=int, help=argparse.SUPPRESS)  # the BirthWatch child
    parser.add_argument("--spin", action="store_true", help=argparse.SUPPRESS)  # a busy_host child
    args = parser.parse_args()
    if args.watch_births:
        watch_births(args.watch_births)
        return 0
    if args.spin:
        spin()
    if os.geteuid() != 0:
        print("needs root (cgroups, netlink process connector, setuid clients)", file=sys.stderr)
        return 2
    modes = args.modes.split(",")
    size = int(args.size_mib * MiB)
    target = FakeTarget(size) if args.target == "fake" else HdfsTarget(size)
    print(f"target: {target.name}; pid {target.pid}; device {target.device}; {args.reads} reads of "
          f"{args.size_mib:g} MiB per mode; default VNode throttled to {args.default_mibps:g} MiB/s; "
          f"capture thread {'SCHED_FIFO' if args.realtime else 'SCHED_OTHER'}; "
          f"fast thread moves {'off' if args.slow_moves else 'on'}; {args.busy} busy processes; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    try:
        with fast_moves(not args.slow_moves), busy_host(args.busy):
            results = [run_mode(target, mode, args.reads, args.realtime, int(args.default_mibps * MiB))
                       for mode in modes]
    finally:
        target.close()
    report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
