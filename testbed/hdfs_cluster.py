"""A real HDFS on this host: one NameNode and N DataNodes, each DataNode on a block device of its own.

Each daemon is a separate JVM running the Hadoop 3.4.2 jars that `scripts/setup.d/hdfs.sh`
fetched; each DataNode's data dir is an ext4 file system on its own loop device (or, with
disk="zram", a RAM block device; with disk="paced", a loop device whose reads are paced like
a real disk's), so a read that misses the page cache is block I/O on that device's MAJ:MIN,
which blkio can throttle.
Ready means a probe block was written to every DataNode and read back by the native client.

Command line (as root):

    python -m testbed.hdfs_cluster up --name demo [--datanodes 2] [--disk-mb 1024] [--replication 1]
    python -m testbed.hdfs_cluster write --name demo /alice/a.bin --size-mb 512 --as-uid 1001
    python -m testbed.hdfs_cluster read --name demo /alice/a.bin --as-uid 1002 --hdfs-user bob
    python -m testbed.hdfs_cluster status --name demo
    python -m testbed.hdfs_cluster down --name demo      # also when `up`'s process is gone
    python -m testbed.hdfs_cluster cleanup-stale [--prefix P] [--dry-run]

`up` leaves the daemons running and writes `<workdir>/cluster.json` (workdir default
`/tmp/vnode-sync-hdfs.<name>`): namenode {pid, rpc_address "hdfs://127.0.0.1:PORT",
http_address "127.0.0.1:PORT", rpc_port, http_port, name_dir, log, audit_log}; datanodes
[{id "dn0", pid, data_dir, mountpoint, backing_file, loop_device "/dev/loopN",
device_number "MAJ:MIN", major, minor, ports {data, http, ipc}, log}]; name, workdir,
hadoop_home, replication, disk_mb, disk, disk_read_mbps, client_conf_dir, startup_seconds,
jvm. Every JVM carries `-Dtestbed.workdir=<workdir>`: `down` and `cleanup-stale`
find processes by it, mounts and loop devices by their paths under the workdir (a paced
disk's FUSE server exits by itself once its mount is gone).

Python, e.g. a handler-thread test:

    with HdfsCluster(unique_name("hdfs"), datanodes=2) as cluster:
        dn = cluster.datanodes[1]          # .pid, .loop_device, .device_number (MAJ:MIN), .ports.data
        cluster.write_file("/alice/a.bin", 512 << 20, as_uid=64001, hdfs_user="alice", on_datanode=dn)
        cluster.evict_page_cache()         # else the read below is served from memory
        reader = cluster.start_read("/alice/a.bin", as_uid=64001, hdfs_user="alice", seconds=10)
        ...                                # find its "DataXceiver for" thread in dn.pid, move it
        rate = Transfer.parse(reader.communicate()[0]).bytes_per_second

Clients (`write_file`, `put`, `read_file`, `start_read`) run a small Java class that
`HadoopRuntime.prepare()` compiles once into the cache. The client's Unix uid is `as_uid` (the
owner of its socket in /proc/net/tcp), its HDFS user is `hdfs_user` (audit log `ugi=`;
default the uid's passwd name, or "uid<N>"); a uid needs no passwd entry. `write_file`
streams incompressible bytes from memory, the fastest way to make a big file (512 MiB in
about 3 s here); `put` copies a local file. `shell()` runs `hdfs dfs` (FsShell), which needs a
passwd entry for `as_uid`. `block_datanodes()` tells which DataNode holds each block.

Caveats: without libhadoop a DataNode cannot drop its page cache after reads, so a file read
once is served from memory later (no block I/O, no throttle): call `evict_page_cache()` before
every measured read, and note that `start_read(seconds=...)` re-reads a short file from cache.
Sockets are IPv4 (/proc/net/tcp), as `bin/hdfs` sets `-Djava.net.preferIPv4Stack=true`;
`JvmSettings(ipv4_stack=False)` gives dual-stack (/proc/net/tcp6). HDFS permissions are off.
"""

import argparse
import contextlib
import hashlib
import json
import logging
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass
from xml.sax.saxutils import escape

import psutil

from vnode_sync import logs
from vnode_sync.errors import InvalidArgument, NotFound, Unavailable, VNodeSyncError
from vnode_sync.kernel.types import DeviceNumber
from testbed.loopdev import LoopDisk, detach, stale_loops, stale_mounts, unmount
from testbed.paced_disk import PacedDisk
from testbed.zramdev import ZramDisk, remove_marked

HADOOP_VERSION = "3.4.2"
WORKDIR_PREFIX = "vnode-sync-hdfs"
STATE_FILE = "cluster.json"
# Every JVM the testbed starts carries this property; `down` and `cleanup-stale` find them by it.
MARKER = "-Dtestbed.workdir="
DISK_KINDS = ("loop", "zram", "paced")
PACED_READ_MBPS = 100.0  # a paced disk's default: about one SATA disk's sequential read
ZRAM_MARKER = "disk.zram"  # names the zram device of a DataNode (zramdev.py)
TOOL_CLASS = "VnodeSyncHdfsStream"
NAMENODE_CLASS = "org.apache.hadoop.hdfs.server.namenode.NameNode"
DATANODE_CLASS = "org.apache.hadoop.hdfs.server.datanode.DataNode"

log = logging.getLogger(__name__)


def hadoop_home() -> str:
    """Where setup.d/hdfs.sh put the jars: readable by every uid, since clients run as other users."""
    if "VNODE_SYNC_HADOOP_HOME" in os.environ:
        return os.environ["VNODE_SYNC_HADOOP_HOME"]
    if os.geteuid() == 0:
        return f"/var/cache/vnode-sync/hadoop-{HADOOP_VERSION}"
    cache = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    return os.path.join(cache, "vnode-sync", f"hadoop-{HADOOP_VERSION}")


def default_workdir(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise InvalidArgument(f"cluster name {name!r} must be letters, digits, '.', '_' or '-'")
    return os.path.join(tempfile.gettempdir(), f"{WORKDIR_PREFIX}.{name}")


@dataclass(frozen=True)
class Transfer:
    """What one client read or wrote, as the client measured it (JVM start excluded)."""

    bytes: int
    seconds: float
    bytes_per_second: float

    @classmethod
    def parse(cls, output: str) -> "Transfer":
        return cls(**json.loads(output.strip().splitlines()[-1]))


@dataclass(frozen=True)
class DataNodePorts:
    data: int  # dfs.datanode.address: block reads and writes (DataXceiver)
    http: int
    ipc: int


@dataclass
class DataNode:
    id: str
    data_dir: str
    mountpoint: str
    backing_file: str
    loop_device: str
    device_number: DeviceNumber
    ports: DataNodePorts
    log: str
    pid: int | None = None
    host: str = "127.0.0.1"  # the address it listens on and the NameNode hands to clients

    @property
    def xfer_address(self) -> str:
        return f"{self.host}:{self.ports.data}"

    def to_json(self) -> dict:
        entry = asdict(self)
        entry.update(device_number=str(self.device_number), major=self.device_number.major,
                     minor=self.device_number.minor)
        return entry

    @classmethod
    def from_json(cls, entry: dict) -> "DataNode":
        fields = {k: v for k, v in entry.items() if k not in ("major", "minor")}
        fields["device_number"] = DeviceNumber.parse(entry["device_number"])
        fields["ports"] = DataNodePorts(**entry["ports"])
        return cls(**fields)


@dataclass
class NameNode:
    rpc_port: int
    http_port: int
    name_dir: str
    log: str
    audit_log: str
    pid: int | None = None
    host: str = "127.0.0.1"

    @property
    def rpc_address(self) -> str:
        return f"hdfs://{self.host}:{self.rpc_port}"

    @property
    def http_address(self) -> str:
        return f"{self.host}:{self.http_port}"

    def to_json(self) -> dict:
        return {**asdict(self), "rpc_address": self.rpc_address, "http_address": self.http_address}

    @classmethod
    def from_json(cls, entry: dict) -> "NameNode":
        return cls(**{k: v for k, v in entry.items() if k not in ("rpc_address", "http_address")})


@dataclass(frozen=True)
class JvmSettings:
    """Flags of every JVM the testbed starts, daemons and clients."""

    heap_mb: int = 256  # NameNode and DataNodes with a few clients stay near 200 MB RSS
    # C1 only: three JVMs starting on 2 cores need less CPU (startup 9-14 s against 12-25 s);
    # read and write rates were within this shared machine's noise of full tiered compilation.
    quick_jit: bool = True
    ipv4_stack: bool = True  # what bin/hdfs passes (hadoop-functions.sh); False: dual-stack, /proc/net/tcp6
    extra: tuple[str, ...] = ()

    def flags(self) -> list[str]:
        flags = [f"-Xmx{self.heap_mb}m", "-XX:+UseSerialGC",
                 # Java 17 closes java.lang to Hadoop's reflection; WebHDFS answers 500 without it.
                 "--add-opens=java.base/java.lang=ALL-UNNAMED"]
        if self.quick_jit:
            flags.append("-XX:TieredStopAtLevel=1")
        if self.ipv4_stack:
            flags.append("-Djava.net.preferIPv4Stack=true")
        return flags + list(self.extra)


# ---- Hadoop files -----------------------------------------------------------------------

def _site_xml(properties: dict[str, object]) -> str:
    entries = "".join(f"  <property><name>{escape(k)}</name><value>{escape(str(v))}</value></property>\n"
                      for k, v in properties.items())
    return f'<?xml version="1.0"?>\n<configuration>\n{entries}</configuration>\n'


def _log4j(level: str, audit_log: str | None = None) -> str:
    lines = [f"log4j.rootLogger={level},console",
             "log4j.appender.console=org.apache.log4j.ConsoleAppender",
             "log4j.appender.console.target=System.err",
             "log4j.appender.console.layout=org.apache.log4j.PatternLayout",
             "log4j.appender.console.layout.ConversionPattern=%d{ISO8601} %p %c{2}: %m%n",
             "log4j.logger.org.apache.hadoop.util.NativeCodeLoader=ERROR"]
    if audit_log:
        audit = "org.apache.hadoop.hdfs.server.namenode.FSNamesystem.audit"
        lines += [f"log4j.logger.{audit}=INFO,audit", f"log4j.additivity.{audit}=false",
                  "log4j.appender.audit=org.apache.log4j.FileAppender",
                  f"log4j.appender.audit.File={audit_log}",
                  "log4j.appender.audit.layout=org.apache.log4j.PatternLayout",
                  "log4j.appender.audit.layout.ConversionPattern=%d{ISO8601} %m%n"]
    return "\n".join(lines) + "\n"


def _write_conf(directory: str, core: dict, hdfs: dict, log4j: str) -> str:
    os.makedirs(directory, exist_ok=True)
    for filename, text in (("core-site.xml", _site_xml(core)), ("hdfs-site.xml", _site_xml(hdfs)),
                           ("log4j.properties", log4j)):
        with open(os.path.join(directory, filename), "w") as f:
            f.write(text)
    return directory


_TOOL_SOURCE = r"""
import java.net.InetSocketAddress;
import java.net.URI;
import java.security.PrivilegedExceptionAction;
import java.util.Arrays;
import java.util.Random;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.BlockLocation;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.security.UserGroupInformation;

/** Streams one HDFS file through the native client; prints {"bytes", "seconds", "bytes_per_second"}. */
public class VnodeSyncHdfsStream {
    static final int CHUNK = 1 << 20;

    public static void main(String[] args) throws Exception {
        // A remote user needs no OS login, so a uid without a passwd entry works (UnixLoginModule fails there).
        String hdfsUser = System.getenv("HADOOP_USER_NAME");
        UserGroupInformation ugi = hdfsUser != null ? UserGroupInformation.createRemoteUser(hdfsUser)
                                                    : UserGroupInformation.getCurrentUser();
        ugi.doAs((PrivilegedExceptionAction<Void>) () -> { run(args); return null; });
    }

    // read URI PATH SECONDS | write URI PATH BYTES REPLICATION [HOST:PORT] | put URI PATH LOCAL
    // | probe URI PATH REPLICATION
    static void run(String[] args) throws Exception {
        DistributedFileSystem fs = (DistributedFileSystem) FileSystem.get(new URI(args[1]), new Configuration());
        Path path = new Path(args[2]);
        byte[] chunk = new byte[CHUNK];
        long start = System.nanoTime();
        long bytes;
        switch (args[0]) {
            case "read": bytes = read(fs, path, Double.parseDouble(args[3]), chunk); break;
            case "write": bytes = write(fs, path, Long.parseLong(args[3]), Short.parseShort(args[4]),
                                        args.length > 5 ? args[5] : null, chunk); break;
            case "put":
                fs.copyFromLocalFile(false, true, new Path(args[3]), path);
                bytes = fs.getFileStatus(path).getLen();
                break;
            case "probe": bytes = probe(fs, path, Short.parseShort(args[3]), chunk); break;
            default: throw new IllegalArgumentException("mode must be read, write, put or probe, not " + args[0]);
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        System.out.printf("{\"bytes\": %d, \"seconds\": %.3f, \"bytes_per_second\": %.1f}%n",
                          bytes, seconds, bytes / seconds);
    }

    /** Reads the file once, or for SECONDS (re-opening it at its end) if SECONDS > 0. */
    static long read(FileSystem fs, Path path, double seconds, byte[] chunk) throws Exception {
        long deadline = System.nanoTime() + (long) (seconds * 1e9);
        long total = 0;
        do {
            try (FSDataInputStream in = fs.open(path, CHUNK)) {
                for (int n; (n = in.read(chunk)) > 0; ) {
                    total += n;
                    if (seconds > 0 && System.nanoTime() >= deadline) return total;
                }
            }
        } while (seconds > 0 && System.nanoTime() < deadline);
        return total;
    }

    /** Writes BYTES of incompressible data from memory; FAVORED names a DataNode's data address. */
    static long write(DistributedFileSystem fs, Path path, long size, short replication, String favored,
                      byte[] chunk) throws Exception {
        new Random(path.toString().hashCode()).nextBytes(chunk);
        InetSocketAddress[] favoredNodes = null;
        if (favored != null) {
            String[] hostPort = favored.split(":");
            favoredNodes = new InetSocketAddress[] {new InetSocketAddress(hostPort[0], Integer.parseInt(hostPort[1]))};
        }
        FsPermission permission = FsPermission.getFileDefault().applyUMask(FsPermission.getUMask(fs.getConf()));
        long written = 0;
        try (FSDataOutputStream out = fs.create(path, permission, true, CHUNK, replication,
                                                fs.getDefaultBlockSize(path), null, favoredNodes)) {
            while (written < size) {
                int n = (int) Math.min(CHUNK, size - written);
                out.write(chunk, 0, n);
                written += n;
            }
        }
        return written;
    }

    /** Writes one chunk to REPLICATION DataNodes, reads it back, compares and deletes it. */
    static long probe(DistributedFileSystem fs, Path path, short replication, byte[] chunk) throws Exception {
        write(fs, path, CHUNK, replication, null, chunk);
        BlockLocation[] blocks = fs.getFileBlockLocations(path, 0, CHUNK);
        if (blocks.length != 1 || blocks[0].getNames().length != replication) {
            throw new IllegalStateException("probe block has replicas on " + Arrays.toString(blocks[0].getNames())
                                            + ", wanted " + replication + " DataNodes");
        }
        byte[] back = new byte[CHUNK];
        try (FSDataInputStream in = fs.open(path)) {
            in.readFully(0, back);
        }
        if (!Arrays.equals(chunk, back)) throw new IllegalStateException("probe read back other bytes");
        fs.delete(path, false);
        return 2L * CHUNK;
    }
}
"""


@dataclass(frozen=True)
class HadoopRuntime:
    """The jars, the empty webapps and the compiled client tool, all under one cache dir."""

    home: str

    @property
    def jars(self) -> str:
        return os.path.join(self.home, "jars")

    @property
    def web(self) -> str:
        return os.path.join(self.home, "web")

    @property
    def namespace_template(self) -> str:
        return os.path.join(self.home, "namespace-template")

    def prepare(self) -> None:
        """Check the jars and java are there; make the webapps dirs and the client tool if missing."""
        if not os.path.exists(os.path.join(self.jars, f"hadoop-hdfs-{HADOOP_VERSION}.jar")):
            raise NotFound(f"no Hadoop {HADOOP_VERSION} jars in {self.jars}; run scripts/setup.d/hdfs.sh")
        if not shutil.which("java") or not shutil.which("javac"):
            raise NotFound("no java or javac on PATH; the HDFS testbed needs a Java 17 JDK")
        for app in ("hdfs", "datanode", "static"):
            os.makedirs(os.path.join(self.web, "webapps", app), exist_ok=True)
        self.tool_dir()

    def tool_dir(self) -> str:
        """Compile the client tool once per source version (about 2 s); later calls just return its dir."""
        digest = hashlib.sha256(_TOOL_SOURCE.encode()).hexdigest()[:12]
        target = os.path.join(self.home, "tools", digest)
        if os.path.exists(os.path.join(target, f"{TOOL_CLASS}.class")):
            return target
        os.makedirs(os.path.dirname(target), exist_ok=True)
        staging = tempfile.mkdtemp(prefix=f"{digest}.", dir=os.path.dirname(target))
        try:
            source = os.path.join(staging, f"{TOOL_CLASS}.java")
            with open(source, "w") as f:
                f.write(_TOOL_SOURCE)
            subprocess.run(["javac", "-nowarn", "-cp", f"{self.jars}/*", "-d", staging, source],
                           check=True, capture_output=True, text=True)
            os.chmod(staging, 0o755)
            with contextlib.suppress(OSError):  # a concurrent compile won the race: use that one
                os.rename(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return target


# ---- the cluster ------------------------------------------------------------------------

def _free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _user_ids(as_uid: int | None, hdfs_user: str | None) -> tuple[int | None, int | None, str | None]:
    """(uid, gid, HDFS user) for a client; a uid without a passwd entry becomes gid=uid, user "uid<N>"."""
    if as_uid is None:
        return None, None, hdfs_user
    try:
        entry = pwd.getpwuid(as_uid)
        return as_uid, entry.pw_gid, hdfs_user or entry.pw_name
    except KeyError:
        return as_uid, as_uid, hdfs_user or f"uid{as_uid}"


class HdfsCluster:
    """One NameNode and `datanodes` DataNodes; `start()` returns when a probe write and read succeeded."""

    def __init__(self, name: str, workdir: str | None = None, datanodes: int = 2, disk_mb: int = 1024,
                 replication: int = 1, jvm: JvmSettings = JvmSettings(),
                 hdfs_site: dict[str, object] | None = None, runtime: HadoopRuntime | None = None,
                 host: str = "127.0.0.1", disk: str = "loop", disk_read_mbps: float = PACED_READ_MBPS):
        """`host`: the address every daemon listens on and advertises; another than loopback lets
        clients in a network namespace (a compute host) reach the cluster. `disk`: "loop" (a
        file on the host's disk behind a loop device), "zram" (RAM; see zramdev.py) or "paced"
        (reads paced to `disk_read_mbps` MB/s per DataNode, like a real disk; see paced_disk.py)."""
        if disk not in DISK_KINDS:
            raise InvalidArgument(f"disk {disk!r} is not one of {', '.join(DISK_KINDS)}")
        if disk_read_mbps <= 0:
            raise InvalidArgument(f"disk_read_mbps={disk_read_mbps}: must be above 0")
        self.disk, self.disk_read_mbps = disk, disk_read_mbps
        self.name = name
        self.host = host
        self.workdir = os.path.abspath(workdir or default_workdir(name))
        self.datanode_count, self.disk_mb, self.replication = datanodes, disk_mb, replication
        self.jvm = jvm
        self.hdfs_site = dict(hdfs_site or {})
        self.runtime = runtime or HadoopRuntime(hadoop_home())
        self.namenode: NameNode | None = None
        self.datanodes: list[DataNode] = []
        self.startup_seconds: float | None = None
        self._processes: dict[int, subprocess.Popen] = {}

    # ---- state file ---------------------------------------------------------

    @property
    def state_path(self) -> str:
        return os.path.join(self.workdir, STATE_FILE)

    @property
    def client_conf_dir(self) -> str:
        return os.path.join(self.workdir, "conf", "client")

    @property
    def namenode_uri(self) -> str:
        assert self.namenode, "cluster not started"
        return self.namenode.rpc_address

    def _save(self) -> None:
        state = {"name": self.name, "workdir": self.workdir, "hadoop_home": self.runtime.home, "host": self.host,
                 "replication": self.replication, "disk_mb": self.disk_mb, "disk": self.disk,
                 "disk_read_mbps": self.disk_read_mbps,
                 "namenode": self.namenode.to_json() if self.namenode else None,
                 "datanodes": [dn.to_json() for dn in self.datanodes],
                 "client_conf_dir": self.client_conf_dir, "startup_seconds": self.startup_seconds,
                 "jvm": asdict(self.jvm)}
        partial = self.state_path + ".partial"
        with open(partial, "w") as f:
            json.dump(state, f, indent=2)
        os.replace(partial, self.state_path)

    @classmethod
    def attach(cls, workdir: str) -> "HdfsCluster":
        """The cluster described by `workdir`/cluster.json, e.g. one `up` started in another process."""
        try:
            with open(os.path.join(workdir, STATE_FILE)) as f:
                state = json.load(f)
        except FileNotFoundError as e:
            raise NotFound(f"no HDFS testbed state in {workdir}") from e
        jvm = JvmSettings(**{**state["jvm"], "extra": tuple(state["jvm"]["extra"])})
        cluster = cls(state["name"], workdir, len(state["datanodes"]), state["disk_mb"], state["replication"], jvm,
                      runtime=HadoopRuntime(state["hadoop_home"]), host=state.get("host", "127.0.0.1"),
                      disk=state.get("disk", "loop"), disk_read_mbps=state.get("disk_read_mbps", PACED_READ_MBPS))
        cluster.namenode = NameNode.from_json(state["namenode"]) if state["namenode"] else None
        cluster.datanodes = [DataNode.from_json(entry) for entry in state["datanodes"]]
        cluster.startup_seconds = state["startup_seconds"]
        return cluster

    # ---- start ----------------------------------------------------------------

    def _classpath(self, conf_dir: str) -> str:
        return f"{self.runtime.jars}/*:{conf_dir}:{self.runtime.web}"

    def _spawn(self, role: str, java_class: str, conf_dir: str, log: str, *args: str) -> subprocess.Popen:
        argv = ["java", *self.jvm.flags(), f"-Dproc_{role}", f"{MARKER}{self.workdir}",
                f"-Dhadoop.log.dir={os.path.dirname(log)}", "-cp", self._classpath(conf_dir), java_class, *args]
        with open(log, "ab") as out:
            # Own session: the daemons outlive `up` and a terminal's ^C; `down` stops them.
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                       start_new_session=True)
        self._processes[process.pid] = process
        return process

    def _common_site(self) -> tuple[dict, dict]:
        core = {"fs.defaultFS": self.namenode.rpc_address,
                "hadoop.tmp.dir": os.path.join(self.workdir, "tmp"),
                # DataNodes start before the NameNode listens: retry every 200 ms for 20 s,
                # not 10 tries 1 s apart and then a 5 s sleep (BPServiceActor).
                "ipc.client.connect.retry.interval": 200, "ipc.client.connect.max.retries": 100}
        hdfs = {"dfs.namenode.rpc-address": f"{self.host}:{self.namenode.rpc_port}",
                "dfs.namenode.http-address": self.namenode.http_address,
                "dfs.replication": self.replication,
                "dfs.namenode.safemode.extension": 0,
                "dfs.permissions.enabled": "false",
                "dfs.heartbeat.interval": 1,
                "dfs.datanode.hostname": self.host,
                "dfs.namenode.datanode.registration.ip-hostname-check": "false",
                # Short-circuit reads would bypass the DataNode's handler threads entirely.
                "dfs.client.read.shortcircuit": "false",
                # Hadoop 3.4 wants a block plus 1 GB free on a volume before it writes there.
                "dfs.datanode.round-robin-volume-choosing-policy.additional-available-space": 0,
                **self.hdfs_site}
        return core, hdfs

    def _prepare_disks(self) -> None:
        ports = _free_ports(2 + 3 * self.datanode_count)
        nn_dir = os.path.join(self.workdir, "namenode")
        os.makedirs(nn_dir)
        self.namenode = NameNode(ports[0], ports[1], os.path.join(nn_dir, "name"),
                                 os.path.join(nn_dir, "namenode.log"), os.path.join(nn_dir, "audit.log"),
                                 host=self.host)
        for index in range(self.datanode_count):
            dn_id = f"dn{index}"
            dn_dir = os.path.join(self.workdir, dn_id)
            os.makedirs(dn_dir)
            disk = self._make_disk(dn_dir, os.path.join(dn_dir, "disk"))
            self.datanodes.append(DataNode(
                dn_id, os.path.join(disk.mountpoint, "hdfs"), disk.mountpoint, disk.backing_file, disk.device,
                disk.device_number, DataNodePorts(*ports[2 + 3 * index: 5 + 3 * index]),
                os.path.join(dn_dir, "datanode.log"), host=self.host))
            self._save()  # a crash from here on leaves a state file that `down` can undo

    def _make_disk(self, dn_dir: str, mountpoint: str) -> LoopDisk | ZramDisk | PacedDisk:
        if self.disk == "zram":
            return ZramDisk.create(os.path.join(dn_dir, ZRAM_MARKER), mountpoint, self.disk_mb)
        if self.disk == "paced":
            return PacedDisk.create(dn_dir, mountpoint, self.disk_mb, self.disk_read_mbps)
        return LoopDisk.create(os.path.join(dn_dir, "disk.img"), mountpoint, self.disk_mb)

    def _write_confs(self) -> None:
        core, hdfs = self._common_site()
        _write_conf(self._conf_dir("namenode"), core,
                    {**hdfs, "dfs.namenode.name.dir": self.namenode.name_dir},
                    _log4j("INFO", self.namenode.audit_log))
        for dn in self.datanodes:
            _write_conf(self._conf_dir(dn.id), core,
                        {**hdfs, "dfs.datanode.data.dir": dn.data_dir,
                         "dfs.datanode.address": f"{self.host}:{dn.ports.data}",
                         "dfs.datanode.http.address": f"{self.host}:{dn.ports.http}",
                         "dfs.datanode.ipc.address": f"{self.host}:{dn.ports.ipc}"}, _log4j("INFO"))
        _write_conf(self.client_conf_dir, {"fs.defaultFS": self.namenode.rpc_address}, hdfs, _log4j("WARN"))

    def _conf_dir(self, role: str) -> str:
        return os.path.join(self.workdir, "conf", role)

    def _format_namespace(self) -> None:
        """An empty, formatted namespace is the same for every cluster: format once, then copy (saves a JVM)."""
        template = self.runtime.namespace_template
        if os.path.isdir(template):
            shutil.copytree(template, self.namenode.name_dir)
            return
        formatting = self._spawn("namenode", NAMENODE_CLASS, self._conf_dir("namenode"), self.namenode.log,
                                 "-format", "-force", "-nonInteractive")
        if formatting.wait(120) != 0:
            raise Unavailable(f"NameNode -format failed; see {self.namenode.log}")
        del self._processes[formatting.pid]
        staging = tempfile.mkdtemp(prefix="namespace.", dir=self.runtime.home)
        shutil.copytree(self.namenode.name_dir, staging, dirs_exist_ok=True)
        with contextlib.suppress(OSError):  # a concurrent start saved one first
            os.rename(staging, template)
        shutil.rmtree(staging, ignore_errors=True)

    def _check_settings(self) -> None:
        if not 1 <= self.datanode_count <= 16:
            raise InvalidArgument(f"datanodes={self.datanode_count}: allowed 1..16")
        if not 1 <= self.replication <= self.datanode_count:
            raise InvalidArgument(f"replication={self.replication}: allowed 1..datanodes ({self.datanode_count})")
        if self.disk_mb < 256:
            raise InvalidArgument(f"disk_mb={self.disk_mb}: at least 256; a DataNode refuses a volume "
                                  "with less free space than one 128 MiB block")

    def start(self) -> "HdfsCluster":
        """Start every daemon and wait until a probe file is written to all DataNodes and read back."""
        self._check_settings()
        self.runtime.prepare()
        if os.path.isdir(self.workdir) and os.listdir(self.workdir):
            raise InvalidArgument(f"workdir {self.workdir} is in use; run `down` or `cleanup-stale` first")
        began = time.monotonic()
        os.makedirs(self.workdir, mode=0o755, exist_ok=True)
        os.chmod(self.workdir, 0o755)  # clients run as other uids and read conf/client
        try:
            self._prepare_disks()
            self._write_confs()
            self._format_namespace()
            log.info("%s: loop disks and namespace ready after %.1f s", self.name, time.monotonic() - began)
            # DataNodes boot alongside the NameNode and register once it answers.
            self.namenode.pid = self._spawn("namenode", NAMENODE_CLASS, self._conf_dir("namenode"),
                                            self.namenode.log).pid
            for dn in self.datanodes:
                dn.pid = self._spawn("datanode", DATANODE_CLASS, self._conf_dir(dn.id), dn.log).pid
            self._save()
            self._wait_for_live_datanodes(timeout=90)
            log.info("%s: %d DataNodes live after %.1f s", self.name, len(self.datanodes), time.monotonic() - began)
            self._probe()
            self.startup_seconds = round(time.monotonic() - began, 2)
            self._save()
            log.info("%s: probe written to every DataNode and read back; ready after %.1f s",
                     self.name, self.startup_seconds)
        except BaseException:
            self.stop()
            raise
        return self

    def _check_daemons_alive(self) -> None:
        for role, pid, logfile in [("NameNode", self.namenode.pid, self.namenode.log),
                                   *[(f"DataNode {dn.id}", dn.pid, dn.log) for dn in self.datanodes]]:
            process = self._processes.get(pid)
            if process is not None and process.poll() is not None:
                # The workdir, log included, is removed on the way out: keep the cause in the error.
                raise Unavailable(f"{role} (pid {pid}) exited with {process.returncode}; "
                                  f"last error in its log: {_last_error(logfile)}")

    def live_datanodes(self) -> int:
        """NumLiveDataNodes from the NameNode's /jmx; registered is not yet writable."""
        url = (f"http://{self.namenode.http_address}/jmx"
               "?qry=Hadoop:service=NameNode,name=FSNamesystemState")
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(json.load(response)["beans"][0]["NumLiveDataNodes"])

    def _wait_for_live_datanodes(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        live = 0
        while time.monotonic() < deadline:
            self._check_daemons_alive()
            with contextlib.suppress(OSError, ValueError, KeyError, IndexError):
                live = self.live_datanodes()
                if live == len(self.datanodes):
                    return
            time.sleep(0.2)
        raise Unavailable(f"{live} of {len(self.datanodes)} DataNodes live after {timeout}s; "
                          f"see the logs in {self.workdir}")

    def _probe(self, attempts: int = 3) -> None:
        error = ""
        for _ in range(attempts):
            self._check_daemons_alive()
            result = self._run_tool("probe", "/.vnode-sync-probe", str(len(self.datanodes)), check=False)
            if result.returncode == 0:
                return
            error = result.stderr.strip()[:3000]
            time.sleep(0.5)
        raise Unavailable(f"probe write and read failed {attempts} times: {error}")

    # ---- clients ----------------------------------------------------------------

    def client_command(self, java_class: str, *args: str) -> list[str]:
        """argv of a native-client JVM for this cluster (run it with `user=`/`group=` for another uid)."""
        # No perf data: a client as another uid would leave /tmp/hsperfdata_<user> behind.
        return ["java", *self.jvm.flags(), "-XX:-UsePerfData", f"{MARKER}{self.workdir}",
                "-cp", f"{self.runtime.jars}/*:{self.client_conf_dir}:{self.runtime.tool_dir()}",
                java_class, *args]

    def _client(self, java_class: str, args: tuple[str, ...], as_uid: int | None,
                hdfs_user: str | None) -> subprocess.Popen:
        uid, gid, user = _user_ids(as_uid, hdfs_user)
        env = dict(os.environ, HADOOP_USER_NAME=user) if user else dict(os.environ)
        ids = {"user": uid, "group": gid, "extra_groups": []} if uid is not None else {}
        return subprocess.Popen(self.client_command(java_class, *args), env=env, cwd="/", text=True,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **ids)

    def _run_client(self, what: str, java_class: str, *args: str, as_uid: int | None = None,
                    hdfs_user: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        process = self._client(java_class, args, as_uid, hdfs_user)
        out, err = process.communicate()
        if check and process.returncode != 0:
            raise Unavailable(f"{what} failed (exit {process.returncode}): {err.strip()[:3000]}")
        return subprocess.CompletedProcess(process.args, process.returncode, out, err)

    def _run_tool(self, mode: str, *args: str, as_uid: int | None = None, hdfs_user: str | None = None,
                  check: bool = True) -> subprocess.CompletedProcess:
        return self._run_client(f"{mode} {args[0]}", TOOL_CLASS, mode, self.namenode_uri, *args,
                                as_uid=as_uid, hdfs_user=hdfs_user, check=check)

    def shell(self, *args: str, as_uid: int | None = None, hdfs_user: str | None = None,
              check: bool = True) -> subprocess.CompletedProcess:
        """`hdfs dfs ARGS` (FsShell), e.g. shell("-ls", "-R", "/"); an `as_uid` needs a passwd entry here."""
        return self._run_client(f"hdfs dfs {' '.join(args)}", "org.apache.hadoop.fs.FsShell", *args,
                                as_uid=as_uid, hdfs_user=hdfs_user, check=check)

    def put(self, local: str, remote: str, as_uid: int | None = None, hdfs_user: str | None = None) -> Transfer:
        """Copy a local file in, overwriting; `as_uid` must be able to read `local`."""
        return Transfer.parse(self._run_tool("put", remote, os.path.abspath(local), as_uid=as_uid,
                                             hdfs_user=hdfs_user).stdout)

    def write_file(self, remote: str, size_bytes: int, as_uid: int | None = None, hdfs_user: str | None = None,
                   replication: int | None = None, on_datanode: DataNode | None = None) -> Transfer:
        """Write `size_bytes` of incompressible bytes streamed from the client's memory (no local file).

        `on_datanode` asks the NameNode to place the first replica there (HDFS favored nodes).
        """
        args = [remote, str(size_bytes), str(replication or self.replication)]
        if on_datanode is not None:
            args.append(on_datanode.xfer_address)
        return Transfer.parse(self._run_tool("write", *args, as_uid=as_uid, hdfs_user=hdfs_user).stdout)

    def start_read(self, remote: str, as_uid: int | None = None, hdfs_user: str | None = None,
                   seconds: float = 0) -> subprocess.Popen:
        """A running reader; `Transfer.parse(proc.communicate()[0])` when done. seconds>0 re-reads until then."""
        return self._client(TOOL_CLASS, ("read", self.namenode_uri, remote, str(seconds)), as_uid, hdfs_user)

    def read_file(self, remote: str, as_uid: int | None = None, hdfs_user: str | None = None,
                  seconds: float = 0) -> Transfer:
        """Read through the native DFS protocol (a DataXceiver thread serves it); returns the client's rate."""
        return Transfer.parse(self._run_tool("read", remote, str(seconds), as_uid=as_uid, hdfs_user=hdfs_user).stdout)

    def block_datanodes(self, remote: str) -> list[list[DataNode]]:
        """For each block of `remote`, the DataNodes holding a replica (from `hdfs fsck -locations`)."""
        report = self._run_client(f"fsck {remote}", "org.apache.hadoop.hdfs.tools.DFSck", remote,
                                  "-files", "-blocks", "-locations").stdout
        by_port = {dn.ports.data: dn for dn in self.datanodes}
        host = re.escape(self.host)
        return [[by_port[int(port)] for port in re.findall(host + r":(\d+)", line) if int(port) in by_port]
                for line in report.splitlines() if re.match(r"\d+\. BP-", line)]

    def evict_page_cache(self) -> None:
        """Flush and drop every DataNode block file from the page cache, so the next read is block I/O."""
        for dn in self.datanodes:
            for directory, _, files in os.walk(dn.data_dir):
                for filename in files:
                    with contextlib.suppress(OSError):  # a block being finalized may move away
                        fd = os.open(os.path.join(directory, filename), os.O_RDONLY)
                        try:
                            os.fdatasync(fd)
                            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                        finally:
                            os.close(fd)

    # ---- stop -------------------------------------------------------------------

    def stop(self) -> None:
        """Stop every JVM this cluster started (clients too), unmount, detach loops, remove the workdir."""
        remove_leftovers(self.workdir, exact=True)
        for process in self._processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(1)  # reap our own children
        self._processes.clear()

    def __enter__(self) -> "HdfsCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _marked_processes(prefix: str, exact: bool) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        for arg in process.info["cmdline"] or ():
            if arg.startswith(MARKER) and (arg == MARKER + prefix if exact else prefix in arg):
                found.append(process)
                break
    return found


def _stop_processes(processes: list[psutil.Process], grace: float = 10) -> None:
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.send_signal(signal.SIGTERM)
    _, alive = psutil.wait_procs(processes, timeout=grace)
    for process in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(alive, timeout=5)


def _last_error(logfile: str) -> str:
    try:
        with open(logfile, errors="replace") as f:
            lines = [line.strip() for line in f if line.strip()]
    except OSError:
        return "(no log)"
    errors = [line for line in lines if " ERROR " in line or "Exception" in line]
    return (errors or lines or ["(empty log)"])[-1][:500]


def remove_leftovers(prefix: str, exact: bool = False, dry_run: bool = False) -> list[str]:
    """Stop marked JVMs, unmount, detach loops and delete workdirs named by `prefix`; return what was found.

    exact=True: `prefix` is one cluster's workdir (the marker finds its clients too, not only the
    daemons in the state file); otherwise every path containing `prefix`, running clusters included.
    """
    processes = _marked_processes(prefix, exact)
    scope = prefix.rstrip("/") + "/" if exact else prefix
    mounts, loops = stale_mounts(scope), stale_loops(scope)
    tmp = tempfile.gettempdir()
    workdirs = ([prefix] if os.path.isdir(prefix) else []) if exact else sorted(
        os.path.join(tmp, entry) for entry in os.listdir(tmp)
        if entry.startswith(WORKDIR_PREFIX + ".") and prefix in entry)
    found = ([f"process {p.pid}" for p in processes] + [f"mount {m}" for m in mounts]
             + [f"loop {loop}" for loop in loops] + [f"workdir {w}" for w in workdirs])
    if dry_run:
        return found
    _stop_processes(processes)
    for mountpoint in mounts:
        unmount(mountpoint)
    for device in loops:
        detach(device)
    for workdir in workdirs:
        for directory, _, files in os.walk(workdir):
            if ZRAM_MARKER in files:
                remove_marked(os.path.join(directory, ZRAM_MARKER))
    for workdir in workdirs:
        shutil.rmtree(workdir, ignore_errors=True)
    return found


# ---- command line -------------------------------------------------------------------------

def _workdir(args: argparse.Namespace) -> str:
    return os.path.abspath(args.workdir) if args.workdir else default_workdir(args.name)


def _main_class(cmdline: list[str]) -> str:
    return cmdline[cmdline.index("-cp") + 2] if "-cp" in cmdline[:-2] else " ".join(cmdline)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testbed.hdfs_cluster",
                                     description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    def named(command: str, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(command, help=help_text)
        where = sub.add_mutually_exclusive_group(required=True)
        where.add_argument("--name")
        where.add_argument("--workdir", help=f"default /tmp/{WORKDIR_PREFIX}.NAME")
        return sub

    up = named("up", "start a cluster and leave it running")
    up.add_argument("--datanodes", type=int, default=2)
    up.add_argument("--disk-mb", type=int, default=1024, help="size of each DataNode's disk")
    up.add_argument("--disk", choices=DISK_KINDS, default="loop",
                    help="loop: a file on the host disk behind a loop device; zram: a RAM block device; "
                         "paced: reads paced to --disk-read-mbps, like a real disk")
    up.add_argument("--disk-read-mbps", type=float, default=PACED_READ_MBPS, help="a paced disk's read rate, MB/s")
    up.add_argument("--replication", type=int, default=1)
    up.add_argument("--heap-mb", type=int, default=256)
    up.add_argument("--dual-stack", action="store_true", help="IPv4+IPv6 sockets (tcp6) instead of IPv4 only")
    up.add_argument("--full-jit", action="store_true", help="C1 and C2 compilers (slower start)")
    up.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra hdfs-site property")
    named("down", "stop a cluster started by `up`, even if that process died")
    named("status", "print the state file and which daemons run")
    write = named("write", "write a file of SIZE bytes streamed from memory")
    write.add_argument("path")
    write.add_argument("--size-mb", type=int, required=True)
    read = named("read", "read a file through the native client and print the rate")
    read.add_argument("path")
    read.add_argument("--seconds", type=float, default=0)
    for sub in (write, read):
        sub.add_argument("--as-uid", type=int)
        sub.add_argument("--hdfs-user")
    stale = commands.add_parser("cleanup-stale", help="remove every leftover whose path contains PREFIX")
    stale.add_argument("--prefix", default=WORKDIR_PREFIX)
    stale.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    logs.configure("hdfs-testbed")
    try:
        return _run(args)
    except VNodeSyncError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    if args.command == "cleanup-stale":
        for item in remove_leftovers(args.prefix, dry_run=args.dry_run):
            print(("would remove " if args.dry_run else "removed ") + item)
        return 0
    workdir = _workdir(args)
    if args.command == "up":
        jvm = JvmSettings(args.heap_mb, quick_jit=not args.full_jit, ipv4_stack=not args.dual_stack)
        cluster = HdfsCluster(args.name or os.path.basename(workdir), workdir, args.datanodes, args.disk_mb,
                              args.replication, jvm, dict(item.split("=", 1) for item in args.set), disk=args.disk,
                              disk_read_mbps=args.disk_read_mbps)
        cluster.start()
        print(f"HDFS up in {cluster.startup_seconds} s: {cluster.namenode_uri}, "
              f"http {cluster.namenode.http_address}, state {cluster.state_path}")
        for dn in cluster.datanodes:
            print(f"  {dn.id}: pid {dn.pid}, {dn.loop_device} ({dn.device_number}), data {dn.xfer_address}")
        return 0
    if args.command == "down":
        if os.path.exists(os.path.join(workdir, STATE_FILE)):
            HdfsCluster.attach(workdir).stop()
        else:
            remove_leftovers(workdir, exact=True)
        return 0
    cluster = HdfsCluster.attach(workdir)
    if args.command == "status":
        with open(cluster.state_path) as f:
            state = json.load(f)
        state["running"] = {str(p.pid): _main_class(p.cmdline()) for p in _marked_processes(workdir, exact=True)}
        print(json.dumps(state, indent=2))
    elif args.command == "write":
        print(json.dumps(asdict(cluster.write_file(args.path, args.size_mb << 20, args.as_uid, args.hdfs_user))))
    elif args.command == "read":
        print(json.dumps(asdict(cluster.read_file(args.path, args.as_uid, args.hdfs_user, args.seconds))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
