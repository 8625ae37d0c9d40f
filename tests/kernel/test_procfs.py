"""Reading /proc entries of processes that end: the real /proc, no root needed."""

import os
import subprocess

from vnode_sync.kernel.procfs import list_dir, owner_uid, read_link, read_text, task_ids


def test_a_live_process_reads_as_itself():
    pid = os.getpid()
    assert pid in task_ids("/proc", pid)
    assert owner_uid(f"/proc/{pid}") == os.geteuid()
    assert "python" in read_text(f"/proc/{pid}/cmdline")
    assert read_link(f"/proc/{pid}/exe")


def test_a_process_that_has_ended_reads_as_gone_not_as_an_error():
    child = subprocess.Popen(["true"])
    child.wait()   # reaped: its /proc entry is gone
    pid = child.pid
    assert task_ids("/proc", pid) is None
    assert list_dir(f"/proc/{pid}/fd") is None
    assert read_text(f"/proc/{pid}/environ") is None
    assert read_link(f"/proc/{pid}/fd/0") is None
    assert owner_uid(f"/proc/{pid}") is None


def test_an_exiting_process_keeps_answering_none_while_it_goes():
    """Reads race the exit (ENOENT or ESRCH depending on where the kernel is): never raise."""
    for _ in range(20):
        child = subprocess.Popen(["sleep", "0.001"])
        while child.poll() is None:
            for entry in ("environ", "status", "cmdline", "task/%d/syscall" % child.pid):
                read_text(f"/proc/{child.pid}/{entry}")
            list_dir(f"/proc/{child.pid}/fd")
        assert read_text(f"/proc/{child.pid}/status") is None
