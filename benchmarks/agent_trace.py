"""--trace for the DataNode benchmarks: every 0.1 s, one line of what one Java agent's dispatchers see
(each user's MB/s and the time its threads waited, then each volume's depth, packets waiting and what
it moved)."""

import contextlib
import threading
import time
from typing import NamedTuple, TextIO

from vnode_sync.datanode.channel import Stats, ThrottleChannel

MB = 1_000_000
TRACE_SECONDS = 0.1
_TRACE_WRITE = threading.Lock()   # tracers of several DataNodes may share one file


class _Counts(NamedTuple):
    moved: int     # bytes
    waited: int    # ns its threads waited for their ceiling or a slot


def trace_line(label: str, at: float, seconds: float, stats: Stats, before: dict[str, _Counts],
               users: dict[str, str], direction: str) -> str:
    """One --trace line: per role (USERS: role -> user name) MB/s and the seconds per second its threads
    waited, then each volume's depth, packets waiting and MB/s (reads and writes)."""
    parts = [f"{label:<11} {at:6.1f} s"]
    for role, name in users.items():
        now, then = _counts(stats, name, direction), before.get(name, _Counts(0, 0))
        parts.append(f"{role} {(now.moved - then.moved) / seconds / MB:7.1f} "
                     f"(waits {(now.waited - then.waited) / 1e9 / seconds:4.2f})")
    for queue in stats.volumes:
        parts.append(f"{queue.volume[:12]} depth {queue.depth} waiting {queue.waiting} "
                     f"{queue.moved_bytes_per_second / MB:6.1f} MB/s")
    return "  ".join(parts) + "\n"


def _counts(stats: Stats, name: str, direction: str) -> _Counts:
    c = stats.users.get(name)
    if c is None:
        return _Counts(0, 0)
    return _Counts(getattr(c, f"{direction}_bytes"), getattr(c, f"{direction}_wait_ns"))


def trace_until(channel: ThrottleChannel, users: dict[str, str], direction: str, stop: threading.Event,
                out: TextIO, label: str) -> None:
    """Every TRACE_SECONDS until STOP: one line of one agent's view (see --trace); USERS: role -> user name."""
    began, last, before = time.monotonic(), None, {}
    while not stop.wait(TRACE_SECONDS):
        stats, now = channel.stats(), time.monotonic()
        if last is not None:
            line = trace_line(label, now - began, now - last, stats, before, users, direction)
            with _TRACE_WRITE:
                out.write(line)
        last, before = now, {name: _counts(stats, name, direction) for name in users.values()}


@contextlib.contextmanager
def tracing(channel: ThrottleChannel, users: dict[str, str], direction: str, out: TextIO | None, label: str):
    """trace_until in a thread for the body's length (nothing when OUT is None)."""
    if out is None:
        yield
        return
    stop = threading.Event()
    tracer = threading.Thread(target=trace_until, args=(channel, users, direction, stop, out, label), daemon=True)
    tracer.start()
    try:
        yield
    finally:
        stop.set()
        tracer.join()   # its last line before the next one's first
