"""The storage agent: one reconcile loop, one capture loop, one coordinator link."""

import functools
import logging
import os
import threading
import time

from vnode_sync.agents.config import AgentConfig
from vnode_sync.agents.handlers.base import HandlerDiscovery
from vnode_sync.agents.storage.allocation import effective_state, has_allocation, static_state
from vnode_sync.agents.storage.capture import CaptureLoop
from vnode_sync.agents.storage.link import CoordinatorLink
from vnode_sync.agents.storage.reconciler import Reconciler
from vnode_sync.agents.storage.report_interval import ReportInterval, next_look_in, next_report_in
from vnode_sync.agents.storage.state_cache import BadCache, decode_state_cache, save_state_cache
from vnode_sync.kernel import required_disk_settings
from vnode_sync.kernel.backend import LimitEnforcer
from vnode_sync.kernel.types import DeviceCapacity, DeviceNumber
from vnode_sync.supervision import LoopFailed, Loops, run_passes
from vnode_sync.wire import vnode_pb2 as pb

log = logging.getLogger(__name__)


class StorageAgent:
    def __init__(self, config: AgentConfig, backend: LimitEnforcer, discovery: HandlerDiscovery,
                 devices: dict[str, DeviceNumber], credentials=None):
        self.config = config
        self.backend = backend
        self.discovery = discovery
        required = [required_disk_settings.parse(text) for text in config.required_disk_settings]
        self.reconciler = Reconciler(backend, discovery, dict(devices), disk_checks=functools.partial(
            required_disk_settings.unmet, dict(devices), required, config.proc_root) if required else list)
        # Which devices are the node's is known before the first state (a cgroup backend needs them
        # to tell whether it can share by weight); their capacities come with each state.
        backend.set_capacities([DeviceCapacity(dev) for dev in sorted(devices.values())])
        self._lock = threading.Lock()
        self.capture = CaptureLoop(self.reconciler, discovery, config.capture_seconds, self._lock)
        self._new_state = threading.Event()
        # The newest state not yet applied; handed over under its own lock, so a state the link
        # receives while a pass applies an older one is never lost.
        self._pending: pb.DesiredState | None = None
        self._pending_lock = threading.Lock()
        self._stop = threading.Event()
        self.refusal: str | None = None
        self._failed_state: pb.DesiredState | None = None   # the state a failing pass was applying
        self.loops = Loops(on_failure=self._stop_after_failure)
        # Since when the coordinator is out of reach (monotonic; None while its stream is up): an
        # allocation is kept this long at most (Allocation.fallback_seconds), then the static shares.
        self._cut_off_since: float | None = None
        self._received: pb.DesiredState | None = None   # the last state applied, as the coordinator sent it
        self.failed_passes = 0   # reconcile passes that raised (retried with backoff), for metrics
        # monotonic: when the next resync, report, and look for a sharp move in demand are due
        self._next_resync = self._next_report = self._next_probe = 0.0
        self._look_cpu = 0.0   # CPU of the last look between reports (report_interval.next_look_in)
        self._interval = ReportInterval()              # what the next report is measured under
        self.link = CoordinatorLink(config.coordinator, self._registration, self._from_coordinator, credentials,
                                    on_disconnect=self._disconnected)

    def _stop_after_failure(self) -> None:
        self._stop.set()
        self._new_state.set()

    def _registration(self) -> pb.RegisterRequest:
        return pb.RegisterRequest(
            node_id=self.config.node_id, backend=self.backend.name,
            limitations=self.backend.limitations(),
            shares_by_weight=bool(getattr(self.backend, "shares_by_weight", False)),
            shares_per_node=bool(getattr(self.backend, "shares_per_node", False)),
            devices=[pb.Device(name=name, major=dev.major, minor=dev.minor)
                     for name, dev in sorted(self.reconciler.devices.items())])

    def _from_coordinator(self, state: pb.DesiredState) -> None:
        if self._cut_off_since is not None:
            self.reconciler.summaries.want_full()   # back after a cut: the coordinator may know nothing of us
        self._cut_off_since = None
        self._receive(state)

    def _disconnected(self) -> None:
        if self._cut_off_since is None:
            self._cut_off_since = time.monotonic()

    def _receive(self, state: pb.DesiredState) -> None:
        with self._pending_lock:
            self._pending = state
        self._new_state.set()

    def _take_pending(self) -> pb.DesiredState | None:
        with self._pending_lock:
            state, self._pending = self._pending, None
        return state

    def _retry_later(self, state: pb.DesiredState | None) -> None:
        """Keep `state` for the next pass unless a newer one arrived meanwhile."""
        with self._pending_lock:
            if self._pending is None:
                self._pending = state

    def _load_cached_state(self) -> pb.DesiredState | None:
        path = self.config.state_cache
        if not path or not os.path.exists(path):
            return None
        try:
            with open(path, "rb") as f:
                state = decode_state_cache(f.read())
        except (OSError, BadCache) as e:  # a bad cache must not undo the kernel's current limits
            log.warning("ignoring state cache %s: %s; keeping the kernel's current limits until the "
                        "coordinator answers", path, e)
            return None
        if state.node_id != self.config.node_id:
            log.warning("ignoring state cache %s: it is for node %r, not %r", path, state.node_id,
                        self.config.node_id)
            return None
        return state

    def _save_cached_state(self, state: pb.DesiredState) -> None:
        if not self.config.state_cache:
            return
        try:
            save_state_cache(self.config.state_cache, state)
        except OSError as e:  # enforcement goes on; only a restart without the coordinator loses
            log.error("node %s: cannot write state cache %s: %s", self.config.node_id, self.config.state_cache, e)

    def run(self) -> None:
        what = "limits and handler-thread placement" if self.backend.placer else "limits (no cgroup, no thread placement)"
        log.info("backend %s enforces %s; limitations: %s", self.backend.name, what,
                 "; ".join(self.backend.limitations()) or "none")
        cached = self._load_cached_state()
        if cached is not None:
            log.info("enforcing cached generation %d until the coordinator answers", cached.generation)
            self._receive(cached)  # applied by the first supervised pass
            self._cut_off_since = time.monotonic()  # its allocation, if any, holds only until the fallback
        self.loops.start_thread("coordinator-link", self.link.run)
        self.loops.start_thread("usage-reports", self.link.send_reports)
        self.loops.start_thread("capture", lambda: self.capture.run(self._stop))
        for name, loop in getattr(self.backend, "side_loops", lambda: [])():
            self.loops.start_thread(name, lambda loop=loop: loop(self._stop))
        try:
            run_passes("reconcile", f"node {self.config.node_id}, cgroups {self.config.cgroup_subtree}",
                       self._one_pass, self._stop, wait=self._new_state.wait,
                       after_failure=self._after_failed_pass)
        except LoopFailed as e:
            self.loops.fail(str(e))
        self.loops.stopping()
        self.link.stop()
        self.discovery.close()
        if self.config.teardown_on_exit:
            with self._lock:
                self.backend.teardown()
            log.info("removed every VNode under %s", self.config.cgroup_subtree)

    def _after_failed_pass(self, _error: Exception) -> None:
        """The state a failed pass was applying is retried after the backoff (unless a newer one came)."""
        self.failed_passes += 1
        if self._failed_state is not None or self.reconciler.state is not None:
            self._retry_later(self._failed_state or self.reconciler.state)
        self._next_resync = time.monotonic()
        self._new_state.set()

    def _one_pass(self) -> float:
        """One reconcile pass; returns the longest wait for a new state before the next."""
        now, applied_new = time.monotonic(), False
        if self._new_state.is_set():
            self._new_state.clear()
            state = self._take_pending()
            if state is not None and self._refuse(state):
                state = None
            if state is not None:
                self._failed_state = state
                with self._lock:
                    self.reconciler.apply(effective_state(state, self.backend.shares_by_weight))
                self._received = state
                self._failed_state = None
                self._save_cached_state(state)
                applied_new = True
                self._next_resync = now + self.config.resync_seconds
        elif self._fallback_due(now):
            self._received = static_state(self._received)
            with self._lock:
                self.reconciler.apply(effective_state(self._received, self.backend.shares_by_weight))
            self._next_resync = now + self.config.resync_seconds
        elif now >= self._next_resync and self.reconciler.state is not None:
            with self._lock:
                self.reconciler.apply(self.reconciler.state)
            self._next_resync = now + self.config.resync_seconds
        if applied_new or now >= self._next_report:
            with self._lock:
                report = self.reconciler.usage_report(self.config.node_id)
            self._send_report(report, now, next_report_in(applied_new, self.config.report_seconds))
        elif now >= self._next_probe and self._interval.may_report_early(now):
            began = time.thread_time()
            with self._lock:
                report = self.reconciler.usage_report(self.config.node_id, only_if_sharp=True)
            self._look_cpu = time.thread_time() - began
            if report is not None:
                self._send_report(report, now, self.config.report_seconds)
        if now >= self._next_probe:
            self._next_probe = now + next_look_in(self.config.probe_seconds, self._look_cpu)
        return max(0.0, min(self._next_resync, self._next_report, self._next_probe) - time.monotonic())

    def _send_report(self, report: pb.UsageReport, now: float, next_in: float) -> None:
        report.measured_allocation = self._interval.close(now, self._allocation_in_force())
        if self.refusal:
            report.errors.insert(0, self.refusal)
        self.link.report(report)
        self._next_report = now + next_in

    def _allocation_in_force(self) -> int:
        state = self._received
        return state.allocation.sequence if state is not None and has_allocation(state) else 0

    def _fallback_due(self, now: float) -> bool:
        state, since = self._received, self._cut_off_since
        if state is None or since is None or not has_allocation(state):
            return False
        if now - since < state.allocation.fallback_seconds:
            return False
        log.warning("node %s: coordinator out of reach for %.0f s: back to the static shares, or to the "
                    "priority weights on a backend that shares by weight (allocation %d dropped)",
                    self.config.node_id, now - since, state.allocation.sequence)
        return True

    def _refuse(self, state: pb.DesiredState) -> bool:
        """A state from another store, or older than the one enforced, is a fork or a rollback:
        logged as an error and reported, never quietly obeyed (the last state stays in force)."""
        current = self.reconciler.state
        if current is None or not current.store_id:
            return False
        if state.store_id != current.store_id:
            why = (f"coordinator sent state of store {state.store_id:x}, but this node enforces store "
                   f"{current.store_id:x} (generation {current.generation}): refused; if the store was "
                   f"restored or re-initialised on purpose, remove {self.config.state_cache or 'the state cache'} "
                   f"and restart this agent")
        elif state.generation < current.generation:
            why = (f"coordinator sent generation {state.generation}, older than the enforced "
                   f"{current.generation} of the same store: refused (rolled back?)")
        else:
            if self.refusal:
                log.info("node %s: coordinator state accepted again (generation %d)", self.config.node_id,
                         state.generation)
            self.refusal = None
            return False
        if why != self.refusal:
            log.error("node %s: %s", self.config.node_id, why)
        self.refusal = why
        return True

    @property
    def failure(self) -> str | None:
        """Why a loop could not continue (the process must exit non-zero), or None."""
        return self.loops.failure

    def stop(self) -> None:
        self.loops.stopping()
        self._stop.set()
        self._new_state.set()
