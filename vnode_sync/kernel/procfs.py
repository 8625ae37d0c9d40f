"""Reading /proc entries of processes and threads that may end while they are read.

A process or thread can exit between being listed and being read; the kernel then answers
ENOENT or ESRCH (ProcessLookupError), and EACCES/EPERM where hidepid or ptrace rules hide
it. Here, and only here, those mean "gone, or not ours to see": readers get None, which
callers treat as a thread that is no longer there. Other errors propagate.
"""

import os

_GONE = (FileNotFoundError, ProcessLookupError, PermissionError)


def read_text(path: str) -> str | None:
    """The file's text (undecodable bytes replaced: cmdline and environ are not UTF-8 by rule)."""
    try:
        with open(path, "rb") as f:
            return f.read().decode(errors="replace")
    except _GONE:
        return None


def cgroups_of(proc_root: str, pid: int) -> list[tuple[str, str]] | None:
    """Process PID's cgroups, one (controllers, path) per hierarchy of /proc/PID/cgroup (controllers ""
    for cgroup2's `0::` line, comma-separated names for a v1 hierarchy); None if it is gone or hidden."""
    text = read_text(os.path.join(proc_root, str(pid), "cgroup"))
    if text is None:
        return None
    return [((parts + ["", ""])[1], (parts + ["", ""])[2] or "/")
            for parts in (line.split(":", 2) for line in text.splitlines() if line)]


def read_link(path: str) -> str | None:
    try:
        return os.readlink(path)
    except _GONE:
        return None


def list_dir(path: str) -> list[str] | None:
    try:
        return os.listdir(path)
    except _GONE:
        return None


def task_ids(proc_root: str, pid: int) -> list[int] | None:
    """The threads of process `pid`; None once it has gone."""
    names = list_dir(os.path.join(proc_root, str(pid), "task"))
    return None if names is None else [int(t) for t in names]


def owner_uid(path: str) -> int | None:
    """The uid owning a /proc entry (a process's directory is owned by its effective uid)."""
    try:
        return os.stat(path).st_uid
    except _GONE:
        return None


def thread_start_seconds(proc_root: str, pid: int, tid: int) -> float | None:
    """When a thread started, in seconds since boot (CLOCK_BOOTTIME); None once it has gone.

    Field 22 of /proc/PID/task/TID/stat (proc(5): starttime, in clock ticks), counted after the
    command name, which may itself hold spaces and parentheses.
    """
    stat = read_text(os.path.join(proc_root, str(pid), "task", str(tid), "stat"))
    if stat is None:
        return None
    fields = stat.rpartition(")")[2].split()
    return int(fields[19]) / os.sysconf("SC_CLK_TCK")
