"""One exception family for vnode-sync; each error says what was wrong and what is allowed."""


class VNodeSyncError(Exception):
    """Base of every error vnode-sync raises on purpose."""


class InvalidArgument(VNodeSyncError):
    """A value from a user, a config file or the wire is not acceptable."""


class NotFound(VNodeSyncError):
    """A named user, node or device does not exist."""


class ConfigError(InvalidArgument):
    """A configuration file cannot be read or does not validate."""


class InvalidSetting(ConfigError):
    """A config file, or one value in it, is not acceptable: one line naming the file, the key
    path (`discovery.poll_seconds`, or `(whole file)`), the value given and what is allowed."""

    def __init__(self, source: str, key: str, given: str, allowed: str):
        super().__init__(f"config {source}: {key}: got {given}; allowed: {allowed}")
        self.source, self.key, self.given, self.allowed = source, key, given, allowed


class Unavailable(VNodeSyncError):
    """A peer (coordinator, agent, daemon) cannot be reached; retrying may help."""


class KernelError(VNodeSyncError):
    """The kernel refused an operation on one of its files (a cgroup file, an lctl parameter).

    `value` is what was written, if anything; `code` the errno the kernel gave, if any.
    """

    def __init__(self, path: str, message: str, value: str | None = None, code: int | None = None):
        super().__init__(f"{path}: {message}")
        self.path = path
        self.value = value
        self.code = code


class ThreadGone(KernelError):
    """The thread or process to move has exited (ESRCH): normal while handlers come and go."""

    def __init__(self, path: str, tid: int):
        super().__init__(path, f"thread {tid} no longer exists", value=str(tid))
        self.tid = tid


class Unsupported(VNodeSyncError):
    """The host cannot do what was asked (e.g. per-thread placement on cgroup v2)."""
