"""The cluster: start, stop, attach to a running one, clients, page cache, take-down."""

import contextlib
import json
import logging
import os
import pwd
import re
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import asdict

import psutil

from vnode_sync.errors import InvalidArgument, NotFound, Unavailable
from testbed.loopdev import LoopDisk, check_ext4_options, detach, stale_loops, stale_mounts, unmount
from testbed import early_writeback
from testbed.leftovers import holder_is_live
from testbed.paced_disk import DiskModel, PacedDisk
from testbed.ports import free_ports
from testbed.processes import stop_process, stop_processes
from testbed.sizes import parse_size
from testbed import kdc
from testbed.kdc import realm_for
from testbed.hdfs_cluster.daemons import DataNode, DataNodePorts, NameNode, Transfer
from testbed.hdfs_cluster.link import DataNodeLink
from testbed.hdfs_cluster.kerberos import ADMIN, SERVICE_HOST, HdfsKerberos
from testbed.hdfs_cluster.runtime import (DATANODE_CLASS, HADOOP_VERSION, NAMENODE_CLASS, TOOL_CLASS, HadoopRuntime,
                                         JavaRuntime, JvmSettings, default_java, has_native, native_dir)
from testbed.hdfs_cluster.site_config import log4j_properties, write_conf
from testbed.zramdev import ZRAM_MARKER, ZramDisk, remove_marked


WORKDIR_PREFIX = "vnode-sync-hdfs"
STATE_FILE = "cluster.json"
# Every JVM the testbed starts carries this property; `down` and `cleanup-stale` find them by it.
MARKER = "-Dtestbed.workdir="
DISK_KINDS = ("loop", "zram", "paced", "paced-rw", "hdd", "spindle")
PACED_KINDS = ("paced", "paced-rw", "hdd", "spindle")
DEFAULT_BLOCK_BYTES = 128 << 20  # dfs.blocksize's default
PACED_READ_MBPS = 100.0  # a paced disk's default: about one SATA disk's sequential read
# The JVM's own warnings (class data among them) on stderr: a client's stdout is its report (Transfer JSON).
JVM_WARNINGS_TO_STDERR = ("-Xlog:disable", "-Xlog:all=warning:stderr")

log = logging.getLogger(__name__)


def default_workdir(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise InvalidArgument(f"cluster name {name!r} must be letters, digits, '.', '_' or '-'")
    return os.path.join(tempfile.gettempdir(), f"{WORKDIR_PREFIX}.{name}")


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
                 host: str = "127.0.0.1", disk: str = "loop", disk_read_mbps: float = PACED_READ_MBPS,
                 datanode_throttle: str | None = None, datanode_throttle_args: tuple[str, ...] = (),
                 hadoop_version: str | None = None, kerberos: bool = False, short_circuit: bool = False,
                 native: bool = False, ext4_options: tuple[str, ...] = (), datanode_java_home: str | None = None,
                 more_disks_mbps: tuple[float, ...] = (), datanode_link_mbps: float = 0.0):
        """`host`: the address every daemon listens on and advertises; another than loopback lets
        clients in a network namespace (a compute host) reach the cluster. `disk`: "loop" (a
        file on the host's disk behind a loop device), "zram" (RAM; see zramdev.py) or "paced"
        (reads paced to `disk_read_mbps` MB/s per DataNode, like a real disk; see paced_disk.py) or
        "paced-rw" (writes paced too, with little dirty page cache: DiskModel.streaming) or "hdd" (paced-rw
        with a seek cost on each non-sequential request: DiskModel.hdd) or "spindle"
        (reads and writes paced, one request at a time, BFQ the loop device's scheduler: its cgroup
        weights decide the order; DiskModel.spindle).
        `datanode_throttle`: the vnode-sync Java agent's jar, loaded into every DataNode with its
        control socket at `throttle_socket(dn)` and `datanode_throttle_args` ("key=value") after it.
        `hadoop_version`: a line of deploy/hadoop/lines.txt (default $VNODE_SYNC_HADOOP_VERSION, else
        the first), ignored when `runtime` is given. `kerberos`: a secure cluster (kerberos.py: a KDC of
        its own, SASL privacy on data transfer, block tokens, SPNEGO); its clients act as the principal
        of their `hdfs_user`, made by `add_user` (HADOOP_USER_NAME means nothing there).
        `short_circuit`: short-circuit local reads on (`dfs.client.read.shortcircuit`, a domain socket
        per DataNode); the DataNodes and clients then load libhadoop.so (runtime.native_dir()), which
        they do not otherwise. `native`: load it without short-circuit reads, as production DataNodes
        do (their read-ahead pool and cache drop-behind need it). `ext4_options`: mount options of the
        DataNodes' ext4 besides noatime (e.g. "nodelalloc"). `datanode_java_home`: the Java runtime the
        DataNodes run on (e.g. runtime.installed_java(11).home), where the agent is loaded; the NameNode
        and the clients stay on `java` from PATH (the JDK 17 that compiles the client tool).
        `more_disks_mbps`: further data dirs in
        every DataNode (dfs.datanode.data.dir), each on a disk of the same paced kind at its own rate
        (the first stays at `disk_read_mbps`): a node of volumes of different speeds.
        `datanode_link_mbps`: the (one) DataNode runs in a network namespace of its own
        (testbed.compute_host), joined to the host by a veth shaped to that many MB/s each way (tc
        tbf); the cluster listens on the veth's host side instead of `host`: a network-bound node."""
        if disk not in DISK_KINDS:
            raise InvalidArgument(f"disk {disk!r} is not one of {', '.join(DISK_KINDS)}")
        if disk_read_mbps <= 0:
            raise InvalidArgument(f"disk_read_mbps={disk_read_mbps}: must be above 0")
        check_ext4_options(tuple(ext4_options))
        if more_disks_mbps and (disk not in PACED_KINDS or min(more_disks_mbps) <= 0):
            raise InvalidArgument(f"more_disks_mbps={more_disks_mbps}: rates above 0, on a disk of kind "
                                  f"{', '.join(PACED_KINDS)} (not {disk!r})")
        self.more_disks_mbps = tuple(more_disks_mbps)
        if datanode_link_mbps < 0 or (datanode_link_mbps and datanodes != 1):
            raise InvalidArgument(f"datanode_link_mbps={datanode_link_mbps}: above 0, and with one DataNode "
                                  f"(not {datanodes})")
        self.datanode_link = DataNodeLink(f"vslink-{uuid.uuid4().hex[:8]}", datanode_link_mbps) \
            if datanode_link_mbps else None
        self.disk, self.disk_read_mbps, self.ext4_options = disk, disk_read_mbps, tuple(ext4_options)
        self.datanode_throttle = datanode_throttle
        self.datanode_throttle_args = tuple(datanode_throttle_args)
        self.name = name
        self.host = self.datanode_link.host_address if self.datanode_link else host
        self.workdir = os.path.abspath(workdir or default_workdir(name))
        self.datanode_count, self.disk_mb, self.replication = datanodes, disk_mb, replication
        self.jvm = jvm
        self.hdfs_site = dict(hdfs_site or {})
        self.runtime = runtime or HadoopRuntime.of(hadoop_version)
        self.namenode: NameNode | None = None
        self.datanodes: list[DataNode] = []
        self.startup_seconds: float | None = None
        self._processes: dict[int, subprocess.Popen] = {}
        self.kerberos = HdfsKerberos(self.workdir, realm_for(name)) if kerberos else None
        self.short_circuit = short_circuit
        self.native = native or short_circuit
        self.datanode_java = JavaRuntime.at(datanode_java_home) if datanode_java_home else None
        self._archiving_classes_to: str | None = None

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
        state = {"name": self.name, "workdir": self.workdir, "hadoop_home": self.runtime.home,
                 "hadoop_version": self.runtime.version, "host": self.host,
                 "replication": self.replication, "disk_mb": self.disk_mb, "disk": self.disk,
                 "disk_read_mbps": self.disk_read_mbps,
                 "namenode": self.namenode.to_json() if self.namenode else None,
                 "datanodes": [dn.to_json() for dn in self.datanodes],
                 "client_conf_dir": self.client_conf_dir, "startup_seconds": self.startup_seconds,
                 "jvm": asdict(self.jvm), "datanode_throttle": self.datanode_throttle,
                 "datanode_throttle_args": list(self.datanode_throttle_args),
                 "kerberos": self.kerberos.to_json() if self.kerberos else None,
                 "short_circuit": self.short_circuit, "native": self.native,
                 "datanode_java_home": self.datanode_java.home if self.datanode_java else None}
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
                      runtime=HadoopRuntime(state["hadoop_home"], state.get("hadoop_version", HADOOP_VERSION)),
                      host=state.get("host", "127.0.0.1"),
                      disk=state.get("disk", "loop"), disk_read_mbps=state.get("disk_read_mbps", PACED_READ_MBPS),
                      datanode_throttle=state.get("datanode_throttle"),
                      datanode_throttle_args=tuple(state.get("datanode_throttle_args", ())),
                      datanode_java_home=state.get("datanode_java_home"))
        cluster.namenode = NameNode.from_json(state["namenode"]) if state["namenode"] else None
        cluster.datanodes = [DataNode.from_json(entry) for entry in state["datanodes"]]
        cluster.startup_seconds = state["startup_seconds"]
        cluster.short_circuit = state.get("short_circuit", False)
        cluster.native = state.get("native", cluster.short_circuit)
        if state.get("kerberos"):
            cluster.kerberos = HdfsKerberos.from_json(cluster.workdir, state["kerberos"])
        return cluster

    # ---- start ----------------------------------------------------------------

    def _classpath(self, conf_dir: str) -> str:
        # The tool's jar second, as the clients have it: the class-data archive was made with that classpath.
        return f"{self.runtime.jars}/*:{self.runtime.tool_jar()}:{conf_dir}:{self.runtime.web}"

    def throttle_socket(self, dn: DataNode) -> str:
        """The control socket of the Java agent in `dn` (its directory is the agent's, mode 0700)."""
        return os.path.join(self.workdir, f"{dn.id}.throttle", "control.sock")

    def _datanode_agent(self, dn: DataNode) -> list[str]:
        if not self.datanode_throttle:
            return []
        arguments = ",".join((f"socket={self.throttle_socket(dn)}", *self.datanode_throttle_args))
        return [f"-javaagent:{self.datanode_throttle}={arguments}"]

    def _datanode_netns(self) -> list[str]:
        return self.datanode_link.enter() if self.datanode_link else []

    def _spawn(self, role: str, java_class: str, conf_dir: str, log: str, *args: str,
               agent: list[str] = (), within: list[str] = ()) -> subprocess.Popen:
        runtime = self.datanode_java if role == "datanode" else None
        java, flags = (runtime.java, self.jvm.flags(runtime.feature)) if runtime else ("java", self.jvm.flags())
        # The clients' archive holds the Hadoop classes daemons load too (RPC, configuration, protobuf). Not where
        # the Java agent weaves the DataNode's classes, nor on another Java than the archive's.
        shared = self._shared_classes() if runtime is None and not agent else []
        argv = [*within, java, *flags, *self._setting_flags(), *shared, *agent, f"-Dproc_{role}",
                f"{MARKER}{self.workdir}",
                f"-Dhadoop.log.dir={os.path.dirname(log)}", "-cp", self._classpath(conf_dir), java_class, *args]
        with open(log, "ab") as out:
            # Own session: the daemons outlive `up` and a terminal's ^C; `down` stops them.
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                       start_new_session=True)
        self._processes[process.pid] = process
        return process

    def _setting_flags(self) -> list[str]:
        """Every JVM's flags for the cluster's settings: the realm's krb5.conf, libhadoop's dir."""
        flags = self.kerberos.jvm_flags() if self.kerberos else []
        if self.native:
            flags.append(f"-Djava.library.path={native_dir()}")
        return flags

    def _common_site(self) -> tuple[dict, dict]:
        core = {"fs.defaultFS": self.namenode.rpc_address,
                "hadoop.tmp.dir": os.path.join(self.workdir, "tmp"),
                # DataNodes start before the NameNode listens: retry every 200 ms for 20 s,
                # not 10 tries 1 s apart and then a 5 s sleep (BPServiceActor).
                "ipc.client.connect.retry.interval": 200, "ipc.client.connect.max.retries": 100,
                **self._secure_site()[0]}
        hdfs = {"dfs.namenode.rpc-address": f"{self.host}:{self.namenode.rpc_port}",
                "dfs.namenode.http-address": self.namenode.http_address,
                "dfs.replication": self.replication,
                "dfs.namenode.safemode.extension": 0,
                "dfs.permissions.enabled": "false",
                "dfs.heartbeat.interval": 1,
                "dfs.namenode.decommission.interval": 1,  # a decommissioning DataNode is checked every second
                # and its blocks' copies are ordered within a second of that, not up to 3 s later
                "dfs.namenode.redundancy.interval.seconds": 1,
                # A client closing a file (or asking for its next block) before the NameNode has the DataNodes'
                # report of the last block asks again 50 ms later, not 400 (then doubling; 8 tries, as patient).
                "dfs.client.block.write.locateFollowingBlock.initial.delay.ms": 50,
                "dfs.client.block.write.locateFollowingBlock.retries": 8,
                "dfs.datanode.hostname": self.host,
                "dfs.namenode.datanode.registration.ip-hostname-check": "false",
                # Short-circuit reads would bypass the DataNode's handler threads entirely.
                "dfs.client.read.shortcircuit": "false",
                # Hadoop 3.4 wants a block plus 1 GB free on a volume before it writes there.
                "dfs.datanode.round-robin-volume-choosing-policy.additional-available-space": 0,
                **self._secure_site()[1], **self.hdfs_site}
        return core, hdfs

    def _prepare_disks(self) -> None:
        ports = free_ports(2 + 3 * self.datanode_count)
        nn_dir = os.path.join(self.workdir, "namenode")
        os.makedirs(nn_dir)
        self.namenode = NameNode(ports[0], ports[1], os.path.join(nn_dir, "name"),
                                 os.path.join(nn_dir, "namenode.log"), os.path.join(nn_dir, "audit.log"),
                                 host=self.host)
        for index in range(self.datanode_count):
            dn_id = f"dn{index}"
            dn_dir = os.path.join(self.workdir, dn_id)
            os.makedirs(dn_dir)
            disk = self._make_disk(dn_dir, os.path.join(dn_dir, "disk"), self.disk_read_mbps)
            more = [self._make_disk(os.path.join(dn_dir, f"volume{i}"), os.path.join(dn_dir, f"volume{i}", "disk"), rate)
                    for i, rate in enumerate(self.more_disks_mbps, start=1)]
            self.datanodes.append(DataNode(
                dn_id, os.path.join(disk.mountpoint, "hdfs"), disk.mountpoint, disk.backing_file, disk.device,
                disk.device_number, DataNodePorts(*ports[2 + 3 * index: 5 + 3 * index]),
                os.path.join(dn_dir, "datanode.log"), host=self.datanode_link.address if self.datanode_link else self.host,
                more_data_dirs=tuple(os.path.join(d.mountpoint, "hdfs") for d in more),
                more_loop_devices=tuple(d.device for d in more)))
            self._save()  # a crash from here on leaves a state file that `down` can undo

    def _make_disk(self, dn_dir: str, mountpoint: str, rate_mbps: float) -> LoopDisk | ZramDisk | PacedDisk:
        os.makedirs(dn_dir, exist_ok=True)
        if self.disk == "zram":
            return ZramDisk.create(os.path.join(dn_dir, ZRAM_MARKER), mountpoint, self.disk_mb, self.ext4_options)
        if self.disk == "paced":
            return PacedDisk.create(dn_dir, mountpoint, self.disk_mb, DiskModel(rate_mbps),
                                    ext4_options=self.ext4_options)
        if self.disk == "paced-rw":
            return PacedDisk.create(dn_dir, mountpoint, self.disk_mb, DiskModel.streaming(rate_mbps),
                                    ext4_options=self.ext4_options)
        if self.disk == "hdd":
            return PacedDisk.create(dn_dir, mountpoint, self.disk_mb, DiskModel.hdd(rate_mbps),
                                    ext4_options=self.ext4_options)
        if self.disk == "spindle":
            return PacedDisk.create(dn_dir, mountpoint, self.disk_mb, DiskModel.spindle(rate_mbps),
                                    scheduler="bfq", ext4_options=self.ext4_options)
        return LoopDisk.create(os.path.join(dn_dir, "disk.img"), mountpoint, self.disk_mb,
                               ext4_options=self.ext4_options)

    def _write_confs(self) -> None:
        core, hdfs = self._common_site()
        write_conf(self._conf_dir("namenode"), core,
                    {**hdfs, "dfs.namenode.name.dir": self.namenode.name_dir,
                     "dfs.hosts.exclude": self._exclude_file},
                    log4j_properties("INFO", self.namenode.audit_log))
        for dn in self.datanodes:
            write_conf(self._conf_dir(dn.id), core,
                        {**hdfs, "dfs.datanode.data.dir": ",".join(dn.data_dirs),
                         "dfs.datanode.hostname": dn.host,
                         "dfs.datanode.address": f"{dn.host}:{dn.ports.data}",
                         "dfs.datanode.http.address": f"{dn.host}:{dn.ports.http}",
                         "dfs.datanode.ipc.address": f"{dn.host}:{dn.ports.ipc}"}, log4j_properties("INFO"))
        with open(self._exclude_file, "w"):
            pass  # no DataNode is being decommissioned
        write_conf(self.client_conf_dir, {"fs.defaultFS": self.namenode.rpc_address, **self._secure_site()[0]}, hdfs,
                   log4j_properties("WARN"))

    def _secure_site(self) -> tuple[dict, dict]:
        core, hdfs = self.kerberos.site() if self.kerberos else ({}, {})
        if self.short_circuit:
            # _PORT: each DataNode of this host its own socket, named by its data port.
            hdfs = {**hdfs, "dfs.client.read.shortcircuit": "true",
                    "dfs.domain.socket.path": os.path.join(self.domain_socket_dir, "dn._PORT")}
        return core, hdfs

    @property
    def domain_socket_dir(self) -> str:
        """Hadoop refuses a domain socket below a world-writable dir such as /tmp, sticky or not."""
        return domain_socket_dir(self.workdir)

    @property
    def _exclude_file(self) -> str:
        return os.path.join(self._conf_dir("namenode"), "dfs.exclude")

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
            if self.native and not has_native():
                raise NotFound(f"no libhadoop.so in {native_dir()}; run scripts/setup.d/hdfs.sh")
            if self.short_circuit:
                os.makedirs(self.domain_socket_dir, mode=0o755)
            if self.kerberos:
                self.kerberos.start()
            if self.datanode_link:
                self.datanode_link.start()
            self._prepare_disks()
            self._write_confs()
            self._format_namespace()
            log.info("%s: loop disks and namespace ready after %.1f s", self.name, time.monotonic() - began)
            # DataNodes boot alongside the NameNode and register once it answers.
            self.namenode.pid = self._spawn("namenode", NAMENODE_CLASS, self._conf_dir("namenode"),
                                            self.namenode.log).pid
            for dn in self.datanodes:
                dn.pid = self._spawn("datanode", DATANODE_CLASS, self._conf_dir(dn.id), dn.log, within=self._datanode_netns(),
                                     agent=self._datanode_agent(dn)).pid
            self._save()
            self._wait_for_live_datanodes(timeout=90)
            log.info("%s: %d DataNodes live after %.1f s", self.name, len(self.datanodes), time.monotonic() - began)
            self._probe()
            self._wait_until_writable(timeout=30)
            self.startup_seconds = round(time.monotonic() - began, 2)
            self._save()
            log.info("%s: probe written to every DataNode and read back; ready after %.1f s",
                     self.name, self.startup_seconds)
        except BaseException:
            self.stop()
            raise
        return self

    def restart_datanodes(self, datanode_throttle: str | None) -> None:
        """Restart every DataNode on its data, with (a jar) or without (None) the Java agent.

        Benchmarks swap the agent between two clusters this way, so what they compare is the
        agent and not one JVM instance's luck (its heap layout and JIT decisions)."""
        self.datanode_throttle = datanode_throttle
        for dn in self.datanodes:
            self._stop_datanode(dn)
            dn.pid = self._spawn("datanode", DATANODE_CLASS, self._conf_dir(dn.id), dn.log, within=self._datanode_netns(),
                                 agent=self._datanode_agent(dn)).pid
        self._save()
        self.wait_until_serving()

    def conf_dir(self, dn: DataNode) -> str:
        """The DataNode's HADOOP_CONF_DIR: hdfs-site.xml, core-site.xml, and hadoop-env.sh where one is written."""
        return self._conf_dir(dn.id)

    def restart_datanode_as_hadoop(self, dn_id: str) -> DataNode:
        """Restart one DataNode as Hadoop's launcher (`hdfs --daemon start datanode`) starts one: its conf
        dir's hadoop-env.sh sourced, java from the JAVA_HOME it sets (else the cluster's DataNode runtime),
        HDFS_DATANODE_OPTS among the JVM's options; what a site's service runs. The command line's
        `restart-datanode` calls it from another process (a deploy role's restart command). Returns once the
        new JVM is started, not serving (wait_until_serving)."""
        dn = next((d for d in self.datanodes if d.id == dn_id), None)
        if dn is None:
            raise NotFound(f"no DataNode {dn_id!r} (the cluster has {', '.join(d.id for d in self.datanodes)})")
        java_home, options = self._hadoop_env(dn)
        if java_home:
            self.datanode_java = JavaRuntime.at(java_home)
        self._stop_datanode(dn)
        dn.pid = self._spawn("datanode", DATANODE_CLASS, self._conf_dir(dn.id), dn.log, within=self._datanode_netns(),
                             agent=[*self._datanode_agent(dn), *options]).pid
        self._save()
        return dn

    def _hadoop_env(self, dn: DataNode) -> tuple[str | None, list[str]]:
        """(JAVA_HOME, HDFS_DATANODE_OPTS split as the shell splits them) after sourcing the DataNode's
        hadoop-env.sh as Hadoop's scripts do; (None, []) without one."""
        path = os.path.join(self._conf_dir(dn.id), "hadoop-env.sh")
        if not os.path.exists(path):
            return None, []
        read = subprocess.run(["bash", "-c", '. "$1" >/dev/null; printf "%s\\0%s" "${JAVA_HOME:-}" "${HDFS_DATANODE_OPTS:-}"',
                               "hadoop-env", path], env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                              capture_output=True, text=True, timeout=30)
        if read.returncode != 0:
            raise InvalidArgument(f"{path}: sourcing it failed (exit {read.returncode}): {read.stderr.strip()[:500]}")
        java_home, options = read.stdout.split("\0", 1)
        return java_home or None, shlex.split(options)

    def _stop_datanode(self, dn: DataNode) -> None:
        """Stop its JVM, ours or one another process (a restart command) started."""
        process = self._processes.pop(dn.pid, None)
        if process is not None:
            stop_process(process, grace_seconds=30)
            return
        with contextlib.suppress(psutil.NoSuchProcess):
            if MARKER + self.workdir in psutil.Process(dn.pid).cmdline():
                stop_processes([psutil.Process(dn.pid)], grace_seconds=30)

    def reload_datanode_pids(self) -> None:
        """Each DataNode's pid from cluster.json, after another process restarted some (restart-datanode);
        the JVMs this process started and that one stopped are reaped."""
        with open(self.state_path) as f:
            pids = {entry["id"]: entry["pid"] for entry in json.load(f)["datanodes"]}
        for dn in self.datanodes:
            if pids[dn.id] != dn.pid:
                old = self._processes.pop(dn.pid, None)
                if old is not None:
                    old.wait(30)
                dn.pid = pids[dn.id]

    def wait_until_serving(self, timeout: float = 90, blocks: int = 1) -> None:
        """After DataNodes restarted: each accepts block transfers, a probe is written to every one and read
        back, and the NameNode sees room for `blocks` blocks on each (as many as writers start at once)."""
        self._wait_for_data_ports(timeout=timeout)
        self._probe(attempts=20)  # the NameNode may still hand out a DataNode that re-registers
        self._wait_until_writable(timeout=30, blocks=blocks)

    def _wait_for_data_ports(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for dn in self.datanodes:
            while True:
                self._check_daemons_alive()
                with contextlib.suppress(OSError), socket.create_connection((dn.host, dn.ports.data), timeout=1):
                    break
                if time.monotonic() > deadline:
                    raise Unavailable(f"DataNode {dn.id} does not accept on {dn.xfer_address} after {timeout}s")
                time.sleep(0.2)

    def _check_daemons_alive(self) -> None:
        for role, pid, logfile in [("NameNode", self.namenode.pid, self.namenode.log),
                                   *[(f"DataNode {dn.id}", dn.pid, dn.log) for dn in self.datanodes]]:
            process = self._processes.get(pid)
            if process is not None and process.poll() is not None:
                # The workdir, log included, is removed on the way out: keep the cause in the error.
                raise Unavailable(f"{role} (pid {pid}) exited with {process.returncode}; "
                                  f"last error in its log: {_last_error(logfile)}")

    def jmx(self, query: str) -> dict:
        """The NameNode's /jmx?qry=QUERY (with SPNEGO as the admin principal on a secure cluster)."""
        path = f"/jmx?qry={query}"
        if self.kerberos:
            return json.loads(self.kerberos.curl(f"http://{SERVICE_HOST}:{self.namenode.http_port}{path}"))
        with urllib.request.urlopen(f"http://{self.namenode.http_address}{path}", timeout=2) as response:
            return json.load(response)

    def live_datanodes(self) -> int:
        """NumLiveDataNodes from the NameNode's /jmx; registered is not yet writable."""
        return int(self.jmx("Hadoop:service=NameNode,name=FSNamesystemState")["beans"][0]["NumLiveDataNodes"])

    def _wait_for_live_datanodes(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        live = 0
        while time.monotonic() < deadline:
            self._check_daemons_alive()
            with contextlib.suppress(OSError, ValueError, KeyError, IndexError, Unavailable):
                live = self.live_datanodes()
                if live == len(self.datanodes):
                    return
            time.sleep(0.2)
        raise Unavailable(f"{live} of {len(self.datanodes)} DataNodes live after {timeout}s; "
                          f"see the logs in {self.workdir}")

    def _wait_until_writable(self, timeout: float, blocks: int = 1) -> None:
        """Until the NameNode sees room for `blocks` whole blocks on every DataNode.

        A DataNode reports a block's full size as used while it writes one, and the NameNode
        counts a block it handed out until the DataNode reports it: for a heartbeat after the
        probe, a small volume looks full and the next write finds no DataNode to take it. Each
        writer that starts at once needs a block's room of its own (the NameNode subtracts the
        blocks it has scheduled on a DataNode from what the DataNode last reported), and one more
        for each writer after the first: a heartbeat that already reports a started block's space
        reserved can reach the NameNode before the report that the block is being received, and
        for that while the block counts twice (a later writer's block is refused: "1 node(s) are
        excluded in this operation")."""
        wanted = (2 * blocks - 1) * parse_size(str(self.hdfs_site.get("dfs.blocksize", DEFAULT_BLOCK_BYTES)))
        deadline = time.monotonic() + timeout
        nodes: dict = {}
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError, KeyError, IndexError, Unavailable):
                info = self.jmx("Hadoop:service=NameNode,name=NameNodeInfo")["beans"][0]
                nodes = json.loads(info.get("LiveNodes") or "{}")
            if len(nodes) == len(self.datanodes) and all(
                    node["remaining"] >= wanted and node["blockScheduled"] == 0 for node in nodes.values()):
                return
            time.sleep(0.2)
        room = {name: (node.get("remaining"), node.get("blockScheduled")) for name, node in nodes.items()}
        raise Unavailable(f"DataNodes without room for {blocks} block(s), {wanted} bytes, after {timeout}s "
                          f"(remaining, blocks scheduled): {room}")

    def _probe(self, attempts: int = 3) -> None:
        error = ""
        for _ in range(attempts):
            self._check_daemons_alive()
            with self._archiving_client_classes():
                result = self._run_tool("probe", "/.vnode-sync-probe", str(len(self.datanodes)), check=False)
            if result.returncode == 0:
                return
            error = result.stderr.strip()[:3000]
            time.sleep(0.5)
        raise Unavailable(f"probe write and read failed {attempts} times: {error}")

    # ---- clients ----------------------------------------------------------------

    def add_user(self, name: str, uid: int) -> None:
        """On a secure cluster: principal `name@REALM`, its keytab and a ticket cache, owned by `uid`
        (gid from passwd, else = uid); clients with hdfs_user=`name` then authenticate as it."""
        if not self.kerberos:
            raise InvalidArgument("add_user: this cluster has no Kerberos (HdfsCluster(kerberos=True))")
        _, gid, _ = _user_ids(uid, name)
        self.kerberos.add_user(name, kdc.Owner(uid, gid))

    def client_command(self, java_class: str, *args: str) -> list[str]:
        """argv of a native-client JVM for this cluster (run it with `user=`/`group=` for another uid)."""
        # No perf data: a client as another uid would leave /tmp/hsperfdata_<user> behind.
        return ["java", *self.jvm.flags(), *self._setting_flags(), *self._client_class_data(), "-XX:-UsePerfData",
                f"{MARKER}{self.workdir}",
                "-cp", f"{self.runtime.jars}/*:{self.runtime.tool_jar()}:{self.client_conf_dir}",
                java_class, *args]

    def _client_class_data(self) -> list[str]:
        """A client maps Hadoop's classes from the line's class-data archive (CDS) where it has one: it starts
        in half the time (a DFS client to its first call, 0.38 against 0.73 s here), and a test starts
        dozens. The first probe where there is none writes it as its JVM exits (_archiving_client_classes)."""
        if self._archiving_classes_to:
            return [f"-XX:ArchiveClassesAtExit={self._archiving_classes_to}", *JVM_WARNINGS_TO_STDERR]
        return self._shared_classes()

    def _shared_classes(self) -> list[str]:
        archive = self.runtime.client_class_archive(default_java())
        return [f"-XX:SharedArchiveFile={archive}", *JVM_WARNINGS_TO_STDERR] if os.path.exists(archive) else []

    @contextlib.contextmanager
    def _archiving_client_classes(self) -> Iterator[None]:
        """Where the line has no client archive yet, the client run inside writes one (once per Hadoop line
        and Java build; a concurrent run's is as good)."""
        archive = self.runtime.client_class_archive(default_java())
        if os.path.exists(archive):
            yield
            return
        self._archiving_classes_to = f"{archive}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
        try:
            yield
        finally:
            staging, self._archiving_classes_to = self._archiving_classes_to, None
            with contextlib.suppress(OSError):
                os.replace(staging, archive)

    def _client(self, java_class: str, args: tuple[str, ...], as_uid: int | None, hdfs_user: str | None,
                stdin: int = subprocess.DEVNULL, text: bool = True) -> subprocess.Popen:
        uid, gid, user = _user_ids(as_uid, hdfs_user)
        if self.kerberos:  # the principal's ticket, not a name the client claims
            env = dict(os.environ, **self.kerberos.client_env(user or ADMIN))
            env.pop("HADOOP_USER_NAME", None)
        else:
            env = dict(os.environ, HADOOP_USER_NAME=user) if user else dict(os.environ)
        ids = {"user": uid, "group": gid, "extra_groups": []} if uid is not None else {}
        return subprocess.Popen(self.client_command(java_class, *args), env=env, cwd="/", text=text,
                                stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **ids)

    def _run_client(self, what: str, java_class: str, *args: str, as_uid: int | None = None,
                    hdfs_user: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        process = self._client(java_class, args, as_uid, hdfs_user)
        out, err = process.communicate()
        if check and process.returncode != 0:
            # A client's error names what it saw (a DataNode excluded); the DataNode's log says why, and the
            # workdir goes with the cluster: keep each DataNode's last error in the message, ahead of the trace.
            datanodes = "; ".join(f"DataNode {dn.id}'s last error: {_last_error(dn.log)}" for dn in self.datanodes)
            raise Unavailable(f"{what} failed (exit {process.returncode}) [{datanodes}]: {err.strip()[:3000]}")
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

    def start_shell(self, *args: str, as_uid: int | None = None, hdfs_user: str | None = None,
                    stdin: int = subprocess.DEVNULL, text: bool = True) -> subprocess.Popen:
        """`hdfs dfs ARGS` (FsShell) left running, e.g. start_shell("-put", local, remote, as_uid=...);
        stdin=subprocess.PIPE, text=False for `-put -` fed by the caller (metered.py)."""
        return self._client("org.apache.hadoop.fs.FsShell", args, as_uid, hdfs_user, stdin, text)

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

    def start_interactive(self, remotes: list[str], gap_seconds: float, as_uid: int | None = None,
                          hdfs_user: str | None = None, write_bytes: int = 0) -> subprocess.Popen:
        """One client JVM that reads (or, with `write_bytes`, writes) each of `remotes` in turn, idle
        `gap_seconds` between them; one Transfer JSON line per file on its stdout, as each is done."""
        mode = ("writes", self.namenode_uri, str(gap_seconds), str(write_bytes)) if write_bytes else \
            ("reads", self.namenode_uri, str(gap_seconds))
        return self._client(TOOL_CLASS, (*mode, *remotes), as_uid, hdfs_user)

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

    def decommission(self, datanodes: list[DataNode]) -> None:
        """Start decommissioning `datanodes` (and stop it for the others): the exclude file, then
        `hdfs dfsadmin -refreshNodes`. The NameNode re-replicates their blocks elsewhere."""
        partial = self._exclude_file + ".partial"
        with open(partial, "w") as f:
            f.writelines(f"{dn.xfer_address}\n" for dn in datanodes)
        os.replace(partial, self._exclude_file)
        self._run_client("dfsadmin -refreshNodes", "org.apache.hadoop.hdfs.tools.DFSAdmin", "-refreshNodes")

    def admin_states(self) -> dict[str, str]:
        """DataNode id -> its admin state at the NameNode ("In Service", "Decommission In Progress",
        "Decommissioned", ...), from /jmx NameNodeInfo."""
        info = self.jmx("Hadoop:service=NameNode,name=NameNodeInfo")["beans"][0]
        by_address = {dn.xfer_address: dn.id for dn in self.datanodes}
        states = {}
        for kind in ("LiveNodes", "DeadNodes", "DecomNodes"):
            for name, node in json.loads(info.get(kind) or "{}").items():
                address = node.get("xferaddr") or name
                if address in by_address:
                    states.setdefault(by_address[address], node.get("adminState", kind))
        return states

    def evict_page_cache(self) -> None:
        """Flush and drop every DataNode block file from the page cache, so the next read is block I/O."""
        for dn in self.datanodes:
            for directory, _, files in (entry for d in dn.data_dirs for entry in os.walk(d)):
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
        take_down(self.workdir)
        if self.datanode_link:
            self.datanode_link.stop()
        for process in self._processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(1)  # reap our own children
        self._processes.clear()

    def __enter__(self) -> "HdfsCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def domain_socket_dir(workdir: str) -> str:
    return os.path.join("/run", os.path.basename(workdir.rstrip("/")) + ".sockets")


def _marked_processes(workdir: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if MARKER + workdir in (process.info["cmdline"] or ()):
            found.append(process)
    return found


def _last_error(logfile: str) -> str:
    try:
        with open(logfile, errors="replace") as f:
            lines = [line.strip() for line in f if line.strip()]
    except OSError:
        return "(no log)"
    errors = [line for line in lines if " ERROR " in line or "Exception" in line]
    return (errors or lines or ["(empty log)"])[-1][:500]


def take_down(workdir: str) -> list[str]:
    """Stop this cluster's marked JVMs (its clients too), unmount, detach loops, delete the workdir.

    Works from the workdir alone, for a cluster whose `up` process is gone; what crashed runs
    left across the host is testbed.leftovers' job."""
    processes = _marked_processes(workdir)
    scope = workdir.rstrip("/") + "/"
    mounts, loops = stale_mounts(scope), stale_loops(scope)
    found = ([f"process {p.pid}" for p in processes] + [f"mount {m}" for m in mounts]
             + [f"loop {loop}" for loop in loops] + ([f"workdir {workdir}"] if os.path.isdir(workdir) else []))
    stop_processes(processes)
    found += kdc.take_down(os.path.join(workdir, "kerberos", "kdc"))
    if os.path.isdir(domain_socket_dir(workdir)):
        found.append(f"sockets {domain_socket_dir(workdir)}")
        shutil.rmtree(domain_socket_dir(workdir), ignore_errors=True)
    for mountpoint in mounts:
        unmount(mountpoint)
    for device in loops:
        detach(device)
    for directory, _, files in os.walk(workdir):
        if ZRAM_MARKER in files:
            remove_marked(os.path.join(directory, ZRAM_MARKER))
    found += [f"early writeback {h}" for h in early_writeback.release_run(os.path.basename(workdir.rstrip("/")),
                                                                          holder_is_live)]
    shutil.rmtree(workdir, ignore_errors=True)
    return found

