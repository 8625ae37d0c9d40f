"""A real HDFS governed by vnode-sync: one storage agent per DataNode, HDFS discovery.

    with HdfsVNodeCluster(name, users, node_bw) as (hdfs, cluster):
        ...  # hdfs: HdfsCluster; cluster: LocalCluster (coordinator + agents dn0, dn1, ...)

Each agent manages the loop device its DataNode's data dir lives on and captures
that DataNode's DataXceiver threads (found by pid).
"""

import contextlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from vnode_sync.agents.handlers.generic import thread_comm, threads_of
from vnode_sync.agents.handlers.hdfs import HANDLER_COMM, RESPONDER_COMM
from vnode_sync.errors import KernelError
from vnode_sync.kernel.backend import HostCgroups
from vnode_sync.kernel.blkio_v1 import BlkioV1Backend
from vnode_sync.kernel.procfs import read_text
from vnode_sync.kernel.types import IoCounters
from testbed.hdfs_cluster import DataNode, HdfsCluster, datanode_throttle_jar
from testbed.local_cluster import LocalCluster, LocalNode, LocalUser


@contextlib.contextmanager
def hdfs_vnode_cluster(name: str, users: list[LocalUser], node_bw: int, datanodes: int = 2,
                       disk_mb: int = 2048, host: str = "127.0.0.1",
                       before_agents=None, hdfs_site: dict | None = None, write_bw: int | None = None,
                       policy: dict | None = None, backend: str = "blkio-v1",
                       replication: int = 1, block_tokens: bool = True,
                       agent_settings: dict | None = None, disk: str = "loop", disk_read_mbps: float | None = None,
                       java_agent_args: tuple[str, ...] = (),
                       throttle_settings: dict | None = None,
                       hadoop_version: str | None = None,
                       kerberos: bool = False,
                       short_circuit: bool = False,
                       native: bool = False,
                       datanode_java_home: str | None = None) -> Iterator[tuple[HdfsCluster, LocalCluster]]:
    """`before_agents(hdfs)` runs once HDFS is up and before vnode-sync starts (e.g. to write files
    unthrottled). `backend`: "blkio-v1" (handler threads in cgroups) or "datanode-throttle" (the
    Java agent in every DataNode; no cgroup). `block_tokens` (datanode-throttle only): block access
    tokens on, so the Java agent charges the token's user. `disk`/`disk_read_mbps`: HdfsCluster's
    (paced disks for timing). `java_agent_args`: more -javaagent arguments (e.g. skip_hook=...);
    `throttle_settings`: more keys of the agents' datanode_throttle section (e.g. sharing).
    `hadoop_version`: the Hadoop line (default the testbed's). `kerberos`: a secure HDFS (KDC, SASL
    privacy, block tokens, SPNEGO) where each user is the principal `<name>@REALM` with a ticket
    cache of its own, made before `before_agents`. `short_circuit`: short-circuit local reads on.
    `native`: the DataNodes load libhadoop as production ones do (HdfsCluster's). `datanode_java_home`:
    the Java runtime the DataNodes (and the agent in them) run on (HdfsCluster's)."""
    throttle = backend == "datanode-throttle"
    if throttle and block_tokens:
        # Block access tokens name the HDFS user on every DataNode of a write pipeline; without
        # them a downstream replica's client is the upstream DataNode (the default VNode's).
        hdfs_site = {"dfs.block.access.token.enable": "true", **(hdfs_site or {})}
    paced = {"disk_read_mbps": disk_read_mbps} if disk_read_mbps else {}
    with HdfsCluster(name, datanodes=datanodes, disk_mb=disk_mb, host=host, hdfs_site=hdfs_site,
                     replication=replication, datanode_throttle=datanode_throttle_jar() if throttle else None,
                     datanode_throttle_args=java_agent_args, disk=disk, **paced,
                     hadoop_version=hadoop_version, kerberos=kerberos, short_circuit=short_circuit,
                     native=native, datanode_java_home=datanode_java_home) as hdfs:
        for user in users if kerberos else ():
            hdfs.add_user(user.name, user.uid)
        if before_agents is not None:
            before_agents(hdfs)

        def settings(dn: DataNode) -> dict:
            if not throttle:
                return {}
            return {"backend": backend,
                    "datanode_throttle": {"socket": hdfs.throttle_socket(dn), **(throttle_settings or {})}}

        # Each DataNode's data transfer address: compute agents' connection reports reach that node only.
        nodes = [LocalNode(dn.id, (dn.loop_device,), node_bw, write_bw or node_bw, {"kind": "hdfs", "pid": dn.pid},
                           settings(dn), (f"{dn.host}:{dn.ports.data}",)) for dn in hdfs.datanodes]
        with LocalCluster(name, users, nodes, listen_host=host, agent_settings=agent_settings,
                          coordinator_settings={"policy": policy or {}}) as cluster:
            yield hdfs, cluster


def write_user_files(users: list[LocalUser], size: int):
    """A `before_agents` step: each user writes `/<user>/on-<dn>.bin` with its first replica on each
    DataNode, then the page cache is dropped so reads reach the disks."""
    def write_to(hdfs: HdfsCluster, dn: DataNode) -> None:
        for user in users:
            hdfs.write_file(f"/{user.name}/on-{dn.id}.bin", size, as_uid=user.uid, hdfs_user=user.name,
                            on_datanode=dn)

    def write(hdfs: HdfsCluster) -> None:
        # One writer per DataNode at a time: each disk takes one stream, and the DataNodes fill together.
        with ThreadPoolExecutor(max_workers=len(hdfs.datanodes)) as pool:
            for done in [pool.submit(write_to, hdfs, dn) for dn in hdfs.datanodes]:
                done.result()
        hdfs.evict_page_cache()
    return write


def node_vnodes(cluster: LocalCluster, node_id: str) -> BlkioV1Backend:
    """The VNodes (blkio v1) that the cluster's agent for `node_id` keeps, read from the host."""
    return BlkioV1Backend(HostCgroups().blkio_v1, cluster.cgroup_name(node_id))


def vnode_usage(cluster: LocalCluster, dn: DataNode, vnode: str) -> IoCounters:
    """What the kernel charged to `vnode` on the DataNode's own disk (zero while the VNode is missing).

    Only the DataNode's device counts: a loop device (direct I/O) charges the same bytes to
    its backing device as well."""
    try:
        return node_vnodes(cluster, dn.id).counters(vnode).get(dn.device_number, IoCounters())
    except KernelError:
        return IoCounters()


def handler_placement(dn: DataNode) -> list[tuple[int, str, str]]:
    """(tid, name, blkio cgroup) of each of the DataNode's threads that serve or spawn clients."""
    placed = []
    for tid in threads_of("/proc", dn.pid):
        comm = thread_comm("/proc", dn.pid, tid) or ""
        if comm.startswith((HANDLER_COMM, RESPONDER_COMM, "org.apache.hado")):
            cgroups = read_text(f"/proc/{dn.pid}/task/{tid}/cgroup") or ""
            blkio = next((line.split(":", 2)[2] for line in cgroups.splitlines() if ":blkio:" in line), "?")
            placed.append((tid, comm, blkio))
    return placed


def placement_report(cluster: LocalCluster, hdfs: HdfsCluster, readers=()) -> str:
    """Why a wait for captured handlers may have failed: each reader's state, each DataNode's
    handler threads and their cgroups, and the tail of each agent's log."""
    lines = []
    for reader in readers:
        code = reader.poll()
        said = reader.stderr.read() if code is not None and reader.stderr else ""
        state = "running" if code is None else f"exited {code}: {(said or '')[-800:]!r}"
        lines.append(f"reader {' '.join(reader.args[-3:])}: {state}")
    for dn in hdfs.datanodes:
        lines.append(f"{dn.id} (pid {dn.pid}) handlers: {handler_placement(dn)}")
        lines.append(f"agent {dn.id} log tail:\n{cluster.agent_log_tail(dn.id)}")
    return "\n".join(lines)

