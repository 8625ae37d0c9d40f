"""The real commands: the coordinator refuses plaintext unless told, an agent and vnodectl speak mutual TLS."""

import json
import os
import subprocess
import sys
import time

import grpc
import pytest
import yaml

from tests.conftest import COORDINATOR_CONFIG, needs_kernel, unique_name
from tests.security.conftest import unchecked_channel
from testbed.processes import start_coordinator, stop_process
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc

PY = sys.executable


def write(path, content: dict) -> str:
    path.write_text(yaml.safe_dump(content))
    return str(path)


def coordinator_config(tmp_path, **security) -> dict:
    return {**COORDINATOR_CONFIG, "listen": "127.0.0.1:0", "state_path": str(tmp_path / "state.sqlite"), **security}


def test_a_coordinator_config_without_tls_or_insecure_is_refused_in_one_line(tmp_path):
    result = subprocess.run([PY, "-m", "vnode_sync.coordinator.main", "--config",
                             write(tmp_path / "c.yaml", coordinator_config(tmp_path))],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert "refuses to serve plaintext" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "state.sqlite").exists()


def test_an_insecure_coordinator_warns_on_every_start(tmp_path):
    config = write(tmp_path / "c.yaml", coordinator_config(tmp_path, insecure=True))
    for _ in range(2):
        process, _ = start_coordinator(config, tmp_path / "coordinator.log")
        stop_process(process)
        assert "WARNING" in (log := (tmp_path / "coordinator.log").read_text()) and "no authentication" in log


def test_an_agent_refuses_plaintext_to_a_coordinator_off_this_host(tmp_path):
    result = subprocess.run([PY, "-m", "vnode_sync.agents.main", "--config", write(tmp_path / "a.yaml", {
        "node_id": "dn1", "coordinator": "192.0.2.10:7070", "cgroup_name": unique_name("plain")})],
        capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and "refusing plaintext to coordinator 192.0.2.10:7070" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@needs_kernel
def test_an_agent_and_vnodectl_over_mutual_tls(tmp_path, pki):
    audit_log = tmp_path / "audit.log"
    tls = {"ca": pki.ca, "cert": pki.files("coordinator").cert, "key": pki.files("coordinator").key}
    config = write(tmp_path / "c.yaml", coordinator_config(tmp_path, tls=tls, audit_log=str(audit_log)))
    coordinator, port = start_coordinator(config, tmp_path / "coordinator.log")
    node = pki.files("node", "dn1")
    agent_config = write(tmp_path / "a.yaml", {
        "node_id": "dn1", "coordinator": f"localhost:{port}", "cgroup_name": unique_name("mtls"),
        "teardown_on_exit": True, "tls": {"ca": pki.ca, "cert": node.cert, "key": node.key}})
    agent = subprocess.Popen([PY, "-m", "vnode_sync.agents.main", "--config", agent_config],
                             stderr=open(tmp_path / "agent.log", "wb"))

    def vnodectl(role, name, *args, env=None):
        files = pki.files(role, name)
        return subprocess.run([PY, "-m", "vnode_sync.ctl.main", "--coordinator", f"127.0.0.1:{port}",
                               "--ca", pki.ca, "--cert", files.cert, "--key", files.key, *args],
                              capture_output=True, text=True, timeout=30, env=env)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            status = json.loads(vnodectl("admin", "root", "status", "--json").stdout)
            if status["nodes"][0]["connected"] and status["nodes"][0]["applied_generation"]:
                break
            time.sleep(0.2)
        assert status["nodes"][0]["connected"], (tmp_path / "agent.log").read_text()

        assert vnodectl("user", "bob", "set-priority", "bob", "2").stdout.strip() == "bob: priority 2, active"
        raised = vnodectl("user", "bob", "set-priority", "bob", "50")
        assert raised.returncode == 5 and len(raised.stderr.strip().splitlines()) == 1
        assert "may only lower their priority: 2 -> 50 is a raise" in raised.stderr
        own = json.loads(vnodectl("user", "bob", "status", "--json").stdout)
        assert [(u["name"], u["priority"]) for u in own["users"]] == [("bob", 2)]

        expired = vnodectl("admin", "expired", "set-priority", "alice", "50")
        assert expired.returncode == 2 and "admin-expired.crt' expired on" in expired.stderr
        _call_with_an_expired_certificate(port, pki)
        plaintext = subprocess.run([PY, "-m", "vnode_sync.ctl.main", "--coordinator", f"127.0.0.1:{port}",
                                    "set-priority", "alice", "50"], capture_output=True, text=True, timeout=30)
        assert plaintext.returncode == 4
        env = dict(os.environ, VNODE_CA=pki.ca, VNODE_CERT=pki.files("admin", "root").cert,
                   VNODE_KEY=pki.files("admin", "root").key, VNODE_COORDINATOR=f"localhost:{port}")
        by_env = subprocess.run([PY, "-m", "vnode_sync.ctl.main", "users", "--json"], capture_output=True,
                                text=True, timeout=30, env=env)
        assert {u["name"]: u["priority"] for u in json.loads(by_env.stdout)["users"]} == {"alice": 4, "bob": 2}
    finally:
        stop_process(agent)
        stop_process(coordinator)
    assert "certificate has expired" in (tmp_path / "coordinator.log").read_text(), "the coordinator says why"
    audit = audit_log.read_text()
    assert "actor=user:bob@ipv4:127.0.0.1:" in audit and "action=set-priority user=bob old=8 new=2" in audit
    assert "action=SetPriority refused" in audit
    assert "WARNING" not in (tmp_path / "agent.log").read_text()


def _call_with_an_expired_certificate(port, pki) -> None:
    """What vnodectl would refuse to send: the coordinator itself must refuse it too."""
    with unchecked_channel(f"127.0.0.1:{port}", pki.ca, pki.files("admin", "expired")) as channel:
        with pytest.raises(grpc.RpcError) as e:
            pb_grpc.AdminStub(channel).SetPriority(pb.SetPriorityRequest(user="alice", priority=50), timeout=5)
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE
