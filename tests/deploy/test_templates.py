"""The Ansible roles' config templates, rendered by Ansible with the roles' defaults (and the
example inventory's choices), are files the one config loader accepts, with TLS and insecure."""

import os
import shutil
import subprocess

import pytest
import yaml

from tests.conftest import REPO
from vnode_sync.agents.config import load_agent_config
from vnode_sync.coordinator.config import load_config
from vnode_sync.ctl.settings import load_ctl_settings

ROLES = os.path.join(REPO, "deploy", "ansible", "roles")
WHY_NO_ANSIBLE = None if shutil.which("ansible-playbook") else \
    "needs ansible-playbook (scripts/setup.d/deploy.sh installs Debian's ansible-core)"
TEMPLATES = {
    "coordinator.yaml": ("vnode_coordinator", "coordinator.yaml.j2", load_config),
    "vnodectl.yaml": ("vnode_coordinator", "vnodectl.yaml.j2", load_ctl_settings),
    "storage-agent.yaml": ("vnode_storage_agent", "storage-agent.yaml.j2", load_agent_config),
    "compute-agent.yaml": ("vnode_compute_agent", "compute-agent.yaml.j2", load_agent_config),
}
EXAMPLE_SITE = {
    "vnode_coordinator_users": [{"name": "alice", "uid": 1001, "priority": 4, "active": False}],
    "vnode_coordinator_storage_nodes": [{"id": "dn1", "devices": [{"name": "/dev/sdb", "read_bps": 200_000_000,
                                                                   "write_bps": 150_000_000}]}],
    "vnode_storage_agent_devices": ["/dev/sdb"], "vnode_storage_agent_discovery": {"kind": "hdfs"},
    "vnode_storage_agent_metrics": True, "vnode_storage_agent_metrics_top_users": 7,
    "vnode_storage_agent_disk_queue": ["read_ahead_kb=512", "max_sectors_kb=256", "nr_requests=4"],
    "vnode_storage_agent_nodelalloc": True,
}


@pytest.mark.skipif(WHY_NO_ANSIBLE is not None, reason=WHY_NO_ANSIBLE or "")
@pytest.mark.parametrize("insecure", [False, True])
def test_every_rendered_config_loads(tmp_path, insecure):
    defaults = [os.path.join(ROLES, role, "defaults", "main.yml")
                for role in ("vnode_common", "vnode_coordinator", "vnode_storage_agent", "vnode_compute_agent")]
    play = [{"hosts": "localhost", "connection": "local", "gather_facts": False,
             "vars_files": defaults,
             "tasks": [{"name": f"render {out}", "ansible.builtin.template": {
                 "src": os.path.join(ROLES, role, "templates", template), "dest": str(tmp_path / out)}}
                 for out, (role, template, _) in TEMPLATES.items()]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    site = {**EXAMPLE_SITE, "vnode_common_insecure": insecure, "vnode_common_coordinator_host": "localhost"}
    (tmp_path / "site.yml").write_text(yaml.safe_dump(site))   # extra vars: above the roles' defaults
    result = subprocess.run(["ansible-playbook", "-i", "localhost,", "-e", f"@{tmp_path / 'site.yml'}",
                             str(tmp_path / "play.yml")], capture_output=True,
                            text=True, timeout=120, env={**os.environ, "ANSIBLE_NOCOLOR": "1"})
    assert result.returncode == 0, result.stdout[-2000:]
    for out, (_, _, load) in TEMPLATES.items():
        settings = load(str(tmp_path / out))
        assert settings.security.insecure is insecure and (settings.security.tls is None) is insecure
    assert load_agent_config(str(tmp_path / "compute-agent.yaml")).compute.endpoints == ((None, 9866),)
    assert load_agent_config(str(tmp_path / "storage-agent.yaml")).discovery.kind == "hdfs"
    assert load_agent_config(str(tmp_path / "storage-agent.yaml")).metrics.top_users == 7
    # The disk queue the role sets, and nodelalloc the site mounts with, are what the agent checks.
    assert load_agent_config(str(tmp_path / "storage-agent.yaml")).required_disk_settings == (
        "read_ahead_kb=512", "max_sectors_kb=256", "nr_requests=4", "mount_option=nodelalloc")


@pytest.mark.skipif(WHY_NO_ANSIBLE is not None, reason=WHY_NO_ANSIBLE or "")
def test_two_coordinators_on_zookeeper_render_a_zookeeper_section_and_every_client_gets_both_addresses(tmp_path):
    """docs/ha.md: with vnode_coordinator_zookeeper_hosts set, each coordinator's config has the
    zookeeper section (TLS, digest identity); vnodectl and agents are given every coordinator."""
    defaults = [os.path.join(ROLES, role, "defaults", "main.yml")
                for role in ("vnode_common", "vnode_coordinator", "vnode_storage_agent", "vnode_compute_agent")]
    play = [{"hosts": "c1.example.org", "connection": "local", "gather_facts": False, "vars_files": defaults,
             "tasks": [{"name": f"render {out}", "ansible.builtin.template": {
                 "src": os.path.join(ROLES, role, "templates", template), "dest": str(tmp_path / out)}}
                 for out, (role, template, _) in TEMPLATES.items()]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    inventory = {"all": {"children": {"vnode_coordinator": {"hosts": {
        "c1.example.org": {"ansible_host": "10.0.0.1"}, "c2.example.org": {"ansible_host": "10.0.0.2"}}}}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    site = {**EXAMPLE_SITE, "vnode_common_insecure": False,
            "vnode_coordinator_zookeeper_hosts": "zk1:2281,zk2:2281,zk3:2281",
            "vnode_coordinator_zookeeper_tls_ca": "/etc/vnode-sync/pki/zk-ca.crt",
            "vnode_coordinator_zookeeper_tls_cert": "/etc/vnode-sync/pki/zk-client.crt",
            "vnode_coordinator_zookeeper_tls_key": "/etc/vnode-sync/pki/zk-client.key",
            "vnode_coordinator_zookeeper_digest_user": "vnode-sync", "vnode_coordinator_zookeeper_digest_password": "x"}
    (tmp_path / "site.yml").write_text(yaml.safe_dump(site))
    result = subprocess.run(["ansible-playbook", "-i", str(tmp_path / "inventory.yml"), "-e", f"@{tmp_path / 'site.yml'}",
                             str(tmp_path / "play.yml")], capture_output=True,
                            text=True, timeout=120, env={**os.environ, "ANSIBLE_NOCOLOR": "1"})
    assert result.returncode == 0, result.stdout[-2000:]
    zookeeper = load_config(str(tmp_path / "coordinator.yaml")).zookeeper
    assert (zookeeper.hosts, zookeeper.advertise, zookeeper.digest_user) == ("zk1:2281,zk2:2281,zk3:2281",
                                                                             "10.0.0.1:7070", "vnode-sync")
    assert zookeeper.tls.ca == "/etc/vnode-sync/pki/zk-ca.crt"
    both = "10.0.0.1:7070,10.0.0.2:7070"
    assert load_ctl_settings(str(tmp_path / "vnodectl.yaml")).coordinator == both
    assert load_agent_config(str(tmp_path / "storage-agent.yaml")).coordinator == both
    assert load_agent_config(str(tmp_path / "compute-agent.yaml")).coordinator == both


def _vnode_common_extras(role: str) -> list:
    with open(os.path.join(ROLES, role, "meta", "main.yml")) as f:
        (common,) = [d for d in yaml.safe_load(f)["dependencies"] if d["role"] == "vnode_common"]
    return common.get("vars", {}).get("vnode_common_extras", [])


def test_only_the_coordinator_role_installs_the_coordinator_extra():
    """numpy, numba and kazoo (~250 MB) on the coordinator host only: a storage node imports none of them."""
    assert _vnode_common_extras("vnode_coordinator") == ["coordinator"]
    assert _vnode_common_extras("vnode_storage_agent") == _vnode_common_extras("vnode_compute_agent") == []


@pytest.mark.skipif(WHY_NO_ANSIBLE is not None, reason=WHY_NO_ANSIBLE or "")
def test_the_coordinators_unit_runs_it_as_its_own_account_with_a_raised_open_file_limit_and_the_agents_units_leave_both(
        tmp_path):
    defaults = [os.path.join(ROLES, role, "defaults", "main.yml") for role in ("vnode_common", "vnode_coordinator")]
    units = {"coordinator": {"vnode_common_service_delegate": False,
                             "vnode_common_service_open_files": "{{ vnode_coordinator_open_files }}",
                             "vnode_common_service_open_files_why": "a socket per agent",
                             "vnode_common_service_user": "{{ vnode_coordinator_user }}",
                             "vnode_common_service_writable": ["{{ vnode_coordinator_state_dir }}"],
                             "vnode_common_service_environment": ["NUMBA_CACHE_DIR=/n"]},
             "storage-agent": {"vnode_common_service_delegate": True}}
    play = [{"hosts": "localhost", "connection": "local", "gather_facts": False, "vars_files": defaults,
             "vars": {"vnode_common_service_description": "d", "vnode_common_service_command": ["/bin/true"]},
             "tasks": [{"name": f"render {name}", "vars": params, "ansible.builtin.template": {
                 "src": os.path.join(ROLES, "vnode_common", "templates", "vnode.service.j2"),
                 "dest": str(tmp_path / f"{name}.service")}} for name, params in units.items()]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    result = subprocess.run(["ansible-playbook", "-i", "localhost,", "-e", "vnode_common_coordinator_host=localhost",
                             str(tmp_path / "play.yml")], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "ANSIBLE_NOCOLOR": "1"})
    assert result.returncode == 0, result.stdout[-2000:]
    coordinator = (tmp_path / "coordinator.service").read_text()
    assert "\nLimitNOFILE=65536\n" in coordinator and "# Open files (sockets, mostly): a socket per agent" in coordinator
    # The coordinator as its own account (the agents stay root: they write cgroups and kernel settings).
    assert "\nUser=vnode-sync\nGroup=vnode-sync\n" in coordinator and "\nEnvironment=NUMBA_CACHE_DIR=/n\n" in coordinator
    assert "\nReadWritePaths=/var/lib/vnode-sync/coordinator\n" in coordinator
    agent = (tmp_path / "storage-agent.service").read_text()
    assert "LimitNOFILE" not in agent and "User=" not in agent
    with open(os.path.join(REPO, "deploy", "systemd", "vnode-coordinator.service")) as f:
        unit = f.read()
    assert "\nLimitNOFILE=65536\n" in unit and "\nUser=vnode-sync\n" in unit
    assert "\nStateDirectory=vnode-sync/coordinator\n" in unit
