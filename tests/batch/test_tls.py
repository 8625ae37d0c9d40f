"""Hooks speak mutual TLS to a real coordinator as compute:<node>, and may report only their own node."""

import subprocess

import pytest

from tests.batch.conftest import write_batch_config
from tests.conftest import COORDINATOR_CONFIG
from vnode_sync.batch.cli import SLURM_WRAPPERS, install_hooks
from vnode_sync.coordinator.cluster import Cluster
from vnode_sync.coordinator.config import parse_config
from vnode_sync.coordinator.api.server import create_server
from vnode_sync.coordinator.state.store import StateStore
from vnode_sync.security import certs
from vnode_sync.security.tls import TlsFiles, server_credentials

JOB_ENV = {"SLURM_JOB_ID": "42", "SLURM_JOB_USER": "nobody", "SLURM_JOB_UID": "65534", "SLURMD_NODENAME": "cn1"}


@pytest.fixture
def tls_coordinator(tmp_path):
    ca_dir = str(tmp_path / "ca")
    ca = certs.create_ca(ca_dir)
    served = certs.issue(ca_dir, "coordinator")
    compute = certs.issue(ca_dir, "compute", "cn1")
    config = parse_config(dict(COORDINATOR_CONFIG))
    cluster = Cluster(config, StateStore(str(tmp_path / "state.sqlite"), seed_users=config.users))
    server, port = create_server(cluster, "127.0.0.1:0",
                                 credentials=server_credentials(TlsFiles(ca=ca.cert, cert=served.cert, key=served.key)))
    server.start()
    yield cluster, f"127.0.0.1:{port}", {"ca": ca.cert, "cert": compute.cert, "key": compute.key}
    server.stop(0)


def run_prolog(tmp_path, env) -> subprocess.CompletedProcess:
    return subprocess.run([str(tmp_path / "hooks" / "slurm-prolog")], env=env, capture_output=True, text=True,
                          timeout=30)


def test_prolog_reports_its_own_node_over_mutual_tls(tmp_path, tls_coordinator):
    cluster, address, tls = tls_coordinator
    install_hooks(str(tmp_path / "hooks"), SLURM_WRAPPERS, write_batch_config(
        tmp_path / "batch.yaml", address, tmp_path, node="", tls=tls))
    result = run_prolog(tmp_path, JOB_ENV)
    assert result.returncode == 0, result.stderr
    assert "job 42 of user nobody on cn1 started" in result.stderr
    assert cluster.store.user("nobody").active


def test_another_nodes_job_is_refused_and_the_job_still_runs(tmp_path, tls_coordinator):
    cluster, address, tls = tls_coordinator
    install_hooks(str(tmp_path / "hooks"), SLURM_WRAPPERS, write_batch_config(
        tmp_path / "batch.yaml", address, tmp_path, node="", tls=tls))
    result = run_prolog(tmp_path, {**JOB_ENV, "SLURMD_NODENAME": "cn2"})
    assert result.returncode == 0
    assert "refused start of job 42 of user nobody on cn2: PERMISSION_DENIED" in result.stderr, result.stderr
