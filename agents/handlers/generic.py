"""Generic discovery: given PIDs/TIDs, or threads whose comm matches a pattern, by owner uid."""

import os
import re
from collections.abc import Iterable
from typing import Annotated, Literal

import annotated_types as at
from pydantic import AfterValidator, Field

from vnode_sync.agents.handlers.base import HandlerThread, UserDirectory, PollingWait
from vnode_sync.config_loading import Allowed, ListOf, Settings, UserName
from vnode_sync.kernel.procfs import read_text, task_ids


def real_uid(proc_root: str, pid: int) -> int | None:
    status = read_text(os.path.join(proc_root, str(pid), "status"))
    if status is None:
        return None
    for line in status.splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    return None


def threads_of(proc_root: str, pid: int) -> list[int]:
    return task_ids(proc_root, pid) or []


def thread_comm(proc_root: str, pid: int, tid: int) -> str | None:
    comm = read_text(os.path.join(proc_root, str(pid), "task", str(tid), "comm"))
    return comm.rstrip("\n") if comm is not None else None


def _pattern(text: str) -> str:
    try:
        re.compile(text)
    except re.error as e:
        raise ValueError(f"a regular expression ({e})") from e
    return text


class GenericDiscoverySettings(Settings):
    """The `discovery:` section with kind: generic (the default); each key is a GenericDiscovery argument."""

    kind: Literal["generic"] = "generic"
    comm_pattern: Annotated[str, AfterValidator(_pattern), Allowed("a regular expression matching whole thread names")] \
        | None = None
    """Threads whose name (comm) matches this whole are handler threads; unset: none by name."""
    pids: ListOf[Annotated[int, at.Gt(0)]] = ()
    """Processes all of whose threads are handler threads."""
    uid_map: dict[Annotated[int, at.Ge(1)], UserName] = Field(default_factory=dict)
    """uid -> user for owners the coordinator does not know (it is asked first)."""


class GenericDiscovery(PollingWait):
    """Threads of the given PIDs, and threads whose comm matches `comm_pattern`.

    A thread's user is the one whose uid owns its process (from the coordinator's users,
    then the agent's static `uid_map`); otherwise it is unidentified.
    """

    name = "generic"
    shared_process = False

    def __init__(self, proc_root: str = "/proc", comm_pattern: str | None = None,
                 pids: Iterable[int] = (), uid_map: dict[int, str] | None = None):
        self.proc_root = proc_root
        self.comm_pattern = re.compile(comm_pattern) if comm_pattern else None
        self.pids = set(pids)
        self.uid_map = dict(uid_map or {})

    def _user(self, users: UserDirectory, pid: int) -> str | None:
        uid = real_uid(self.proc_root, pid)
        if uid is None:
            return None
        return users.user_for_uid(uid) or self.uid_map.get(uid)

    def scan(self, users: UserDirectory) -> list[HandlerThread]:
        found: dict[int, HandlerThread] = {}
        for pid in self.pids:
            user = self._user(users, pid)
            for tid in threads_of(self.proc_root, pid):
                found[tid] = HandlerThread(pid, tid, user)
        if self.comm_pattern is not None:
            for entry in os.listdir(self.proc_root):
                if not entry.isdigit():
                    continue
                pid = int(entry)
                for tid in threads_of(self.proc_root, pid):
                    if tid in found:
                        continue
                    comm = thread_comm(self.proc_root, pid, tid)
                    if comm is not None and self.comm_pattern.fullmatch(comm):
                        found[tid] = HandlerThread(pid, tid, self._user(users, pid))
        return list(found.values())
