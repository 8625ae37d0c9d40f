"""The storage agent: one reconcile loop, one capture loop, one coordinator link."""

import logging
import os
import threading
import time

from vnode_sync.agents.handlers.base import HandlerDiscovery
from vnode_sync.agents.storage.capture import CaptureLoop
from vnode_sync.agents.storage.config import AgentConfig
from vnode_sync.agents.storage.link import CoordinatorLink
from vnode_sync.agents.storage.reconciler import Reconciler
from vnode_sync.kernel.backend import LimitEnforcer
from vnode_sync.kernel.types import DeviceNumber
from vnode_sync.wire import vnode_pb2 as pb

log = logging.getLogger(__name__)


class StorageAgent:
    def __init__(self, config: AgentConfig, backend: LimitEnforcer, discovery: HandlerDiscovery,
                 devices: dict[str, DeviceNumber], credentials=None):
        self.config = config
        self.backend = backend
        self.discovery = discovery
        self.reconciler = Reconciler(backend, discovery, dict(devices))
        self._lock = threading.Lock()
        self.capture = CaptureLoop(self.reconciler, discovery, config.capture_seconds, self._lock)
        self._new_state = threading.Event()
        self._pending: pb.DesiredState | None = None
        self._stop = threading.Event()
        self.link = CoordinatorLink(config.coordinator, self._registration, self._receive, credentials)

    def _registration(self) -> pb.RegisterRequest:
        return pb.RegisterRequest(
            node_id=self.config.node_id, backend=self.backend.name,
            limitations=self.backend.limitations(),
            devices=[pb.Device(name=name, major=dev.major, minor=dev.minor)
                     for name, dev in sorted(self.reconciler.devices.items())])

    def _receive(self, state: pb.DesiredState) -> None:
        self._pending = state
        self._new_state.set()

    def _load_cached_state(self) -> pb.DesiredState | None:
        if not self.config.state_cache or not os.path.exists(self.config.state_cache):
            return None
        state = pb.DesiredState()
        try:
            with open(self.config.state_cache, "rb") as f:
                state.ParseFromString(f.read())
        except Exception as e:  # a torn or foreign file must not stop enforcement start-up
            log.warning("ignoring unreadable state cache %s: %s", self.config.state_cache, e)
            return None
        return state if state.node_id == self.config.node_id else None

    def _save_cached_state(self, state: pb.DesiredState) -> None:
        if not self.config.state_cache:
            return
        tmp = self.config.state_cache + ".tmp"
        os.makedirs(os.path.dirname(os.path.abspath(tmp)), exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(state.SerializeToString())
        os.replace(tmp, self.config.state_cache)

    def run(self) -> None:
        what = "limits and handler-thread placement" if self.backend.placer else "limits (no cgroup, no thread placement)"
        log.info("backend %s enforces %s; limitations: %s", self.backend.name, what,
                 "; ".join(self.backend.limitations()) or "none")
        cached = self._load_cached_state()
        if cached is not None:
            log.info("enforcing cached generation %d until the coordinator answers", cached.generation)
            with self._lock:
                self.reconciler.apply(cached)
        threads = [threading.Thread(target=self.link.run, name="coordinator-link", daemon=True),
                   threading.Thread(target=self.capture.run, args=(self._stop,), name="capture", daemon=True)]
        for t in threads:
            t.start()
        next_resync = next_report = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            applied_new = False
            if self._new_state.is_set():
                self._new_state.clear()
                state = self._pending
                with self._lock:
                    self.reconciler.apply(state)
                self._save_cached_state(state)
                applied_new = True
                next_resync = now + self.config.resync_seconds
            elif now >= next_resync and self.reconciler.state is not None:
                with self._lock:
                    self.reconciler.apply(self.reconciler.state)
                next_resync = now + self.config.resync_seconds
            if applied_new or now >= next_report:
                with self._lock:
                    report = self.reconciler.usage_report(self.config.node_id)
                self.link.report(report)
                next_report = now + self.config.report_seconds
            timeout = max(0.0, min(next_resync, next_report) - time.monotonic())
            self._new_state.wait(timeout)
        self.link.stop()
        self.discovery.close()
        if self.config.teardown_on_exit:
            with self._lock:
                self.backend.teardown()
            log.info("removed every VNode under %s", self.config.cgroup_subtree)

    def stop(self) -> None:
        self._stop.set()
        self._new_state.set()
