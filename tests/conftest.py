"""Shared fixtures: unique names for what tests create, and skips that say why."""

import contextlib
import os
import shutil

import grpc
import pytest

from vnode_sync.coordinator.cluster import Cluster
from vnode_sync.coordinator.config import parse_config
from vnode_sync.coordinator.server import create_server
from testbed.names import TEST_PREFIX, unique_name  # noqa: F401 (re-exported for tests)
from vnode_sync.coordinator.store import StateStore
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


@pytest.fixture
def run_name() -> str:
    return unique_name()


COORDINATOR_CONFIG = {
    "users": [{"name": "alice", "uid": 1001, "priority": 4, "active": True},
              {"name": "bob", "uid": 1002, "priority": 8, "active": True}],
    "storage_nodes": [{"id": "dn1", "devices": [{"name": "/dev/loop7", "read_bps": 60_000_000,
                                                 "write_bps": 30_000_000}]}],
}


@contextlib.contextmanager
def served_coordinator(raw_config: dict, state_dir):
    """A coordinator from `raw_config` served on a real loopback port; yields (cluster, channel, port)."""
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
