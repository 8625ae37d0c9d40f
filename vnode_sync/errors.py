"""One exception family for vnode-sync; each error says what was wrong and what is allowed."""


class VNodeSyncError(Exception):
    """Base of every error vnode-sync raises on purpose."""


class InvalidArgument(VNodeSyncError):
    """A value from a user, a config file or the wire is not acceptable."""


class NotFound(VNodeSyncError):
    """A named user, node or device does not exist."""


class ConfigError(InvalidArgument):
    """A configuration file cannot be read or does not validate."""


class Unavailable(VNodeSyncError):
    """A peer (coordinator, agent, daemon) cannot be reached; retrying may help."""


class KernelError(VNodeSyncError):
    """The kernel refused a cgroup operation."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}")
        self.path = path


class ThreadGone(KernelError):
    """The thread or process to move has exited (ESRCH): normal while handlers come and go."""

    def __init__(self, path: str, tid: int):
        super().__init__(path, f"thread {tid} no longer exists")
        self.tid = tid


class Unsupported(VNodeSyncError):
    """The host cannot do what was asked (e.g. per-thread placement on cgroup v2)."""
