"""The capture loop: wait for handler threads to appear or change, then place them.

The storage agent runs it on a thread of its own; benchmarks/capture_latency.py runs this
same loop to measure it.
"""

from __future__ import annotations

import contextlib
import os
import threading

from vnode_sync.agents.handlers.base import HandlerDiscovery
from vnode_sync.agents.storage.reconciler import Reconciler
from vnode_sync.supervision import run_passes


class CaptureLoop:
    def __init__(self, reconciler: Reconciler, discovery: HandlerDiscovery, wait_seconds: float,
                 lock: threading.Lock | None = None, every_seconds: float | None = None,
                 realtime_priority: int | None = None):
        """`wait_seconds`: longest wait for a change event; `every_seconds`: instead of events, a pass
        at this interval (plain polling); `realtime_priority`: run the loop's thread SCHED_FIFO."""
        self.reconciler, self.discovery = reconciler, discovery
        self.wait_seconds, self.every_seconds, self.realtime_priority = wait_seconds, every_seconds, realtime_priority
        self.lock = lock or threading.Lock()

    def run(self, stop: threading.Event) -> None:
        if self.realtime_priority is not None:  # this thread only, not the process
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(self.realtime_priority))
        run_passes("capture", f"discovery {self.discovery.name}", lambda: self._one_pass(stop), stop)

    def _one_pass(self, stop: threading.Event) -> None:
        """Wait for a change (or the polling interval), then place the handler threads."""
        if self.every_seconds is not None:
            stop.wait(self.every_seconds)
        else:
            self.discovery.wait_for_change(self.wait_seconds)
        with self.lock:
            self.reconciler.place_handlers()

    @contextlib.contextmanager
    def running(self):
        """The loop on a daemon thread for the duration of a `with` block."""
        stop = threading.Event()
        thread = threading.Thread(target=self.run, args=(stop,), name="capture", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()
