"""testbed.cpu_priority: a benchmark's processes get the largest cpu.shares, and the group goes away."""

import os
import subprocess
import sys

import pytest

from tests.conftest import unique_name
from testbed import leftovers
from testbed.cpu_priority import CPU_HIERARCHY, MAX_SHARES, cpu_child, cpu_priority
from testbed.names import crashed_run_name

WHY_NOT = (None if os.geteuid() == 0 and os.path.isfile(os.path.join(CPU_HIERARCHY, "cpu.shares"))
           else f"needs root and a cgroup v1 cpu hierarchy at {CPU_HIERARCHY}")
needs_cpu_hierarchy = pytest.mark.skipif(WHY_NOT is not None, reason=WHY_NOT or "")


def cpu_cgroup_of(pid: int) -> str:
    with open(f"/proc/{pid}/cgroup") as f:
        return next(path.strip() for _, controllers, path in (line.split(":", 2) for line in f)
                    if "cpu" in controllers.split(","))


@needs_cpu_hierarchy
def test_the_caller_and_what_it_starts_run_with_the_largest_shares_and_the_group_is_removed():
    name = unique_name("cpu")
    with cpu_priority(name) as group:
        with open(os.path.join(group, "cpu.shares")) as f:
            assert int(f.read()) == MAX_SHARES
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            assert cpu_cgroup_of(os.getpid()) == f"/{name}"
            assert cpu_cgroup_of(child.pid) == f"/{name}"
        finally:
            child.kill()
            child.wait()
    assert not os.path.exists(group)
    assert cpu_cgroup_of(os.getpid()) == "/"


@needs_cpu_hierarchy
def test_a_placed_process_runs_in_a_child_group_with_its_shares_and_goes_back_to_the_parent_after():
    name = unique_name("cpu")
    with cpu_priority(name) as parent:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            with cpu_child(parent, "client", shares=4096) as place:
                place(child.pid)
                assert cpu_cgroup_of(child.pid) == f"/{name}/client"
                with open(os.path.join(parent, "client", "cpu.shares")) as f:
                    assert int(f.read()) == 4096
                assert cpu_cgroup_of(os.getpid()) == f"/{name}"
            assert not os.path.exists(os.path.join(parent, "client"))
            assert cpu_cgroup_of(child.pid) == f"/{name}"
        finally:
            child.kill()
            child.wait()


def test_without_a_cpu_hierarchy_placing_leaves_the_process_where_it_is():
    with open("/proc/self/cgroup") as f:
        before = f.read()
    with cpu_child(None, "client") as place:
        place(os.getpid())
    with open("/proc/self/cgroup") as f:
        assert f.read() == before


@needs_cpu_hierarchy
def test_a_crashed_runs_cpu_group_is_a_leftover_and_is_removed():
    name = crashed_run_name("cpu")
    os.mkdir(os.path.join(CPU_HIERARCHY, name))
    try:
        found = [item for item in leftovers.find(name) if item.kind == "cgroup"]
        assert [item.what for item in found] == [os.path.join(CPU_HIERARCHY, name)] and not found[0].live
        leftovers.remove(found)
        assert not os.path.exists(os.path.join(CPU_HIERARCHY, name))
    finally:
        if os.path.exists(os.path.join(CPU_HIERARCHY, name)):
            os.rmdir(os.path.join(CPU_HIERARCHY, name))
