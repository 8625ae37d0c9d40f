"""testbed.leftovers: what a crashed run left is removed; what a live run owns is kept."""

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
    assert not leftovers.run_is_live("vnode-sync-test.x.1.12345678".replace(".1.", ".999999999."))


def test_run_names_are_found_in_paths_and_command_lines():
    assert leftovers.run_of("/tmp/vnode-sync-hdfs.demo/dn0/disk") == "vnode-sync-hdfs.demo"
    assert leftovers.run_of("java -Dtestbed.workdir=/tmp/vnode-sync-test.a.12.ff x") == "vnode-sync-test.a.12.ff"
    assert leftovers.run_of("/sys/fs/cgroup/blkio/vnode-sync.dn1") is None   # a production agent's subtree


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
