"""A small site's PKI made with vnode_sync.security.certs, and a coordinator serving mutual TLS."""

import datetime
import logging
from dataclasses import dataclass

import grpc
import pytest

from tests.conftest import COORDINATOR_CONFIG
from vnode_sync.coordinator.cluster import Cluster
from vnode_sync.coordinator.config import parse_config
from vnode_sync.coordinator.api.server import create_server
from vnode_sync.coordinator.state.store import StateStore
from vnode_sync.security import certs
from vnode_sync.security.tls import TlsFiles, secure_channel, server_credentials


@dataclass(frozen=True)
class Pki:
    directory: str
    ca: str

    def files(self, role: str, name: str = "") -> TlsFiles:
        stem = role if role == "coordinator" else f"{role}-{name}"
        return TlsFiles(ca=self.ca, cert=f"{self.directory}/{stem}.crt", key=f"{self.directory}/{stem}.key")


@pytest.fixture(scope="session")
def pki(tmp_path_factory) -> Pki:
    directory = str(tmp_path_factory.mktemp("pki"))
    ca = certs.create_ca(directory)
    certs.issue(directory, "coordinator", hosts=("127.0.0.1", "localhost"))
    for role, name in (("admin", "root"), ("node", "dn1"), ("node", "dn9"), ("compute", "c1"),
                       ("user", "alice"), ("user", "bob"), ("monitor", "prometheus")):
        certs.issue(directory, role, name)
    long_ago = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=30)
    certs.issue(directory, "admin", "expired", valid_from=long_ago, valid_until=long_ago + datetime.timedelta(days=1))
    return Pki(directory, ca.cert)


@pytest.fixture(scope="session")
def foreign_pki(tmp_path_factory) -> Pki:
    """Another site's CA, with an admin certificate that looks right but chains elsewhere."""
    directory = str(tmp_path_factory.mktemp("foreign-pki"))
    ca = certs.create_ca(directory, common_name="someone else's CA")
    certs.issue(directory, "admin", "root")
    certs.issue(directory, "coordinator", hosts=("127.0.0.1",))
    return Pki(directory, ca.cert)


@dataclass
class TlsCoordinator:
    cluster: Cluster
    port: int
    pki: Pki

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def channel(self, role: str, name: str = "") -> grpc.Channel:
        return secure_channel(self.address, self.pki.files(role, name))

    def snapshot(self) -> tuple[int, dict]:
        return self.cluster.generation(), {u.name: (u.priority, u.active) for u in self.cluster.users()}


@pytest.fixture
def tls_coordinator(tmp_path, pki):
    config = parse_config(dict(COORDINATOR_CONFIG))
    cluster = Cluster(config, StateStore(str(tmp_path / "state.sqlite"), seed_users=config.users))
    server, port = create_server(cluster, "127.0.0.1:0", credentials=server_credentials(pki.files("coordinator")))
    server.start()
    yield TlsCoordinator(cluster, port, pki)
    server.stop(0)


@pytest.fixture
def audit_lines(caplog):
    """The audit log's lines, as the coordinator wrote them during the test."""
    caplog.set_level(logging.INFO, logger="vnode_sync.audit")
    return lambda: [r.getMessage() for r in caplog.records if r.name == "vnode_sync.audit"]


def unchecked_channel(address: str, ca: str, files: TlsFiles | None = None) -> grpc.Channel:
    """A channel trusting `ca`, with the client certificate `files` (or none), sent as it is:
    unlike tls.secure_channel, nothing is checked first, so a bad certificate reaches the server."""
    with open(ca, "rb") as f:
        root = f.read()
    key = cert = None
    if files is not None:
        with open(files.key, "rb") as k, open(files.cert, "rb") as c:
            key, cert = k.read(), c.read()
    return grpc.secure_channel(address, grpc.ssl_channel_credentials(root, key, cert),
                               options=[("grpc.ssl_target_name_override", "coordinator")])
