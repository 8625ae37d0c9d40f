"""The settings an admin sees: listed in docs/settings.md, and only ever fewer.

A new setting in the coordinator's or an agent's file raises its count past the committed number and
fails here: lower a default's reason to exist first, or raise the number on purpose in the same change.
"""

import subprocess
import sys

from tests.conftest import REPO
from vnode_sync.agents.config import AgentConfig
from vnode_sync.config_loading import Internal, documented
from vnode_sync.coordinator.config import CoordinatorConfig

# Committed counts (before issue 59: 53 coordinator, 58 agent).
COORDINATOR_SETTINGS = 57   # 52, less policy.allocation, mode and hysteresis (one sharing), plus nss_groups (3)
#                             and slurm_accounts (4: accounts, cluster, refresh_seconds, prefer)
AGENT_SETTINGS = 49   # 46, plus datanode_throttle.cpu_shares, required_disk_settings (issue 60), lustre.jobid_job_rule (issue 61)


def test_the_settings_an_admin_sees_only_shrink():
    coordinator, agent = len(documented(CoordinatorConfig)), len(documented(AgentConfig))
    print(f"settings an admin sees: coordinator {coordinator}, agent {agent}")
    assert coordinator <= COORDINATOR_SETTINGS, f"coordinator settings grew to {coordinator}"
    assert agent <= AGENT_SETTINGS, f"agent settings grew to {agent}"


def test_every_key_of_a_file_is_listed_under_a_group_or_its_section():
    for kind in (CoordinatorConfig, AgentConfig):
        ungrouped = [d.key for d in documented(kind) if "." not in d.key and not d.group]
        assert ungrouped == [], f"{kind.__name__}: give these a Group: {ungrouped}"


def test_an_internal_setting_is_read_but_not_listed():
    keys = {d.key for d in documented(AgentConfig)}
    assert "proc_root" not in keys and "probe_seconds" not in keys and "report_seconds" in keys
    assert any(isinstance(m, Internal) for m in AgentConfig.model_fields["proc_root"].metadata)
    every_key = {"node_id": "dn1", "proc_root": "/tmp/proc"}
    assert AgentConfig.model_validate(every_key).proc_root == "/tmp/proc"


def test_the_settings_reference_is_current():
    result = subprocess.run([sys.executable, f"{REPO}/scripts/settings_reference.py", "--check"],
                            capture_output=True, text=True, timeout=60, cwd=REPO)
    assert result.returncode == 0, result.stderr
