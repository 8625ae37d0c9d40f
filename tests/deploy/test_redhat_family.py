"""The roles' RHEL-family branch, rendered with that family's facts: no RHEL host is reachable here, so each
package task of the roles (apt, dnf, package) and the virtualenv's Python are templated by Ansible from the
roles' own task files and defaults with ansible_os_family=RedHat, and the dnf names asserted (AppStream's
Python 3.11, OpenJDK 11); the same with Debian's facts keeps Debian's. Nothing is installed."""

import json
import os
import subprocess

import pytest
import yaml

from tests.deploy.test_ansible import ANSIBLE_DIR, WHY_NO_ANSIBLE

pytestmark = [pytest.mark.skipif(WHY_NO_ANSIBLE is not None, reason=WHY_NO_ANSIBLE or "")]

ROLES = os.path.join(ANSIBLE_DIR, "roles")
TASK_FILES = [("vnode_common", "install.yml"), ("vnode_datanode", "main.yml")]
PACKAGE_MODULES = ("ansible.builtin.apt", "ansible.builtin.dnf", "ansible.builtin.package")


def tasks_of(tasks: list[dict]):
    for task in tasks:
        yield from tasks_of(task.get("block", []))
        if "block" not in task:
            yield task


def as_debug(task: dict) -> dict | None:
    """The task's package names (or the pip task's virtualenv command) templated by a debug task, under the
    task's own condition."""
    module = next((m for m in (*PACKAGE_MODULES, "ansible.builtin.pip") if m in task), None)
    if module is None:
        return None
    shown = task[module]["virtualenv_command"] if module == "ansible.builtin.pip" else task[module]["name"]
    debug = {"name": f"{module} {task['name']}", "ansible.builtin.debug": {"msg": shown}}
    return {**debug, "when": task["when"]} if "when" in task else debug


def rendered(tmp_path, family: str) -> dict[str, object]:
    """Each rendered task's name -> what it would install (or run), None where its condition skips it."""
    tasks = []
    for role, name in TASK_FILES:
        with open(os.path.join(ROLES, role, "tasks", name)) as f:
            tasks += [d for d in map(as_debug, tasks_of(yaml.safe_load(f))) if d]
    for number, task in enumerate(tasks):
        task["register"] = f"rendered_{number}"
    out = tmp_path / "rendered.json"
    collect = ", ".join(f"{task['name']!r}: (None if rendered_{n}.skipped | default(false) else rendered_{n}.msg)"
                        for n, task in enumerate(tasks))
    tasks.append({"name": "write what each task rendered", "ansible.builtin.copy": {
        "content": "{{ {" + collect + "} | to_json }}", "dest": str(out)}})
    play = [{"hosts": "localhost", "connection": "local", "gather_facts": False,
             "vars_files": [os.path.join(ROLES, role, "defaults", "main.yml") for role, _ in TASK_FILES],
             "tasks": tasks}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    done = subprocess.run(["ansible-playbook", "-i", "localhost,", "-e", f"ansible_os_family={family}",
                           "-e", "vnode_datanode_install_java=true", str(tmp_path / "play.yml")],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return json.loads(out.read_text())


def by_module(results: dict, module: str) -> list:
    return [shown for name, shown in results.items() if name.startswith(module + " ")]


def test_on_the_redhat_family_the_roles_install_appstreams_python_311_and_openjdk_11_with_dnf(tmp_path):
    results = rendered(tmp_path, "RedHat")
    assert by_module(results, "ansible.builtin.apt") == [None], "apt is skipped"
    assert by_module(results, "ansible.builtin.dnf") == [["python3.11", "python3.11-pip"]]
    assert by_module(results, "ansible.builtin.package") == [["java-11-openjdk-headless"]]
    assert by_module(results, "ansible.builtin.pip") == ["python3.11 -m venv"]


def test_on_debian_the_roles_keep_debians_names(tmp_path):
    results = rendered(tmp_path, "Debian")
    assert by_module(results, "ansible.builtin.apt") == [["python3-venv"]]
    assert by_module(results, "ansible.builtin.dnf") == [None], "dnf is skipped"
    assert by_module(results, "ansible.builtin.package") == [["openjdk-11-jre-headless"]]
    assert by_module(results, "ansible.builtin.pip") == ["python3 -m venv"]
