"""The wheel ships the product only, and the product keeps its layers (pyproject's [tool.importlinter]).

Both are checked on the built wheel, the tree as installed: there agents/ and coordinator/
sit inside vnode_sync, which the repository's package-dir mapping hides from a source scan.
"""

import os
import shutil
import subprocess
import sys
import zipfile

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRODUCT_PACKAGES = {"agents", "batch", "coordinator", "ctl", "datanode", "kernel", "metrics", "security", "wire"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), REPO],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    (path,) = [os.path.join(out, f) for f in os.listdir(out) if f.endswith(".whl")]
    return path


def test_the_wheel_holds_the_product_and_no_test_bed_benchmark_or_test(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top_level == {"vnode_sync"}
    subpackages = {n.split("/")[1] for n in names if n.startswith("vnode_sync/") and n.count("/") >= 2}
    assert subpackages == PRODUCT_PACKAGES
    assert not [n for n in names if "testbed" in n or "benchmark" in n or "/tests/" in n]


def _lint(tree: str) -> subprocess.CompletedProcess:
    shutil.copy(os.path.join(REPO, "pyproject.toml"), tree)
    lint = os.path.join(os.path.dirname(sys.executable), "lint-imports")
    return subprocess.run([lint, "--config", "pyproject.toml", "--no-cache"], cwd=tree, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": tree})


def test_the_product_keeps_its_layers(wheel, tmp_path):
    zipfile.ZipFile(wheel).extractall(tmp_path)
    result = _lint(str(tmp_path))
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("module,line,contract", [
    ("vnode_sync/kernel/devices.py", "import vnode_sync.coordinator.cluster", "front ends above services"),
    ("vnode_sync/agents/__init__.py", "import vnode_sync.coordinator", "front ends above services"),
    ("vnode_sync/errors.py", "import vnode_sync.validation", "front ends above services"),
    ("vnode_sync/agents/__init__.py", "import testbed.names", "imports no test bed"),
    ("vnode_sync/coordinator/policy/water_filling.py", "import vnode_sync.wire", "the policies are pure"),
])
def test_a_broken_layer_rule_is_caught(wheel, tmp_path, module, line, contract):
    zipfile.ZipFile(wheel).extractall(tmp_path)
    with open(tmp_path / module, "a") as f:
        f.write(f"\n{line}\n")
    result = _lint(str(tmp_path))
    assert result.returncode != 0
    assert contract in result.stdout.split("Broken contracts")[1]
