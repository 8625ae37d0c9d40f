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
