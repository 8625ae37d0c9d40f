"""Shared fixtures: unique names for what tests create, and skips that say why."""

import contextlib
import os
import shutil
import subprocess
import sys
import zipfile

import pytest
import yaml

from testbed.loopdev import loop_device, why_no_bfq
from testbed.names import TEST_PREFIX, unique_name  # noqa: F401 (re-exported for tests)
from vnode_sync.kernel import disk_queue
from vnode_sync.kernel.backend import HostCgroups


def _why_no_kernel() -> str | None:
    if os.geteuid() != 0:
        return "needs root to create cgroups and loop devices"
    if not HostCgroups().has_blkio_v1():
        return "needs cgroup v1 blkio mounted at /sys/fs/cgroup/blkio"
    if not shutil.which("losetup"):
        return "needs losetup (util-linux) for loop devices"
    return None


WHY_NO_KERNEL = _why_no_kernel()
needs_kernel = pytest.mark.skipif(WHY_NO_KERNEL is not None, reason=WHY_NO_KERNEL or "")


WHY_NO_FUSE = WHY_NO_KERNEL or (None if os.path.exists("/dev/fuse") else "a paced disk needs FUSE (/dev/fuse)")
needs_fuse = pytest.mark.skipif(WHY_NO_FUSE is not None, reason=WHY_NO_FUSE or "")


def _why_no_java() -> str | None:
    if not shutil.which("java"):
        return "needs a Java runtime (java on PATH) for HDFS"
    return None


WHY_NO_JAVA = _why_no_java()
needs_java = pytest.mark.skipif(WHY_NO_JAVA is not None, reason=WHY_NO_JAVA or "")


def hadoop_lines(but_the_default: bool = False) -> list:
    """pytest params: every supported Hadoop line (deploy/hadoop/lines.txt), each skipped, saying why,
    where setup has not fetched its jars; BUT_THE_DEFAULT: not the testbed's default line (a test that
    checks it on the cluster of another test of the default line)."""
    from testbed.hdfs_cluster import HADOOP_LINES, HADOOP_VERSION, hadoop_home, has_jars
    return [pytest.param(v, id=f"hadoop-{v}", marks=pytest.mark.skipif(
        not has_jars(v), reason=f"needs the Hadoop {v} jars in {hadoop_home(v)}; run scripts/setup.d/hdfs.sh"))
        for v in HADOOP_LINES if not (but_the_default and v == HADOOP_VERSION)]


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="session")
def product_wheel(tmp_path_factory) -> str:
    """vnode-sync's wheel, built once per session (tests/test_layers.py, tests/deploy/test_ansible.py,
    tests/test_distribution.py) as `make dist` builds it: from a clean copy of the checkout."""
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "dist.py"), "--wheel-only", "--out", str(out)],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    return build.stdout.strip()


def stand_in_jar(directory, version: str) -> str:
    """A jar as make dist reads Maven's: only the coordinates Maven writes into it (no Maven run in tests)."""
    jar = os.path.join(directory, f"stand-in-datanode-throttle-{version}.jar")
    with zipfile.ZipFile(jar, "w") as z:
        z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
        z.writestr("META-INF/maven/org.vnode-sync/vnode-sync-datanode-throttle/pom.properties",
                   f"artifactId=vnode-sync-datanode-throttle\ngroupId=org.vnode-sync\nversion={version}\n")
    return jar


def _dist_jar(directory, version: str) -> str:
    """The DataNode agent's jar setup built, where it is current (the role's end-to-end test loads it into a
    DataNode), else a stand-in."""
    from testbed.hdfs_cluster import datanode_throttle_jar
    from vnode_sync.errors import NotFound
    try:
        return datanode_throttle_jar()
    except NotFound:
        return stand_in_jar(directory, version)


@pytest.fixture(scope="session")
def product_dist(tmp_path_factory, product_wheel) -> str:
    """make dist's directory for this checkout (the session's wheel, setup's jar or a stand-in), built once
    per session."""
    out = tmp_path_factory.mktemp("dist")
    version = os.path.basename(product_wheel).split("-")[1]
    build = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "dist.py"), "--out", str(out / "dist"),
                            "--wheel", product_wheel, "--jar", _dist_jar(out, version)],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr
    return str(out / "dist")


def wheelhouse() -> str | None:
    """The product's dependencies as wheels at constraints.txt's versions, which scripts/setup.d/wheelhouse.sh
    keeps beside this venv; None before it has run (pip then fetches them from the index)."""
    path = os.path.join(sys.prefix, "wheelhouse")
    return path if os.path.exists(os.path.join(path, ".built")) else None


@pytest.fixture
def run_name() -> str:
    return unique_name()


COORDINATOR_CONFIG = {
    "users": [{"name": "alice", "uid": 1001, "priority": 4, "active": True},
              {"name": "bob", "uid": 1002, "priority": 8, "active": True}],
    "storage_nodes": [{"id": "dn1", "devices": [{"name": "/dev/loop7", "read_bps": 60_000_000,
                                                 "write_bps": 30_000_000}]}],
}


def write_coordinator_config(tmp_path, listen: str = "127.0.0.1:0", **extra) -> str:
    """COORDINATOR_CONFIG as a file for a coordinator process (plaintext, state in tmp_path)."""
    path = tmp_path / "coordinator.yaml"
    path.write_text(yaml.safe_dump({**COORDINATOR_CONFIG, "listen": listen, "insecure": True,
                                    "state_path": str(tmp_path / "state.sqlite"), **extra}))
    return str(path)


@contextlib.contextmanager
def served_coordinator(raw_config: dict, state_dir):
    """A coordinator from `raw_config` served on a real loopback port; yields (cluster, channel, port)."""
    # Imported here, not above: every test loads this file, and the coordinator's modules take some 15 s
    # to load in the qemu guest (tests/kernel/test_io_v2_guest.py), whose tests use none of them.
    import grpc

    from vnode_sync.coordinator.cluster import Cluster
    from vnode_sync.coordinator.config import parse_config
    from vnode_sync.coordinator.api.server import create_server
    from vnode_sync.coordinator.state.store import StateStore

    config = parse_config(raw_config)
    cluster = Cluster(config, StateStore(str(state_dir / "state.sqlite"), seed_users=config.users))
    server, port = create_server(cluster, "127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield cluster, channel, port
    finally:
        channel.close()
        server.stop(0)


@pytest.fixture
def coordinator(tmp_path):
    """A coordinator served on a real loopback port; yields (cluster, channel, port)."""
    with served_coordinator(dict(COORDINATOR_CONFIG), tmp_path) as served:
        yield served


@pytest.fixture
def bfq_disk():
    """A fresh loop device offering BFQ; its scheduler and request size put back after."""
    if WHY_NO_KERNEL:
        pytest.skip(WHY_NO_KERNEL)
    if why := why_no_bfq():
        pytest.skip(why)
    with loop_device(unique_name("diskq")) as (path, _):
        before = disk_queue.read_settings(path, ["max_sectors_kb"])
        yield path
        disk_queue.apply(path, [disk_queue.QueueSetting("scheduler", "none"), *before])
