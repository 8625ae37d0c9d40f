"""The wheel ships the product only, and the product keeps its layers (pyproject's [tool.importlinter]).

Both are checked on the built wheel, the tree as installed: there agents/ and coordinator/
sit inside vnode_sync, which the repository's package-dir mapping hides from a source scan.
"""

import os
import shutil
import subprocess
import re
import sys
import tomllib
import zipfile

import pytest

from tests.conftest import REPO, wheelhouse

PRODUCT_PACKAGES = {"agents", "batch", "coordinator", "ctl", "datanode", "kernel", "metrics", "security", "wire"}


def test_the_wheel_holds_the_product_and_no_test_bed_benchmark_or_test(product_wheel):
    names = zipfile.ZipFile(product_wheel).namelist()
    top_level = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top_level == {"vnode_sync"}
    subpackages = {n.split("/")[1] for n in names if n.startswith("vnode_sync/") and n.count("/") >= 2}
    assert subpackages == PRODUCT_PACKAGES
    assert not [n for n in names if "testbed" in n or "benchmark" in n or "/tests/" in n]


@pytest.mark.slow
def test_the_wheel_in_a_clean_venv_runs_its_commands_without_test_bed_dependencies(product_wheel, tmp_path):
    """Installed alone (its own dependencies, as constraints.txt pins them), the wheel's commands
    start: hdfs and psutil, which only tests, test beds and benchmarks use, are not installed."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    wheels = wheelhouse()
    offline = ["--no-index", "--find-links", wheels] if wheels else []
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
                          "-c", os.path.join(REPO, "constraints.txt"), *offline, product_wheel],
                         capture_output=True, text=True, timeout=600)
    assert pip.returncode == 0, pip.stderr
    python = str(venv / "bin" / "python")
    for test_only in ("hdfs", "psutil"):
        absent = subprocess.run([python, "-c", f"import {test_only}"], capture_output=True, text=True)
        assert absent.returncode != 0, f"{test_only} was installed with the wheel"
    for coordinator_only in ("numpy", "numba", "kazoo"):   # vnode-sync[coordinator]'s, not a node's
        absent = subprocess.run([python, "-c", f"import {coordinator_only}"], capture_output=True, text=True)
        assert absent.returncode != 0, f"{coordinator_only} was installed without the coordinator extra"
    for command in ("vnodectl", "vnode-agent", "vnode-coordinator", "vnode-batch"):
        run = subprocess.run([str(venv / "bin" / command), "--help"], capture_output=True, text=True, timeout=60,
                             cwd=tmp_path)
        assert run.returncode == 0 and "usage:" in run.stdout, (command, run.stderr)


def _lint(tree: str) -> subprocess.CompletedProcess:
    shutil.copy(os.path.join(REPO, "pyproject.toml"), tree)
    lint = os.path.join(os.path.dirname(sys.executable), "lint-imports")
    return subprocess.run([lint, "--config", "pyproject.toml", "--no-cache"], cwd=tree, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": tree})


def test_the_product_keeps_its_layers(product_wheel, tmp_path):
    zipfile.ZipFile(product_wheel).extractall(tmp_path)
    result = _lint(str(tmp_path))
    assert result.returncode == 0, result.stdout


def test_the_layers_name_every_top_level_product_module(product_wheel):
    names = zipfile.ZipFile(product_wheel).namelist()
    top_level = {n.split("/")[1].removesuffix(".py") for n in names
                 if n.startswith("vnode_sync/") and (n.count("/") >= 2 or n.endswith(".py"))} - {"__init__"}
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c["name"].startswith("front ends above services")]
    layered = {name for layer in layers for name in re.split(r"[|:]", layer.replace(" ", ""))}
    assert {f"vnode_sync.{m}" for m in top_level} - layered == set()


@pytest.mark.parametrize("module,line,contract", [
    ("vnode_sync/kernel/devices.py", "import vnode_sync.coordinator.cluster", "front ends above services"),
    ("vnode_sync/agents/__init__.py", "import vnode_sync.coordinator", "front ends above services"),
    ("vnode_sync/errors.py", "import vnode_sync.validation", "front ends above services"),
    ("vnode_sync/supervision.py", "import vnode_sync.agents", "front ends above services"),
    ("vnode_sync/agents/__init__.py", "import testbed.names", "imports no test bed"),
    ("vnode_sync/coordinator/policy/water_filling.py", "import vnode_sync.wire", "the policies are pure"),
    ("vnode_sync/agents/config.py", "import vnode_sync.agents.compute.main", "the agent: its entry point"),
    ("vnode_sync/agents/storage/demand.py", "import vnode_sync.agents.compute.placement", "the agent: its entry point"),
    ("vnode_sync/coordinator/state/store.py", "import vnode_sync.coordinator.control.publishing", "the coordinator: entry"),
    ("vnode_sync/coordinator/commands/nodes.py", "import vnode_sync.coordinator.cluster", "the coordinator: entry"),
    ("vnode_sync/coordinator/state/groups.py", "import vnode_sync.coordinator.state.store", "no import circle"),
])
def test_a_broken_layer_rule_is_caught(product_wheel, tmp_path, module, line, contract):
    zipfile.ZipFile(product_wheel).extractall(tmp_path)
    with open(tmp_path / module, "a") as f:
        f.write(f"\n{line}\n")
    result = _lint(str(tmp_path))
    assert result.returncode != 0
    assert contract in result.stdout.split("Broken contracts")[1]
