"""A tracefs instance of a run's own: kernel tracepoints recorded into a buffer no other tracer shares.

    with TraceInstance(run_name, {"block/block_rq_issue": "dev == 7340035"}) as trace:
        ...                      # what is traced
    lines = trace.lines          # the buffer as text, read when the block ended

The instance carries the run's name (testbed.names), so testbed.leftovers finds and removes a
crashed run's. tracefs is mounted at /sys/kernel/tracing for the block if it is not. Needs root.
"""

import contextlib
import os
import subprocess

TRACEFS = "/sys/kernel/tracing"
INSTANCES = os.path.join(TRACEFS, "instances")
BUFFER_KB = 32768   # per CPU


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


class TraceInstance:
    """Records `events` ({"system/event": filter or ""}) on the monotonic clock while in use."""

    def __init__(self, run: str, events: dict[str, str], buffer_kb: int = BUFFER_KB):
        self.path = os.path.join(INSTANCES, run)
        self.events, self.buffer_kb = events, buffer_kb
        self.lines: list[str] = []
        self._mounted = False

    def __enter__(self) -> "TraceInstance":
        if not os.path.isdir(INSTANCES):
            subprocess.run(["mount", "-t", "tracefs", "tracefs", TRACEFS], check=True)
            self._mounted = True
        try:
            os.mkdir(self.path)
            _write(os.path.join(self.path, "trace_clock"), "mono")
            _write(os.path.join(self.path, "buffer_size_kb"), str(self.buffer_kb))
            for event, condition in self.events.items():
                directory = os.path.join(self.path, "events", event)
                if condition:
                    _write(os.path.join(directory, "filter"), condition)
                _write(os.path.join(directory, "enable"), "1")
            _write(os.path.join(self.path, "tracing_on"), "1")
        except BaseException:
            self._remove()
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            _write(os.path.join(self.path, "tracing_on"), "0")
            with open(os.path.join(self.path, "trace")) as f:
                self.lines = f.read().splitlines()
        finally:
            self._remove()

    def _remove(self) -> None:
        remove_instance(self.path)
        if self._mounted:
            subprocess.run(["umount", TRACEFS], check=False)


def remove_instance(path: str) -> None:
    """Stop and remove a tracefs instance; its events go off first (the kernel refuses rmdir while one is on)."""
    if not os.path.isdir(path):
        return
    with contextlib.suppress(OSError):
        _write(os.path.join(path, "tracing_on"), "0")
    with contextlib.suppress(OSError):
        _write(os.path.join(path, "events", "enable"), "0")
    os.rmdir(path)


def instances() -> list[str]:
    """The paths of the tracefs instances there are now (none if tracefs is not mounted)."""
    if not os.path.isdir(INSTANCES):
        return []
    return [os.path.join(INSTANCES, name) for name in sorted(os.listdir(INSTANCES))]
