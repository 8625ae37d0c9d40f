"""A real HDFS on this host: one NameNode and N DataNodes, each DataNode on a block device of its own.

Each daemon is a separate JVM running the jars of one Hadoop line (deploy/hadoop/lines.txt:
3.4.2 by default, `hadoop_version=` or $VNODE_SYNC_HADOOP_VERSION for another) that
`scripts/setup.d/hdfs.sh` fetched; each DataNode's data dir is an ext4 file system on its own loop device (or, with
disk="zram", a RAM block device; with disk="paced", a loop device whose reads are paced like
a real disk's), so a read that misses the page cache is block I/O on that device's MAJ:MIN,
which blkio can throttle.
Ready means a probe block was written to every DataNode and read back by the native client.

Command line (as root):

    python -m testbed.hdfs_cluster up --name demo [--datanodes 2] [--disk-mb 1024] [--replication 1]
                                       [--hadoop-version 3.3.6] [--kerberos] [--short-circuit]
                                       [--datanode-java-home /usr/lib/jvm/java-11-openjdk-amd64]
    python -m testbed.hdfs_cluster add-user --name demo alice --uid 1001     # secure: alice@REALM
    python -m testbed.hdfs_cluster write --name demo /alice/a.bin --size-mb 512 --as-uid 1001
    python -m testbed.hdfs_cluster read --name demo /alice/a.bin --as-uid 1002 --hdfs-user bob
    python -m testbed.hdfs_cluster status --name demo
    python -m testbed.hdfs_cluster restart-datanode --name demo dn0  # as Hadoop's launcher: conf/dn0/hadoop-env.sh
    python -m testbed.hdfs_cluster down --name demo      # also when `up`'s process is gone
    python -m testbed.hdfs_cluster cleanup-stale [--prefix P] [--dry-run]

`up` leaves the daemons running and writes `<workdir>/cluster.json` (workdir default
`/tmp/vnode-sync-hdfs.<name>`): namenode {pid, rpc_address "hdfs://127.0.0.1:PORT",
http_address "127.0.0.1:PORT", rpc_port, http_port, name_dir, log, audit_log}; datanodes
[{id "dn0", pid, data_dir, mountpoint, backing_file, loop_device "/dev/loopN",
device_number "MAJ:MIN", major, minor, ports {data, http, ipc}, log}]; name, workdir,
hadoop_home, hadoop_version, replication, disk_mb, disk, disk_read_mbps, client_conf_dir, startup_seconds,
jvm, datanode_java_home. Every JVM carries `-Dtestbed.workdir=<workdir>`: `down` and `cleanup-stale`
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

Clients (`write_file`, `put`, `read_file`, `start_read`) run a small Java class
(VnodeSyncHdfsStream.java here) that `HadoopRuntime.prepare()` compiles once into the cache (and a jar).
Client JVMs, and the daemons without the Java agent, map the line's Hadoop classes from a class-data
archive (CDS) beside it, which the first probe on a line writes: a client starts in half the time. The client's Unix uid is `as_uid` (the
owner of its socket in /proc/net/tcp), its HDFS user is `hdfs_user` (audit log `ugi=`;
default the uid's passwd name, or "uid<N>"); a uid needs no passwd entry. `write_file`
streams incompressible bytes from memory, the fastest way to make a big file (512 MiB in
about 3 s here); `put` copies a local file. `shell()` runs `hdfs dfs` (FsShell), which needs a
passwd entry for `as_uid`. `block_datanodes()` tells which DataNode holds each block.

Secure HDFS: `HdfsCluster(..., kerberos=True)` starts a KDC of the cluster's own first (MIT
Kerberos, testbed/kdc.py; realm = the cluster name upper-cased) and runs every daemon with
Kerberos, block tokens, SASL privacy (AES/CTR) on data transfer and SPNEGO on HTTP
(kerberos.py). `add_user("alice", uid)` makes alice@REALM, its keytab and ticket cache (owned by
uid); a client with hdfs_user="alice" then authenticates with that ticket (the uid needs a passwd
entry there: Java's login module asks for its name). `jmx()` polls with `curl --negotiate`.
metered.py runs `hdfs dfs -put -` / `-cat` and counts their bytes from the client's side.

DataNodes on another JVM: `HdfsCluster(..., datanode_java_home=installed_java(11).home)` runs the
DataNodes (and the Java agent in them) on that runtime, as sites run Hadoop 3.3 and 3.4 on Java 8 or
11 (scripts/setup.d/java11.sh installs 11; no Java 8 is packaged for this machine); the NameNode and
the clients stay on the JDK 17 on PATH, which compiles the client tool.

Short-circuit local reads: `HdfsCluster(..., short_circuit=True)` gives each DataNode a domain
socket (`/run/<workdir name>.sockets/dn.<data port>`: Hadoop refuses one below world-writable
/tmp) and loads libhadoop.so into the DataNodes and clients (Trino's build of Hadoop's native
library, deploy/hadoop/native.txt; only then, so other clusters keep running without it). A
local client then reads block files itself after `requestShortCircuitFds`.

Caveats: without libhadoop a DataNode cannot drop its page cache after reads, so a file read
once is served from memory later (no block I/O, no throttle): call `evict_page_cache()` before
every measured read, and note that `start_read(seconds=...)` re-reads a short file from cache.
Sockets are IPv4 (/proc/net/tcp), as `bin/hdfs` sets `-Djava.net.preferIPv4Stack=true`;
`JvmSettings(ipv4_stack=False)` gives dual-stack (/proc/net/tcp6). HDFS permissions are off.

Modules: runtime (Hadoop lines, jars, JVM flags, the client tool), site_config (Hadoop's config
files), kerberos (the secure cluster's realm and settings), daemons (what cluster.json records),
cluster (HdfsCluster and take_down), metered (client-side byte counts), __main__ (the CLI).
"""

from testbed.hdfs_cluster.cluster import (DISK_KINDS, MARKER, PACED_READ_MBPS, WORKDIR_PREFIX, HdfsCluster, default_workdir,
                                          take_down)
from testbed.hdfs_cluster.daemons import DataNode, NameNode, Transfer
from testbed.hdfs_cluster.runtime import (DATANODE_CLASS, HADOOP_LINES, HADOOP_VERSION, HadoopRuntime, JavaRuntime,
                                         JvmSettings, datanode_throttle_jar, default_java, hadoop_home, hadoop_version,
                                         has_jars, has_native, installed_java)

__all__ = ["DATANODE_CLASS", "DISK_KINDS", "HADOOP_LINES", "HADOOP_VERSION", "MARKER", "PACED_READ_MBPS",
           "WORKDIR_PREFIX", "DataNode", "HadoopRuntime", "HdfsCluster", "JavaRuntime", "JvmSettings", "NameNode",
           "Transfer", "default_java", "default_workdir", "hadoop_home", "hadoop_version", "has_jars", "has_native",
           "installed_java", "take_down", "datanode_throttle_jar"]
