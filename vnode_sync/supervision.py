"""Supervised long-lived loops: an error is logged with context and the pass retried with
backoff; a loop that keeps failing gives up so the process exits non-zero and its service
manager (systemd Restart=on-failure, vnode-supervise) restarts it."""

import asyncio
import logging
import random
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

# Exit code of a process whose loop could not continue.
EXIT_LOOP_FAILED = 3
FIRST_RETRY_SECONDS = 0.5
MAX_RETRY_SECONDS = 30.0
FAILURES_BEFORE_GIVING_UP = 8


def retry_delay(failures: int) -> float:
    """Jittered exponential delay after `failures` failures in a row."""
    return min(MAX_RETRY_SECONDS, FIRST_RETRY_SECONDS * 2 ** (failures - 1)) * random.uniform(0.8, 1.2)


class PassSupervisor:
    """Counts failures of one loop's passes; `failed(e)` logs and returns the delay before the
    retry, or raises LoopFailed once the loop has failed too often in a row."""

    def __init__(self, name: str, context: str, give_up_after: int | None = None):
        self.name, self.context = name, context
        self.give_up_after = give_up_after or FAILURES_BEFORE_GIVING_UP
        self.failures = 0

    def succeeded(self) -> None:
        if self.failures:
            log.info("%s (%s) recovered after %d failed passes", self.name, self.context, self.failures)
        self.failures = 0

    def failed(self, error: BaseException) -> float:
        self.failures += 1
        if self.failures >= self.give_up_after:
            raise LoopFailed(f"{self.name} ({self.context}): {self.failures} passes failed in a row, "
                             f"last: {type(error).__name__}: {error}") from error
        delay = retry_delay(self.failures)
        log.error("%s pass failed (%s, %d in a row), retrying in %.1f s: %s: %s", self.name, self.context,
                  self.failures, delay, type(error).__name__, error)
        return delay


class LoopFailed(RuntimeError):
    """A supervised loop cannot continue; the process must exit non-zero."""


class LoopThreads:
    """Threads running whole loops: one that ends by an error (or ends while it should run)
    records the failure and calls `on_failure`, so the process stops and exits non-zero."""

    def __init__(self, on_failure: Callable[[], None]):
        self.on_failure = on_failure
        self.failure: str | None = None
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()

    def start(self, name: str, target: Callable[[], None]) -> None:
        def run() -> None:
            try:
                target()
            except Exception as e:  # noqa: BLE001 - reported, then the process exits non-zero
                self._fail(f"{name} loop stopped: {type(e).__name__}: {e}")
                return
            if not self._stopping.is_set():
                self._fail(f"{name} loop ended unexpectedly")

        thread = threading.Thread(target=run, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _fail(self, reason: str) -> None:
        if self.failure is None:
            self.failure = reason
            log.error("%s; exiting %d so the service manager restarts this process", reason, EXIT_LOOP_FAILED)
        self.on_failure()

    def stopping(self) -> None:
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
