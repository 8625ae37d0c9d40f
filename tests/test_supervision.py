"""The one way to run a loop (vnode_sync.supervision): a failed pass is logged with context and
retried after a backoff; a loop that keeps failing, or ends while it should run, stops the process."""

import asyncio
import logging
import threading

import pytest

from vnode_sync import supervision
from vnode_sync.supervision import Backoff, LoopFailed, Loops, run_passes, run_passes_async


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch):
    monkeypatch.setattr(supervision, "FIRST_RETRY_SECONDS", 0.01)
    monkeypatch.setattr(supervision, "FAILURES_BEFORE_GIVING_UP", 3)


def _failing_first(times: int, then=None):
    passes = []

    def one_pass():
        passes.append(1)
        if len(passes) <= times:
            raise OSError(f"injected failure {len(passes)}")
        return then() if then else None
    return one_pass, passes


def test_a_failed_pass_is_logged_with_context_and_retried(caplog):
    stop, failures = threading.Event(), []
    one_pass, passes = _failing_first(2, then=lambda: len(passes) >= 4 and stop.set())
    with caplog.at_level(logging.ERROR):
        run_passes("reconcile", "node n1", one_pass, stop, after_failure=failures.append)
    assert len(passes) == 4 and [str(e) for e in failures] == ["injected failure 1", "injected failure 2"]
    logged = [r.getMessage() for r in caplog.records]
    assert "reconcile pass failed (node n1, 1 in a row)" in logged[0] and "injected failure 1" in logged[0]


def test_a_loop_whose_passes_keep_failing_gives_up():
    one_pass, passes = _failing_first(100)
    with pytest.raises(LoopFailed, match=r"capture \(discovery hdfs\): 3 passes failed in a row"):
        run_passes("capture", "discovery hdfs", one_pass, threading.Event())
    assert len(passes) == 3


def test_a_success_between_failures_starts_the_count_again():
    outcomes = iter([OSError, OSError, None, OSError, OSError, None])
    stop = threading.Event()

    def one_pass():
        outcome = next(outcomes, "done")
        if outcome == "done":
            stop.set()
        elif outcome:
            raise outcome("injected")
    run_passes("reports", "compute node c1", one_pass, stop)   # 2 in a row, never 3


def test_the_async_loop_retries_then_gives_up():
    one_pass, passes = _failing_first(100)

    async def failing():
        one_pass()
    with pytest.raises(LoopFailed, match="3 passes failed in a row"):
        asyncio.run(run_passes_async("publisher", "fan-out", failing))
    assert len(passes) == 3


def test_backoff_doubles_to_its_cap_with_jitter_and_resets():
    backoff = Backoff(first=1.0, cap=4.0)
    delays = [backoff.next() for _ in range(5)]
    for delay, base in zip(delays, (1, 2, 4, 4, 4)):
        assert 0.8 * base <= delay <= 1.2 * base
    backoff.reset()
    assert backoff.next() <= 1.2


def test_a_task_or_thread_that_ends_stops_the_process_unless_it_is_stopping():
    stopped = []
    loops = Loops(on_failure=lambda: stopped.append(loops.failure))

    async def broken():
        raise KeyError("bug")

    async def run():
        await asyncio.wait([loops.start_task("allocation", broken)])
    asyncio.run(run())
    assert stopped == ["allocation loop stopped: KeyError: 'bug'"]

    quiet = Loops(on_failure=lambda: stopped.append("quiet"))
    quiet.stopping()
    quiet.start_thread("capture", lambda: None).join(5)
    assert stopped == ["allocation loop stopped: KeyError: 'bug'"], "a loop may end once stopping"
    ended = Loops(on_failure=lambda: stopped.append(ended.failure))
    ended.start_thread("capture", lambda: None).join(5)
    assert stopped[-1] == "capture loop ended unexpectedly"
