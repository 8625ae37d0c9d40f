"""The prologue and epilogue of Slurm and PBS: tell the coordinator, within a bound, and let the job run.

Each hook logs one line saying what happened. When the coordinator cannot be reached the
event is spooled for `vnode-batch reconcile` (or the next hook) to deliver, and the hook
exits 0, unless the site set `fail_closed` (then 1: Slurm drains the node and requeues
the job, pbs_mom aborts it). A watchdog ends the hook at its time bound whatever hangs.
"""

import logging
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vnode_sync.batch import jobs
from vnode_sync.batch.client import CoordinatorClient, JobOutcome
from vnode_sync.batch.jobs import JobEvent, JobPhase
from vnode_sync.batch.settings import BatchSettings, load_settings
from vnode_sync.batch.spool import EventSpool
from vnode_sync.errors import Unavailable, VNodeSyncError

log = logging.getLogger("vnode_sync.batch")

EXIT_OK, EXIT_FAIL_CLOSED = 0, 1
# Time kept back from the bound for interpreter exit and writing the log line.
_EXIT_MARGIN_SECONDS = 0.5
# Each older spooled event gets at most this long, and only from time left over.
_SPOOL_CALL_SECONDS = 1.0


@dataclass(frozen=True)
class Hook:
    name: str
    system: str     # "slurm" or "pbs"
    phase: JobPhase
    sister: bool = False


HOOKS = {h.name: h for h in (
    Hook("slurm-prolog", "slurm", JobPhase.START),
    Hook("slurm-epilog", "slurm", JobPhase.END),
    Hook("pbs-prologue", "pbs", JobPhase.START),
    Hook("pbs-epilogue", "pbs", JobPhase.END),
    Hook("pbs-prologue.parallel", "pbs", JobPhase.START, sister=True),
    Hook("pbs-epilogue.parallel", "pbs", JobPhase.END, sister=True),
)}


class _HookLog:
    """Where a hook's lines go: stderr, and the log file, since Slurm and pbs_mom discard the output."""

    def __init__(self, hook: str):
        self.hook = hook
        self.handlers: list[logging.Handler] = []

    def open(self, log_file: str | None) -> None:
        formatter = logging.Formatter(f"%(asctime)s vnode-sync {self.hook}: %(message)s")
        formatter.converter = time.gmtime
        self.handlers.append(logging.StreamHandler(sys.stderr))
        if log_file:
            try:
                os.makedirs(os.path.dirname(log_file) or ".", exist_ok=True)
                self.handlers.append(logging.FileHandler(log_file))
            except OSError:
                pass   # a full or read-only /var/log must not stop the job
        package = logging.getLogger("vnode_sync")
        for handler in self.handlers:
            handler.setFormatter(formatter)
            package.addHandler(handler)
        package.setLevel(logging.INFO)

    def close(self) -> None:
        package = logging.getLogger("vnode_sync")
        for handler in self.handlers:
            package.removeHandler(handler)
            handler.close()
        self.handlers.clear()


def _start_watchdog(hook: str, seconds: float, settings_ref: list, exit_code: int) -> threading.Timer:
    """End the process at the bound even if a call hangs where a deadline does not reach (DNS, I/O)."""

    def expire():
        _say(settings_ref[0] if settings_ref else None, hook,
             f"gave up after {seconds:.1f}s (time bound); the job goes on", logging.ERROR)
        os._exit(exit_code)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    return timer


def _describe_outcome(event: JobEvent, outcome: JobOutcome) -> str:
    if event.phase is JobPhase.START:
        asked = f", requested {event.requested_priority}" if event.requested_priority else ""
        return (f"{event.describe()} started: user active with {outcome.running_jobs} running job(s), "
                f"job priority {outcome.effective_priority}{asked} (generation {outcome.generation})")
    state = "still active" if outcome.user_active else "inactive"
    return (f"{event.describe()} ended: user {state}, {outcome.running_jobs} job(s) left "
            f"(generation {outcome.generation})")


def deliver_spooled(client: CoordinatorClient, spool: EventSpool, time_left, running: set[str] | None = None,
                    say=lambda line: None) -> int:
    """Send spooled events while time allows; returns how many are still pending."""
    pending = spool.pending()
    for event in list(pending):
        if event.phase is JobPhase.START and running is not None and event.job_id not in running:
            spool.forget(event)   # it ended while the coordinator was away: nothing to start
            pending.remove(event)
            say(f"dropped spooled start of {event.describe()}: no longer running")
            continue
        budget = min(_SPOOL_CALL_SECONDS, time_left())
        if budget <= 0.05:
            break
        try:
            outcome = client.send(event, budget)
        except Unavailable:
            break
        except VNodeSyncError as e:   # refused for good: keeping it would block the spool forever
            say(f"dropped spooled event: {e}")
        else:
            say(f"delivered spooled event: {_describe_outcome(event, outcome)}")
        spool.forget(event)
        pending.remove(event)
    return len(pending)


def parse_event(hook: Hook, argv: Sequence[str], env: Mapping[str, str], node: str) -> JobEvent:
    if hook.system == "slurm":
        return jobs.from_slurm_env(hook.phase, env, node or None)
    return jobs.from_pbs_argv(hook.phase, argv, sister=hook.sister, node=node or None)


def _place(settings: BatchSettings, event: JobEvent, hook_name: str) -> None:
    from vnode_sync.agents.compute.placement import spawn_watcher  # only sites that enable it pay the import
    p = settings.placement
    try:
        pid = spawn_watcher(event.user, event.uid, event.job_id, p.watch_seconds, p.cgroup_root, p.cgroup_name,
                            settings.log_file)
    except OSError as e:
        _say(settings, hook_name, f"cannot start placement for {event.describe()}: {e}", logging.WARNING)
        return
    log.info("placement watcher %d started for %s", pid, event.describe())


def run_hook(hook_name: str, argv: Sequence[str], env: Mapping[str, str], config_path: str | None = None) -> int:
    """Run one hook to completion; the return value is the exit code the batch system sees."""
    started = time.monotonic()
    hook = HOOKS[hook_name]
    settings_ref: list[BatchSettings] = []
    bound = 5.0
    try:
        settings = load_settings(config_path, env)
    except VNodeSyncError as e:
        _say(None, hook_name, f"cannot read settings, doing nothing: {e}", logging.ERROR)
        return EXIT_OK
    settings_ref.append(settings)
    bound = settings.timeout_seconds
    failure = EXIT_FAIL_CLOSED if settings.fail_closed else EXIT_OK
    watchdog = _start_watchdog(hook_name, bound, settings_ref, failure)

    def time_left() -> float:
        return bound - _EXIT_MARGIN_SECONDS - (time.monotonic() - started)

    try:
        event = parse_event(hook, argv, env, settings.node)
    except VNodeSyncError as e:
        _say(settings, hook_name, f"cannot tell which job this is, doing nothing: {e}", logging.ERROR)
        watchdog.cancel()
        return failure

    spool = EventSpool(settings.spool_dir)
    code = EXIT_OK
    with CoordinatorClient(settings.coordinator) as client:
        try:
            outcome = client.send(event, time_left())
        except Unavailable as e:
            spooled = _spool(spool, event)
            _say(settings, hook_name, f"{e}; {event.describe()} runs without a change to its user's share; "
                                      f"{spooled}", logging.ERROR)
            code = failure
        except VNodeSyncError as e:
            spool.forget(event)
            _say(settings, hook_name, f"{event.describe()}: {e}", logging.ERROR)
            code = failure
        else:
            spool.forget(event)
            _say(settings, hook_name, _describe_outcome(event, outcome))
            deliver_spooled(client, spool, time_left, say=lambda line: _say(settings, hook_name, line))
    if event.phase is JobPhase.START and settings.placement.enabled:
        _place(settings, event, hook_name)
    watchdog.cancel()
    return code


def _spool(spool: EventSpool, event: JobEvent) -> str:
    try:
        path = spool.save(event)
    except OSError as e:
        return f"and it could not be spooled ({e}): run `vnode-batch reconcile` once the coordinator is back"
    return f"spooled to {path} for `vnode-batch reconcile`"
