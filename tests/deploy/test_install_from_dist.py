"""The roles install from make dist's artifacts (vnode_common_dist): checksums checked on the controller,
the wheel and the host's form's wheelhouse copied over, no package index. A storage node's form leaves
the coordinator's extra out; a second run changes nothing. (The coordinator's form, with its extra, is
installed by tests/deploy/test_ansible.py through the same pip task, from setup's wheelhouse.)

Only vnode_common's install (the part every role shares), on this host, everything under tmp_path.
"""

import json
import os
import shutil
import subprocess

import pytest
import yaml

from tests.conftest import REPO
from vnode_sync.distribution import version

ROLES = os.path.join(REPO, "deploy", "ansible", "roles")
WHY_NO_ANSIBLE = None if shutil.which("ansible-playbook") else \
    "needs ansible-playbook (scripts/setup.d/deploy.sh installs Debian's ansible-core)"
pytestmark = [pytest.mark.slow, pytest.mark.skipif(WHY_NO_ANSIBLE is not None, reason=WHY_NO_ANSIBLE or ""),
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the role installs Debian packages with apt")]


def _install(tmp_path, dist: str, extras: list[str]) -> dict[str, int]:
    settings = {"vnode_common_dist": dist, "vnode_common_dist_dir": str(tmp_path / "opt" / "dist"),
                "vnode_common_venv": str(tmp_path / "opt" / "venv"), "vnode_common_bin_dir": str(tmp_path / "bin"),
                "vnode_common_extras": extras, "vnode_common_config_dir": str(tmp_path / "etc"),
                "vnode_common_pki_dir": str(tmp_path / "etc" / "pki"), "vnode_common_state_dir": str(tmp_path / "state"),
                "vnode_common_log_dir": str(tmp_path / "log"), "vnode_common_run_dir": str(tmp_path / "run"),
                "vnode_common_apt_packages": []}   # python3-venv is here (setup), and apt takes seconds to say so
    (tmp_path / "bin").mkdir(exist_ok=True)   # the role links into a directory on PATH, which exists
    (tmp_path / "vars.json").write_text(json.dumps(settings))
    # The service manager is the only fact the install asks for: the smallest gathering has it.
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{"hosts": "localhost", "connection": "local",
                                                        "gather_subset": ["min"], "roles": ["vnode_common"]}]))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_ROLES_PATH=ROLES,
               ANSIBLE_RETRY_FILES_ENABLED="false", LC_ALL="C.UTF-8")
    env.pop("VIRTUAL_ENV", None)
    run = subprocess.run(["ansible-playbook", "-i", "localhost,", "-e", "ansible_python_interpreter=/usr/bin/python3",
                          "-e", f"@{tmp_path / 'vars.json'}", str(tmp_path / "play.yml")],
                         capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    line = next(line for line in run.stdout.splitlines() if line.startswith("localhost") and "ok=" in line)
    return {key: int(value) for key, value in (part.split("=") for part in line.split()[2:])}


def _imports(venv, module: str) -> bool:
    return subprocess.run([str(venv / "bin" / "python"), "-c", f"import {module}"], capture_output=True).returncode == 0


def test_a_storage_node_installs_from_dist_without_the_coordinators_extra_and_a_rerun_changes_nothing(
        tmp_path, product_dist):
    venv = tmp_path / "opt" / "venv"
    first = _install(tmp_path, product_dist, [])
    assert first["failed"] == 0 and first["changed"] > 0
    assert _imports(venv, "grpc") and not _imports(venv, "numba") and not _imports(venv, "kazoo")
    assert not [w for w in os.listdir(tmp_path / "opt" / "dist" / "wheelhouse") if w.startswith(("numba", "numpy"))]
    shown = subprocess.run([str(tmp_path / "bin" / "vnodectl"), "--version"], capture_output=True, text=True)
    assert shown.stdout.strip() == f"vnodectl {version()}"

    assert _install(tmp_path, product_dist, [])["changed"] == 0
    # Asking for the coordinator's extra on it would install it: the install step's check fails there.
    check = subprocess.run([str(venv / "bin" / "python"), "-m", "vnode_sync.distribution", "coordinator"],
                           capture_output=True, text=True)
    assert check.returncode == 1 and "numba" in check.stderr


def test_a_dist_whose_checksums_do_not_verify_is_refused_and_nothing_installed(tmp_path, product_dist):
    tampered = tmp_path / "dist"
    tampered.mkdir()
    for name in os.listdir(product_dist):   # links to all but the wheel, which is changed by a byte
        if name.startswith("vnode_sync-"):
            shutil.copy(os.path.join(product_dist, name), tampered / name)
            with open(tampered / name, "ab") as f:
                f.write(b"\0")
        else:
            os.symlink(os.path.join(product_dist, name), tampered / name)
    with pytest.raises(AssertionError, match="SHA256SUMS|FAILED"):
        _install(tmp_path, str(tampered), [])
    assert not (tmp_path / "opt" / "venv").exists() and not (tmp_path / "opt" / "dist").exists()
