"""The local HDFS testbed on the real kernel: two DataNodes on loop devices, native-client I/O, full cleanup."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from tests.conftest import needs_fuse, needs_java, needs_kernel, unique_name
from testbed.names import crashed_run_name
from testbed.hdfs_cluster import (MARKER, HadoopRuntime, HdfsCluster, default_workdir, hadoop_home, hadoop_version,
                                  has_jars, has_native, take_down)
from testbed.hdfs_cluster.cluster import _last_error
from testbed.loopdev import LoopDisk, stale_loops, stale_mounts
from testbed.paced_disk import DiskModel, PacedDisk
from vnode_sync.errors import InvalidArgument

pytestmark = [needs_kernel, pytest.mark.slow]

needs_hadoop = pytest.mark.skipif(
    not has_jars(), reason=f"needs the Hadoop {hadoop_version()} jars in {hadoop_home()}; run scripts/setup.d/hdfs.sh")

MiB = 1 << 20
ALICE_UID, BOB_UID = 64_201, 64_202  # no passwd entries: clients must not need one


def marked_processes(workdir: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if f"{MARKER}{workdir}".encode() in args:
            found.append(int(pid))
    return found


def paced_disk_servers(workdir: str) -> list[int]:
    found = subprocess.run(["pgrep", "-f", f"paced_disk serve {workdir}/"], capture_output=True, text=True)
    return [int(pid) for pid in found.stdout.split()]


def assert_nothing_left(workdir: str) -> None:
    assert marked_processes(workdir) == []
    for _ in range(100):  # a paced disk's FUSE server exits once the last mount of it is gone
        if not paced_disk_servers(workdir):
            break
        time.sleep(0.1)
    assert paced_disk_servers(workdir) == []
    assert stale_mounts(workdir + "/") == []
    assert stale_loops(workdir + "/") == []
    assert not os.path.exists(workdir)


def sectors_read(device_number) -> int:
    with open(f"/sys/dev/block/{device_number}/stat") as f:
        return int(f.read().split()[2])


@pytest.fixture(scope="module")
def cluster():
    cluster = HdfsCluster(unique_name("hdfs"), datanodes=2, disk_mb=256)
    with cluster:
        yield cluster


@needs_java
@needs_hadoop
def test_ready_means_a_file_written_as_one_user_reads_back_as_another(cluster):
    written = cluster.write_file("/alice/probe.bin", 8 * MiB, as_uid=ALICE_UID, hdfs_user="alice")
    read = cluster.read_file("/alice/probe.bin", as_uid=BOB_UID, hdfs_user="bob")
    assert written.bytes == read.bytes == 8 * MiB
    with open(cluster.namenode.audit_log) as f:
        audit = f.read()
    assert "ugi=alice" in audit and "ugi=bob" in audit and "cmd=open\tsrc=/alice/probe.bin" in audit


@needs_java
@needs_hadoop
def test_clients_map_the_lines_class_data_archive_the_first_probe_wrote(cluster):
    """-Xshare:on refuses to start a JVM that cannot use the archive (another build, another classpath)."""
    argv = cluster.client_command("VnodeSyncHdfsStream")
    (archive,) = [a.split("=", 1)[1] for a in argv if a.startswith("-XX:SharedArchiveFile=")]
    assert os.path.exists(archive)
    mapped = subprocess.run([argv[0], "-Xshare:on", *argv[1:-1], "-version"], capture_output=True, text=True,
                            timeout=60)
    assert mapped.returncode == 0 and mapped.stdout == "", mapped.stderr


@needs_java
@needs_hadoop
def test_each_datanode_has_its_own_loop_device_and_ports(cluster):
    assert len({dn.device_number for dn in cluster.datanodes}) == 2
    ports = [cluster.namenode.rpc_port, cluster.namenode.http_port]
    for dn in cluster.datanodes:
        st = os.stat(dn.data_dir)
        assert (os.major(st.st_dev), os.minor(st.st_dev)) == (dn.device_number.major, dn.device_number.minor)
        assert dn.loop_device in stale_loops(dn.backing_file)
        assert os.path.exists(f"/proc/{dn.pid}")
        ports += [dn.ports.data, dn.ports.http, dn.ports.ipc]
    assert len(set(ports)) == len(ports)


@needs_java
@needs_hadoop
def test_a_read_after_eviction_is_block_io_on_the_datanode_that_holds_the_file(cluster):
    dn0, dn1 = cluster.datanodes
    cluster.write_file("/bob/big.bin", 32 * MiB, as_uid=BOB_UID, on_datanode=dn1)
    assert cluster.block_datanodes("/bob/big.bin") == [[dn1]]
    cluster.evict_page_cache()
    before = {dn.id: sectors_read(dn.device_number) for dn in cluster.datanodes}
    cluster.read_file("/bob/big.bin", as_uid=BOB_UID)
    assert (sectors_read(dn1.device_number) - before["dn1"]) * 512 >= 32 * MiB
    assert (sectors_read(dn0.device_number) - before["dn0"]) * 512 < 4 * MiB


@needs_java
@needs_hadoop
def test_the_state_file_describes_the_running_cluster(cluster):
    with open(os.path.join(cluster.workdir, "cluster.json")) as f:
        state = json.load(f)
    assert state["namenode"]["rpc_address"] == cluster.namenode_uri == \
        f"hdfs://127.0.0.1:{cluster.namenode.rpc_port}"
    dn = state["datanodes"][0]
    assert {"id", "pid", "data_dir", "loop_device", "device_number", "major", "minor", "ports"} <= set(dn)
    assert dn["device_number"] == f"{dn['major']}:{dn['minor']}"
    other = HdfsCluster.attach(cluster.workdir)
    assert [(d.id, d.pid, d.loop_device, d.device_number, d.ports) for d in other.datanodes] == \
        [(d.id, d.pid, d.loop_device, d.device_number, d.ports) for d in cluster.datanodes]
    assert other.startup_seconds == cluster.startup_seconds > 0


@needs_java
@needs_hadoop
def test_stop_removes_every_process_mount_loop_and_the_workdir(cluster):
    reader = cluster.start_read("/alice/probe.bin", as_uid=ALICE_UID, seconds=60)  # a client still running
    cluster.stop()
    assert reader.wait(15) is not None
    reader.communicate()
    assert_nothing_left(cluster.workdir)


@needs_java
@needs_hadoop
@pytest.mark.parametrize("disk", ["loop", pytest.param("paced", marks=needs_fuse)])
def test_down_works_from_the_state_file_after_up_exited(disk):
    name = unique_name("hdfs-cli")
    workdir = default_workdir(name)
    cli = [sys.executable, "-m", "testbed.hdfs_cluster"]
    try:
        up = subprocess.run([*cli, "up", "--name", name, "--datanodes", "1", "--disk-mb", "256", "--disk", disk,
                             "--disk-read-mbps", "300"], capture_output=True, text=True, timeout=180)
        assert up.returncode == 0, up.stderr
        assert f"HDFS {hadoop_version()} up in" in up.stdout
        assert len(marked_processes(workdir)) == 2
        attached = HdfsCluster.attach(workdir)
        assert (attached.disk, attached.disk_read_mbps) == (disk, 300)
        assert len(paced_disk_servers(workdir)) == (1 if disk == "paced" else 0)
        down = subprocess.run([*cli, "down", "--name", name], capture_output=True, text=True, timeout=60)
        assert down.returncode == 0, down.stderr
        assert_nothing_left(workdir)
    finally:
        take_down(workdir)


@needs_fuse
def test_cleanup_stale_takes_down_a_crashed_runs_paced_disk():
    name = crashed_run_name("hdfs-stale-paced")
    workdir = default_workdir(name)
    os.makedirs(os.path.join(workdir, "dn0"))
    PacedDisk.create(os.path.join(workdir, "dn0"), os.path.join(workdir, "dn0", "disk"), 64, DiskModel(500))
    try:
        result = subprocess.run([sys.executable, "-m", "testbed.hdfs_cluster", "cleanup-stale",
                                 "--prefix", name], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert_nothing_left(workdir)
    finally:
        take_down(workdir)


def test_cleanup_stale_finds_leftovers_by_prefix():
    """What a crashed `up` leaves: a marked process, a mounted loop disk, a workdir."""
    name = crashed_run_name("hdfs-stale")
    workdir = default_workdir(name)
    os.makedirs(workdir)
    disk = LoopDisk.create(os.path.join(workdir, "disk.img"), os.path.join(workdir, "disk"), 64)
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", f"{MARKER}{workdir}"])
    try:
        result = subprocess.run([sys.executable, "-m", "testbed.hdfs_cluster", "cleanup-stale",
                                 "--prefix", name], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert process.wait(15) == -signal.SIGTERM
        assert f"loop device: {disk.device}" in result.stdout
        assert_nothing_left(workdir)
    finally:
        process.kill()
        process.wait()
        take_down(workdir)


def test_names_that_are_not_one_path_component_are_refused():
    with pytest.raises(Exception, match="must be letters"):
        default_workdir("../etc")
    assert default_workdir("a.b").startswith(tempfile.gettempdir())


def test_an_ext4_mount_option_that_is_not_plain_is_refused_before_anything_is_made(tmp_path):
    workdir = tmp_path / "cluster"
    with pytest.raises(InvalidArgument, match="ext4 mount option 'nodelalloc,ro'"):
        HdfsCluster("opts", workdir=str(workdir), ext4_options=("nodelalloc,ro",))
    assert not workdir.exists()


@needs_java
@needs_hadoop
def test_the_client_tool_compiles_into_the_cache():
    runtime = HadoopRuntime.of()
    assert os.path.exists(os.path.join(runtime.tool_dir(), "VnodeSyncHdfsStream.class"))


def test_a_daemon_that_died_is_reported_with_the_last_error_of_its_log(tmp_path):
    log = tmp_path / "datanode.log"
    log.write_text("INFO starting\nERROR DataNode: Exception in secureMain\njava.net.BindException: in use\n"
                   "INFO SHUTDOWN_MSG\n")
    assert _last_error(str(log)) == "java.net.BindException: in use"
    assert _last_error(str(tmp_path / "missing.log")) == "(no log)"


@needs_java
@needs_hadoop
@pytest.mark.skipif(not has_native(), reason="needs libhadoop.so (deploy/hadoop/native.txt); run scripts/setup.d/hdfs.sh")
def test_short_circuit_reads_get_the_block_files_through_the_domain_socket_and_it_goes_with_the_cluster():
    with HdfsCluster(unique_name("hdfs-scr"), datanodes=1, disk_mb=256, short_circuit=True) as cluster:
        cluster.write_file("/alice/a.bin", 8 * MiB, as_uid=ALICE_UID)
        cluster.read_file("/alice/a.bin", as_uid=BOB_UID)
        with open(cluster.datanodes[0].log) as f:
            granted = [line for line in f if "op: REQUEST_SHORT_CIRCUIT_FDS" in line and "success: true" in line]
        assert granted
        sockets = cluster.domain_socket_dir
        assert os.listdir(sockets) == [f"dn.{cluster.datanodes[0].ports.data}"]
    assert not os.path.exists(sockets)


@needs_java
@needs_hadoop
def test_a_decommissioned_datanodes_blocks_are_copied_to_the_others():
    with HdfsCluster(unique_name("hdfs-decom"), datanodes=3, replication=2, disk_mb=256) as cluster:
        leaving = cluster.datanodes[2]
        cluster.write_file("/alice/a.bin", 8 * MiB, as_uid=ALICE_UID, on_datanode=leaving)
        assert cluster.admin_states() == {dn.id: "In Service" for dn in cluster.datanodes}
        cluster.decommission([leaving])
        deadline = time.monotonic() + 60
        while cluster.admin_states()[leaving.id] != "Decommissioned":
            assert time.monotonic() < deadline, cluster.admin_states()
            time.sleep(0.5)
        holders = cluster.block_datanodes("/alice/a.bin")[0]
        assert {dn.id for dn in holders if dn is not leaving} == {"dn0", "dn1"}, holders
