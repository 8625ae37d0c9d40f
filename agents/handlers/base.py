"""The plug-in interface for handler discovery, and the identity facts plug-ins use."""

import time
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class HandlerThread:
    """A thread doing I/O for a user. `user` None: not identified yet (goes to the default VNode).

    `inherits`: a helper thread started by a handler (HDFS's PacketResponder). Without a
    `user` it stays in the VNode it was born in, its creator's at that moment (on cgroup v1
    a thread starts in its creator's cgroup), or goes to the default VNode if born outside
    every VNode; with a `user`, it goes to that user's.
    """

    pid: int
    tid: int
    user: str | None
    inherits: bool = False


@dataclass
class UserDirectory:
    """What the coordinator told us about users: uid -> user and connection -> user."""

    users_by_uid: dict[int, str] = field(default_factory=dict)
    active_users: set[str] = field(default_factory=set)
    # (client address as the storage node sees it, client port) -> user, from compute agents
    connections: dict[tuple[str, int], str] = field(default_factory=dict)

    def user_for_uid(self, uid: int) -> str | None:
        return self.users_by_uid.get(uid)


class HandlerDiscovery(Protocol):
    """Finds handler threads. Implementations must treat vanished threads as normal."""

    name: str
    # True where one process serves every user (an HDFS DataNode): a per-process VNode
    # (cgroup v2 io) would charge all of them to whoever it was placed for.
    shared_process: bool

    def scan(self, users: UserDirectory) -> list[HandlerThread]:
        """Every handler thread now alive, with its user where it can be told."""
        ...

    def wait_for_change(self, timeout: float) -> None:
        """Block until handler threads may have changed, or `timeout` seconds pass."""
        ...

    def close(self) -> None: ...

    # Optional: `not_enforcing() -> str | None`, what the plug-in saw that keeps shares placed by
    # thread from holding (e.g. I/O done by threads that serve every user); read by discovery_not_enforcing.


def discovery_not_enforcing(discovery: HandlerDiscovery) -> str | None:
    check = getattr(discovery, "not_enforcing", None)
    return check() if check is not None else None


class PollingWait:
    """Mix-in for plug-ins without an event source: wait_for_change just sleeps."""

    def wait_for_change(self, timeout: float) -> None:
        time.sleep(timeout)

    def close(self) -> None:
        pass
