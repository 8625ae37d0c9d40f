"""One way to run a long-lived loop, on a thread or as an asyncio task.

A loop is a series of passes. A pass that raises is logged with the loop's name and context and
retried after a jittered, capped exponential backoff; a loop whose passes keep failing gives up
(LoopFailed). `Loops` runs a process's loops: one that gives up or ends while it should run
records why and stops the process, which exits EXIT_LOOP_FAILED so its service manager
(systemd Restart=on-failure, vnode-supervise) restarts it.
"""

import asyncio
import logging
import random
import threading
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

# Exit code of a process whose loop could not continue.
EXIT_LOOP_FAILED = 3
FIRST_RETRY_SECONDS = 0.5
MAX_RETRY_SECONDS = 30.0
FAILURES_BEFORE_GIVING_UP = 8

# What a pass returns: seconds to wait before the next pass (None or 0: go on at once).
Pause = float | None


class Backoff:
    """Jittered (±20 %) exponential delays from `first` doubling up to `cap`; `reset` after a success."""

    def __init__(self, first: float | None = None, cap: float | None = None):
        self.first = FIRST_RETRY_SECONDS if first is None else first
        self.cap = MAX_RETRY_SECONDS if cap is None else cap
        self._current = self.first

    def next(self) -> float:
        delay = self._current * random.uniform(0.8, 1.2)
        self._current = min(self.cap, self._current * 2)
        return delay

    def reset(self) -> None:
        self._current = self.first


class LoopFailed(RuntimeError):
    """A supervised loop cannot continue; the process must exit non-zero."""


class PassSupervisor:
    """Counts one loop's failed passes in a row: `failed(e)` logs and returns the delay before the
    retry, or raises LoopFailed once the loop has failed `give_up_after` times in a row."""

    def __init__(self, name: str, context: str, give_up_after: int | None = None):
        self.name, self.context = name, context
        self.give_up_after = give_up_after or FAILURES_BEFORE_GIVING_UP
        self.failures = 0
        self._backoff = Backoff()

    def succeeded(self) -> None:
        if self.failures:
            log.info("%s (%s) recovered after %d failed passes", self.name, self.context, self.failures)
        self.failures = 0
        self._backoff.reset()

    def failed(self, error: BaseException) -> float:
        self.failures += 1
        if self.failures >= self.give_up_after:
            raise LoopFailed(f"{self.name} ({self.context}): {self.failures} passes failed in a row, "
                             f"last: {type(error).__name__}: {error}") from error
        delay = self._backoff.next()
        log.error("%s pass failed (%s, %d in a row), retrying in %.1f s: %s: %s", self.name, self.context,
                  self.failures, delay, type(error).__name__, error)
        return delay


def run_passes(name: str, context: str, one_pass: Callable[[], Pause], stop: threading.Event, *,
               wait: Callable[[float], object] | None = None,
               after_failure: Callable[[Exception], None] | None = None) -> None:
    """Run `one_pass` on this thread until `stop` is set; raises LoopFailed when passes keep failing.

    A pass returns how long to wait before the next; `wait(seconds)` waits (default `stop.wait`; a
    loop that should wake early waits on its own event). After a failed pass, `after_failure(e)`
    runs and the retry waits out the backoff on `stop`.
    """
    supervisor = PassSupervisor(name, context)
    wait = wait or stop.wait
    while not stop.is_set():
        try:
            pause = one_pass()
        except LoopFailed:
            raise
        except Exception as e:  # noqa: BLE001 - logged with context, retried with backoff
            delay = supervisor.failed(e)
            if after_failure is not None:
                after_failure(e)
            stop.wait(delay)
            continue
        supervisor.succeeded()
        if pause:
            wait(pause)


async def run_passes_async(name: str, context: str, one_pass: Callable[[], Awaitable[Pause]]) -> None:
    """Run `await one_pass()` until cancelled; raises LoopFailed when passes keep failing. A pass
    returns how long to sleep before the next; a failed one is retried after the backoff."""
    supervisor = PassSupervisor(name, context)
    while True:
        try:
            pause = await one_pass()
        except (LoopFailed, asyncio.CancelledError):
            raise
        except Exception as e:  # noqa: BLE001 - logged with context, retried with backoff
            await asyncio.sleep(supervisor.failed(e))
            continue
        supervisor.succeeded()
        if pause:
            await asyncio.sleep(pause)


class Loops:
    """A process's long-lived loops, on threads or asyncio tasks. One that ends by an error (or
    ends while it should run) records the failure and calls `on_failure`, so the process stops
    and exits EXIT_LOOP_FAILED."""

    def __init__(self, on_failure: Callable[[], None]):
        self.on_failure = on_failure
        self.failure: str | None = None
        self._threads: list[threading.Thread] = []
        self.tasks: list[asyncio.Task] = []
        self._stopping = threading.Event()

    def start_thread(self, name: str, target: Callable[[], None], daemon: bool = True) -> threading.Thread:
        def run() -> None:
            try:
                target()
            except Exception as e:  # noqa: BLE001 - reported, then the process exits non-zero
                self._ended(name, e)
                return
            self._ended(name)

        thread = threading.Thread(target=run, name=name, daemon=daemon)
        self._threads.append(thread)
        thread.start()
        return thread

    def start_task(self, name: str, loop: Callable[[], Awaitable[None]]) -> asyncio.Task:
        """Run `loop()` as a task of the running event loop."""
        async def run() -> None:
            try:
                await loop()
            except Exception as e:  # noqa: BLE001 - reported, then the process exits non-zero
                self._ended(name, e)
                return
            self._ended(name)

        task = asyncio.get_running_loop().create_task(run(), name=name)
        self.tasks.append(task)
        return task

    def _ended(self, name: str, error: Exception | None = None) -> None:
        if error is None:
            if not self._stopping.is_set():
                self.fail(f"{name} loop ended unexpectedly")
            return
        if not isinstance(error, LoopFailed):   # a bug, not a pass that kept failing: its traceback
            log.error("%s loop raised", name, exc_info=error)
        self.fail(f"{name} loop stopped: {type(error).__name__}: {error}")

    def fail(self, reason: str) -> None:
        """A loop cannot go on: record the first reason and stop the process."""
        if self.failure is None:
            self.failure = reason
            log.error("%s; exiting %d so the service manager restarts this process", reason, EXIT_LOOP_FAILED)
        self.on_failure()

    def stopping(self) -> None:
        """The process is stopping: loops that end now end as they should."""
        self._stopping.set()

    def join(self, timeout: float) -> None:
        for thread in self._threads:
            thread.join(timeout)


async def set_within(event: asyncio.Event, seconds: float) -> bool:
    """Whether `event` is set within `seconds`. Not asyncio.wait_for: on Python 3.11 it loses a
    cancellation that arrives as the event is set (cpython #86296): a cancelled loop would go on."""
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
        return True
    except TimeoutError:
        return False
