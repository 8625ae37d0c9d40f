"""testbed.leftovers: what a crashed run left is removed; what a live run owns is kept."""

import json
import os
import subprocess
import sys

from tests.conftest import needs_kernel, unique_name
from testbed import leftovers
from testbed.loopdev import LoopDisk, stale_loops, stale_mounts
from testbed.names import crashed_run_name


def test_a_run_is_live_while_its_owner_pid_runs():
    assert leftovers.run_is_live(unique_name("x"))                # this process
    assert not leftovers.run_is_live(crashed_run_name("x"))
    # 9 digits are no pid (pid_max <= 2^22): that name records no owner, so nothing shows it dead
    assert leftovers.run_is_live("vnode-sync-test.x.999999999.12345678", "/nonexistent")


def test_a_run_that_records_no_owner_is_kept(tmp_path):
    # A live tool that merely names a fake device like this, or a tempdir without a pid, is nobody's leftover.
    assert leftovers.run_is_live(leftovers.run_of("simulated_agents 127.0.0.1:1 /dev/vnode-sync-bench 0"),
                                 str(tmp_path))
    assert leftovers.run_is_live("vnode-sync-testdnt.xfdz7544", str(tmp_path))


def test_a_named_hdfs_testbed_is_live_while_its_daemons_run(tmp_path):
    run = "vnode-sync-hdfs.demo"
    (tmp_path / run).mkdir()
    state = tmp_path / run / "cluster.json"
    state.write_text(json.dumps({"namenode": {"pid": os.getpid()}, "datanodes": []}))
    assert leftovers.run_is_live(run, str(tmp_path))
    state.write_text(json.dumps({"namenode": {"pid": crashed_pid()}, "datanodes": []}))
    assert not leftovers.run_is_live(run, str(tmp_path))


def test_run_names_are_found_in_paths_and_command_lines():
    assert leftovers.run_of("/tmp/vnode-sync-hdfs.demo/dn0/disk") == "vnode-sync-hdfs.demo"
    assert leftovers.run_of("java -Dtestbed.workdir=/tmp/vnode-sync-test.a.12.ff x") == "vnode-sync-test.a.12.ff"
    assert leftovers.run_of("/sys/fs/cgroup/blkio/vnode-sync.dn1") is None   # a production agent's subtree


def crashed_pid() -> int:
    owner = subprocess.Popen(["true"])
    owner.wait()
    return owner.pid


def _remove(run: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "testbed.leftovers", "--remove", "--run", run, *extra],
                          capture_output=True, text=True, timeout=60)


@needs_kernel
def test_clean_leftovers_removes_a_crashed_runs_disk_and_process_and_keeps_a_live_runs(tmp_path):
    crashed, live = crashed_run_name("left"), unique_name("left")
    disks = {run: LoopDisk.create(f"/tmp/{run}.img", f"/tmp/{run}", 32) for run in (crashed, live)}
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", crashed])
    try:
        result = _remove("vnode-sync-test.left")
        assert result.returncode == 0, result.stderr
        assert sleeper.wait(15) is not None
        assert not stale_mounts(crashed) and not stale_loops(crashed)
        assert stale_mounts(live) and stale_loops(live)                     # owner (this test) still runs
        assert f"mount: /tmp/{live} (live run, kept)" in result.stdout
        assert _remove(live, "--include-live").returncode == 0
        assert not stale_mounts(live) and not stale_loops(live)
    finally:
        sleeper.kill()
        for disk in disks.values():
            disk.remove()


def test_a_run_filter_that_could_reach_a_path_is_refused():
    result = subprocess.run([sys.executable, "-m", "testbed.leftovers", "--run", "../etc"],
                            capture_output=True, text=True)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert os.path.exists("/etc")


@needs_kernel
def test_clean_leftovers_removes_a_crashed_runs_trace_instance():
    from testbed import tracefs
    crashed = crashed_run_name("trace")
    with tracefs.TraceInstance(unique_name("trace"), {}):   # tracefs mounted while this runs, if it was not
        path = os.path.join(tracefs.INSTANCES, crashed)
        os.mkdir(path)
        try:
            result = _remove("vnode-sync-test.trace")
            assert result.returncode == 0, result.stderr
            assert f"trace instance: {path}" in result.stdout and not os.path.exists(path)
        finally:
            if os.path.exists(path):
                os.rmdir(path)
