"""deploy/prometheus and deploy/grafana: the alert rules, their unit tests and the scrape config pass
promtool (Debian's prometheus package), and the dashboard asks only for metrics vnode-sync serves."""

import json
import os
import re
import shutil
import subprocess

import pytest
import yaml

from vnode_sync.security import certs
from tests.conftest import REPO

PROMETHEUS_DIR = os.path.join(REPO, "deploy", "prometheus")
needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None, reason="needs promtool (Debian's prometheus "
                                    "package; scripts/setup.d/prometheus.sh installs it)")


# A recording rule's name, level:metric:operations (Prometheus's naming practice).
RECORDED = r"\w+:vnode_sync_\w+:\w+"


def recording_rules() -> set[str]:
    with open(os.path.join(PROMETHEUS_DIR, "vnode-sync-alerts.yml")) as f:
        return {rule["record"] for group in yaml.safe_load(f)["groups"] for rule in group["rules"] if "record" in rule}


def test_no_rule_and_no_dashboard_panel_reads_a_series_per_user_and_node():
    """Rules and panels group by user or by node, never both (bounded whatever the site's size): a by() naming
    both, or a per-user agent series left ungrouped, would make one series per user x node."""
    with open(os.path.join(REPO, "deploy", "grafana", "vnode-sync.json")) as f:
        exprs = [t["expr"] for p in json.load(f)["panels"] for t in p.get("targets", [])]
    with open(os.path.join(PROMETHEUS_DIR, "vnode-sync-alerts.yml")) as f:
        exprs += [rule["expr"] for group in yaml.safe_load(f)["groups"] for rule in group["rules"]]
    for expr in exprs:
        for grouping in re.findall(r"by \(([^)]*)\)", expr):
            assert not {"user", "node"} <= {label.strip() for label in grouping.split(",")}, expr
        if "vnode_sync_user_" in expr:
            assert "sum by (user" in expr, expr


def promtool(*args: str, cwd: str = PROMETHEUS_DIR) -> subprocess.CompletedProcess:
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=60, cwd=cwd)


@needs_promtool
def test_the_alert_rules_are_valid_and_fire_as_their_unit_tests_say():
    checked = promtool("check", "rules", "vnode-sync-alerts.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 13 rules found" in checked.stdout
    tested = promtool("test", "rules", "vnode-sync-alerts.test.yml")
    assert tested.returncode == 0, tested.stdout + tested.stderr


@needs_promtool
def test_the_example_scrape_config_is_valid_with_real_certificate_files(tmp_path):
    ca = certs.create_ca(str(tmp_path))
    issued = certs.issue(str(tmp_path), "monitor", "prometheus")
    with open(os.path.join(PROMETHEUS_DIR, "prometheus.example.yml")) as f:
        text = f.read()
    text = (text.replace("/etc/prometheus/vnode-sync/ca.crt", ca.cert)
            .replace("/etc/prometheus/vnode-sync/monitor-prometheus.crt", issued.cert)
            .replace("/etc/prometheus/vnode-sync/monitor-prometheus.key", issued.key))
    (tmp_path / "prometheus.yml").write_text(text)
    shutil.copy(os.path.join(PROMETHEUS_DIR, "vnode-sync-alerts.yml"), tmp_path)
    checked = promtool("check", "config", "prometheus.yml", cwd=str(tmp_path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    jobs = [job["job_name"] for job in yaml.safe_load(text)["scrape_configs"]]
    assert jobs == ["vnode-sync-coordinator", "vnode-sync-agents"]   # the names the alert rules use


def test_the_dashboard_asks_only_for_documented_metrics_with_bounded_labels():
    with open(os.path.join(REPO, "deploy", "grafana", "vnode-sync.json")) as f:
        dashboard = json.load(f)
    with open(os.path.join(REPO, "docs", "metrics.md")) as f:
        documented = f.read()
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    recorded = {m for e in exprs for m in re.findall(RECORDED, e)}
    used = {re.sub(r"_(bucket|count|sum)$", "", m) for e in exprs for m in re.findall(r"vnode_sync_\w+",
                                                                                  re.sub(RECORDED, "", e))}
    assert used and not [m for m in used if f"`{m}`" not in documented]
    assert recorded and recorded <= recording_rules()
    assert {v["name"] for v in dashboard["templating"]["list"]} == {"datasource", "user", "node", "group"}
    by_group = [e for e in exprs if "vnode_sync_coordinator_group_" in e]
    assert len(by_group) == 5 and all("sum by (group)" in e or "max by (group)" in e for e in by_group), \
        "the tree's groups: moved and given per group and direction, and their weights, one series per group"
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
