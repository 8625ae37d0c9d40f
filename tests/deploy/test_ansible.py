"""deploy/ansible against this host (connection local): a coordinator and a storage agent come up with
their metrics endpoints, the monitoring role runs a Prometheus that scrapes both through mutual TLS
with a monitor: certificate, a second run changes nothing, and vnodectl status works through mutual TLS.
The coordinator runs as its own system account, which cannot read the CA's key; a state file left
where a root-run coordinator kept it is moved into the account's directory by the next run.

Everything goes under a temp dir (venv, configs, CA, state, logs, pid files) with unique
service and account names, so the host's own /etc and /opt are not touched; the test stops and
removes what it made.
"""

import json
import os
import pathlib
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request

import pytest
import yaml

from tests.conftest import REPO, needs_kernel, unique_name, wheelhouse
from vnode_sync.distribution import version
from vnode_sync.kernel.backend import HostCgroups
from testbed.ports import free_port

ANSIBLE_DIR = os.path.join(REPO, "deploy", "ansible")
WHY_NO_ANSIBLE = None if shutil.which("ansible-playbook") else \
    "needs ansible-playbook (scripts/setup.d/deploy.sh installs Debian's ansible-core)"

# A mark, not a skip in the fixture: the session's wheel is not built for a test that cannot run.
pytestmark = [pytest.mark.slow, needs_kernel,
              pytest.mark.skipif(WHY_NO_ANSIBLE is not None, reason=WHY_NO_ANSIBLE or "")]


def systemd_is_pid1() -> bool:
    with open("/proc/1/comm") as f:
        return f.read().strip() == "systemd"


def recap(output: str) -> dict[str, int]:
    line = next(line for line in output.splitlines() if line.startswith("localhost") and "ok=" in line)
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}


@pytest.fixture
def site(product_wheel):
    name = unique_name("ansible")
    node_id = f"dn-{name.rsplit('.', 1)[1]}"
    account = f"vnsync-{name.rsplit('.', 1)[1]}"
    # The coordinator's account reaches the venv, its config and its state under this root, as it does
    # /opt, /etc and /var on a host: not pytest's root-only tmp_path.
    tmp_path = pathlib.Path(tempfile.mkdtemp(prefix=f"{name}."))
    os.chmod(tmp_path, 0o755)
    port, coordinator_metrics, agent_metrics, prometheus = free_port(), free_port(), free_port(), free_port()
    # Prometheus runs as the prometheus user: its files may not sit in the test's root-only tmp_path.
    monitoring = tempfile.mkdtemp(prefix=f"{name}.monitoring.")
    os.chmod(monitoring, 0o755)
    settings = {
        # The built wheel and, with no index, its dependencies from setup's wheelhouse, as a site without
        # an index installs: not ~90 MB from PyPI and a build from source on every run.
        "vnode_common_source": product_wheel, "vnode_common_wheelhouse": wheelhouse() or "",
        "vnode_common_venv": str(tmp_path / "venv"), "vnode_common_config_dir": str(tmp_path / "etc"),
        "vnode_common_pki_dir": str(tmp_path / "etc" / "pki"), "vnode_common_state_dir": str(tmp_path / "state"),
        "vnode_common_log_dir": str(tmp_path / "log"), "vnode_common_run_dir": str(tmp_path / "run"),
        "vnode_common_ca_dir": str(tmp_path / "ca"), "vnode_common_coordinator_port": port,
        "vnode_common_bin_dir": str(tmp_path / "bin"), "vnode_coordinator_user": account,
        # The system's Python, as on a host: the account cannot run a venv made from root's own (under /root).
        "vnode_common_python": "/usr/bin/python3",
        # python3-venv is here (setup), and apt took 3 s a run (12 s on a loaded host) to say so; its names
        # are checked by tests/deploy/test_redhat_family.py (test_install_from_dist.py leaves it out too).
        "vnode_common_apt_packages": [],
        "vnode_coordinator_service": f"vnode-coordinator-{node_id}",
        "vnode_coordinator_listen": f"127.0.0.1:{port}", "vnode_coordinator_cert_hosts": ["127.0.0.1", "localhost"],
        "vnode_coordinator_users": [{"name": "alice", "uid": 1001, "priority": 4, "active": True}],
        "vnode_coordinator_storage_nodes": [{"id": node_id, "devices": [
            {"name": "/dev/vnode-sync-test-none", "read_bps": 60_000_000, "write_bps": 30_000_000}]}],
        "vnode_storage_agent_service": f"vnode-storage-agent-{node_id}", "vnode_storage_agent_node_id": node_id,
        "vnode_storage_agent_cgroup_name": name, "vnode_storage_agent_teardown_on_exit": True,
        "vnode_storage_agent_udev_rule": str(tmp_path / "etc" / "61-vnode-sync-data-disks.rules"),
        "vnode_coordinator_metrics": True, "vnode_coordinator_metrics_listen": f"127.0.0.1:{coordinator_metrics}",
        "vnode_storage_agent_metrics": True, "vnode_storage_agent_metrics_listen": f"127.0.0.1:{agent_metrics}",
        "vnode_storage_agent_metrics_cert_hosts": ["127.0.0.1"],
        "vnode_monitoring_enabled": True, "vnode_monitoring_service": f"vnode-prometheus-{node_id}",
        "vnode_monitoring_dir": f"{monitoring}/etc", "vnode_monitoring_storage_dir": f"{monitoring}/data",
        "vnode_monitoring_listen": f"127.0.0.1:{prometheus}", "vnode_monitoring_scrape_interval": "1s",
        "vnode_monitoring_coordinator_targets": [f"127.0.0.1:{coordinator_metrics}"],
        "vnode_monitoring_agent_targets": [f"127.0.0.1:{agent_metrics}"],
    }
    (tmp_path / "bin").mkdir()
    local = {"hosts": {"localhost": {"ansible_connection": "local", "ansible_python_interpreter": "/usr/bin/python3"}}}
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"vars": settings, "children": {
        "vnode_coordinator": local, "vnode_storage": local, "vnode_compute": {"hosts": {}},
        "vnode_monitoring": local}}}))
    try:
        yield tmp_path, inventory, settings
    finally:
        _stop_services(tmp_path, settings)
        shutil.rmtree(monitoring, ignore_errors=True)
        shutil.rmtree(tmp_path, ignore_errors=True)
        subprocess.run(["userdel", account], capture_output=True)
        subprocess.run(["groupdel", account], capture_output=True)
        assert not os.path.exists(os.path.join(HostCgroups().blkio_v1, name)), "the agent tore its VNodes down"


def _stop_services(tmp_path, settings) -> None:
    for service in (settings["vnode_monitoring_service"], settings["vnode_storage_agent_service"],
                    settings["vnode_coordinator_service"]):
        _stop(tmp_path, service)
        if systemd_is_pid1():
            subprocess.run(["systemctl", "disable", service], capture_output=True)
            unit = f"/etc/systemd/system/{service}.service"
            if os.path.exists(unit):
                os.unlink(unit)
                subprocess.run(["systemctl", "daemon-reload"], capture_output=True)


def _stop(tmp_path, service: str) -> None:
    if systemd_is_pid1():
        subprocess.run(["systemctl", "stop", service], capture_output=True)
    supervise = tmp_path / "venv" / "bin" / "vnode-supervise"
    if supervise.exists():
        subprocess.run([str(supervise), "stop", "--pidfile", str(tmp_path / "run" / f"{service}.pid")],
                       capture_output=True, timeout=60)


def _state_left_by_root(tmp_path, path, settings, user: dict) -> None:
    """A store of the site's users and nodes, and `user` besides, made by root where root kept it."""
    config = tmp_path / "root-era-coordinator.yaml"
    config.write_text(yaml.safe_dump({"listen": "127.0.0.1:1", "insecure": True, "state_path": str(path),
                                      "users": settings["vnode_coordinator_users"] + [user],
                                      "storage_nodes": settings["vnode_coordinator_storage_nodes"]}))
    os.makedirs(path.parent, exist_ok=True)
    made = subprocess.run([sys.executable, "-m", "vnode_sync.coordinator.main", "--config", str(config), "init"],
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0 and path.exists(), made.stderr
    config.unlink()


def _processes() -> list[tuple[int, list[str]]]:
    """(uid, argv) of every process."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
            found.append((os.stat(f"/proc/{pid}").st_uid, argv))
        except OSError:
            continue
    return found


def playbook(inventory) -> subprocess.CompletedProcess:
    # Gathering smart: this one host is in all four plays; its facts are gathered in the first, not four times.
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="false", LC_ALL="C.UTF-8",
               ANSIBLE_RETRY_FILES_ENABLED="false", PYTHONDONTWRITEBYTECODE="1", ANSIBLE_GATHERING="smart")
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(["ansible-playbook", "-i", str(inventory), os.path.join(ANSIBLE_DIR, "site.yml")],
                          capture_output=True, text=True, timeout=900, env=env, cwd=ANSIBLE_DIR)


def test_site_playbook_brings_up_a_coordinator_and_a_storage_agent_and_a_rerun_changes_nothing(site):
    tmp_path, inventory, settings = site
    # The state a coordinator run as root left beside the CA (releases before its own account), holding
    # bob, whom the role's users do not seed: the run moves it into the account's directory.
    before = tmp_path / "state" / "coordinator.sqlite"
    _state_left_by_root(tmp_path, before, settings, {"name": "bob", "uid": 1002, "priority": 2, "active": False})
    first = playbook(inventory)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    assert recap(first.stdout)["failed"] == 0

    second = playbook(inventory)
    assert second.returncode == 0, second.stdout[-4000:] + second.stderr[-2000:]
    assert recap(second.stdout)["changed"] == 0, second.stdout[-4000:]
    if not systemd_is_pid1():   # vnode-supervise logs every start of a service
        for service in (settings["vnode_coordinator_service"], settings["vnode_storage_agent_service"],
                        settings["vnode_monitoring_service"]):
            log = (tmp_path / "log" / f"{service}.log").read_text()
            assert log.count(f"{service} started (pid") == 1, f"{service} started more than once:\n{log[-3000:]}"

    for key in ("ca/ca.key", "ca/coordinator.key", "ca/issued/admin-root.key",
                f"etc/pki/node-{settings['vnode_storage_agent_node_id']}.key"):
        assert oct(os.stat(tmp_path / key).st_mode & 0o777) == "0o600", key

    # vnodectl on PATH (here the test's bin dir): a link into the virtualenv, which the coordinator role
    # (this host is also the coordinator) installed with the coordinator's extra.
    vnodectl = tmp_path / "bin" / "vnodectl"
    assert os.readlink(vnodectl) == str(tmp_path / "venv" / "bin" / "vnodectl")
    shown = subprocess.run([str(vnodectl), "--version"], capture_output=True, text=True, timeout=30)
    assert shown.returncode == 0 and shown.stdout.strip() == f"vnodectl {version()}"
    extra = subprocess.run([str(tmp_path / "venv" / "bin" / "python"), "-m", "vnode_sync.distribution", "coordinator"],
                           capture_output=True, text=True, timeout=30)
    assert extra.returncode == 0, extra.stderr

    pki = tmp_path / "ca"
    status = subprocess.run([sys.executable, "-m", "vnode_sync.ctl.main", "--coordinator",
                             f"127.0.0.1:{settings['vnode_common_coordinator_port']}", "--ca", str(pki / "ca.crt"),
                             "--cert", str(pki / "issued" / "admin-root.crt"),
                             "--key", str(pki / "issued" / "admin-root.key"), "status", "--json"],
                            capture_output=True, text=True, timeout=30)
    assert status.returncode == 0, status.stderr
    nodes = json.loads(status.stdout)["nodes"]
    assert [(n["node_id"], n["connected"]) for n in nodes] == [(settings["vnode_storage_agent_node_id"], True)]

    # The monitoring role's Prometheus scraped both endpoints through mutual TLS (its verify step waited
    # for that); the coordinator's series are stored.
    url = f"http://{settings['vnode_monitoring_listen']}/api/v1/query?query=vnode_sync_coordinator_agents_connected"
    answer = json.load(urllib.request.urlopen(url, timeout=10))
    assert [float(r["value"][1]) for r in answer["data"]["result"]] == [1.0]

    # The coordinator runs as its own account, with its state and logs its own, and cannot read the CA key.
    account = pwd.getpwnam(settings["vnode_coordinator_user"])
    config = settings["vnode_common_config_dir"] + "/coordinator.yaml"
    assert {uid for uid, argv in _processes() if argv[1:2] and argv[1].endswith("/vnode-coordinator")
            and config in argv} \
        == {account.pw_uid}
    state = tmp_path / "state" / "coordinator" / "coordinator.sqlite"
    assert os.stat(state).st_uid == account.pw_uid and os.stat(tmp_path / "log" / "coordinator" / "audit.log").st_uid \
        == account.pw_uid
    ca = os.stat(tmp_path / "ca")
    assert ca.st_uid == 0 and ca.st_mode & 0o077 == 0, "the CA's directory is root's alone"
    assert not before.exists()
    users = subprocess.run([sys.executable, "-m", "vnode_sync.ctl.main", "--config",
                            settings["vnode_common_config_dir"] + "/vnodectl.yaml", "users", "--json"],
                           capture_output=True, text=True, timeout=30)
    assert users.returncode == 0 and {u["name"] for u in json.loads(users.stdout)["users"]} == {"alice", "bob"}, \
        users.stdout + users.stderr

    plaintext = subprocess.run([sys.executable, "-m", "vnode_sync.ctl.main", "--coordinator",
                                f"127.0.0.1:{settings['vnode_common_coordinator_port']}", "status"],
                               capture_output=True, text=True, timeout=30)
    assert plaintext.returncode == 4, "the deployed coordinator refuses plaintext"
