"""One version for everything (pyproject.toml's), and the coordinator's extra: a storage or compute
node, vnodectl and the batch hooks import none of it; the coordinator refuses to start without it."""

import importlib.metadata
import os
import re
import subprocess
import sys
import textwrap
import tomllib

import pytest
import yaml

from tests.conftest import REPO, write_coordinator_config
from vnode_sync.distribution import EXTRA_MODULES, version

with open(os.path.join(REPO, "pyproject.toml"), "rb") as _f:
    PROJECT = tomllib.load(_f)["project"]
COMMANDS = sorted(PROJECT["scripts"])
# The coordinator extra's modules and what they pull in themselves (numba's compiler).
BLOCKED = (*EXTRA_MODULES["coordinator"], "llvmlite")
FRONT_ENDS = ["vnode_sync.agents.main", "vnode_sync.agents.compute.main", "vnode_sync.agents.plugins",
              "vnode_sync.ctl.main", "vnode_sync.batch.cli", "vnode_sync.batch.hooks"]

# As if the extra were not installed: any import of these modules (or their submodules) is not found.
WITHOUT_EXTRA = textwrap.dedent(f"""
    import importlib.abc, sys
    class NotInstalled(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {BLOCKED!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
    sys.meta_path.insert(0, NotInstalled())
""")


def _without_extra(code: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT_EXTRA + textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120, cwd=REPO, **kwargs)


def _normalized(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_the_version_is_pyprojects():
    assert version() == PROJECT["version"]
    import vnode_sync
    assert vnode_sync.__version__ == PROJECT["version"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_prints_the_version_and_exits_0(command):
    script = os.path.join(os.path.dirname(sys.executable), command)
    run = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == f"{command} {PROJECT['version']}"


def test_the_datanode_agents_pom_has_the_same_version():
    with open(os.path.join(REPO, "agents", "datanode-throttle", "pom.xml")) as f:
        pom = f.read()
    # The project's own <version>: the first one after its <artifactId>, before any dependency.
    own = re.search(r"<artifactId>[^<]+</artifactId>\s*<version>([^<]+)</version>", pom.split("<dependencies>")[0])
    assert own and own.group(1) == PROJECT["version"]


def test_the_roles_install_the_same_version():
    with open(os.path.join(REPO, "deploy", "ansible", "roles", "vnode_common", "defaults", "main.yml")) as f:
        assert yaml.safe_load(f)["vnode_common_version"] == PROJECT["version"]
    with open(os.path.join(REPO, "deploy", "ansible", "inventory.example.yml")) as f:
        assert yaml.safe_load(f)["all"]["vars"]["vnode_common_source"] == f"vnode-sync=={PROJECT['version']}"


def test_the_extras_modules_are_the_distributions_pyproject_names():
    """distribution.py's import names and pyproject's requirements name the same packages."""
    owners = importlib.metadata.packages_distributions()
    named = {_normalized(owners[module][0]) for module in EXTRA_MODULES["coordinator"]}
    assert named == {_normalized(r) for r in PROJECT["optional-dependencies"]["coordinator"]}
    assert not named & {_normalized(r) for r in PROJECT["dependencies"]}


@pytest.mark.parametrize("module", FRONT_ENDS)
def test_a_front_end_imports_without_the_coordinator_extra(module):
    run = _without_extra(f"""
        import {module}
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in {BLOCKED!r})
        assert not loaded, loaded
    """)
    assert run.returncode == 0, run.stderr[-2000:]


def test_no_module_outside_the_coordinator_imports_the_coordinator_extra():
    """Every module a node, vnodectl or a batch hook may load, lazily loaded ones too (backends)."""
    run = _without_extra("""
        import importlib, pkgutil
        import vnode_sync, vnode_sync.agents
        failed = []
        for package in (vnode_sync, vnode_sync.agents):
            for found in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
                if found.name.startswith("vnode_sync.coordinator") or found.name.endswith("__main__"):
                    continue
                try:
                    importlib.import_module(found.name)
                except ImportError as e:
                    failed.append(f"{found.name}: {e}")
        assert not failed, failed
    """)
    assert run.returncode == 0, run.stderr[-3000:]


def test_the_coordinator_refuses_to_start_without_its_extra_in_one_line(tmp_path):
    config = write_coordinator_config(tmp_path)
    run = _without_extra(f"""
        from vnode_sync.coordinator.main import main
        sys.exit(main(["--config", {config!r}]))
    """)
    assert run.returncode == 2 and run.stdout == ""
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("vnode-coordinator: error: numpy, numba, kazoo, puresasl not installed")
    assert line.endswith("pip install 'vnode-sync[coordinator]'")
    assert not (tmp_path / "state.sqlite").exists(), "nothing made"
    version_only = _without_extra("""
        from vnode_sync.coordinator.main import main
        main(["--version"])
    """)
    assert version_only.returncode == 0 and version_only.stdout.strip() == f"vnode-coordinator {PROJECT['version']}"


def test_the_roles_install_check_names_a_missing_extra():
    """What the Ansible install step asks before running pip: rc 1 where the extra is missing."""
    present = subprocess.run([sys.executable, "-m", "vnode_sync.distribution", "coordinator"], capture_output=True,
                             text=True, timeout=60, cwd=REPO)
    assert (present.returncode, present.stdout.strip()) == (0, PROJECT["version"])
    missing = _without_extra("""
        import runpy
        sys.argv = ["distribution", "coordinator"]
        runpy.run_module("vnode_sync.distribution", run_name="__main__")
    """)
    assert missing.returncode == 1 and missing.stdout.strip() == PROJECT["version"]
    assert "coordinator: numpy, numba, kazoo, puresasl" in missing.stderr
