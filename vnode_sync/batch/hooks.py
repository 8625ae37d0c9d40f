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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from vnode_sync.batch import jobs
from vnode_sync.batch.client import CoordinatorClient, JobOutcome
from vnode_sync.batch.jobs import JobEvent, JobPhase
from vnode_sync.batch.settings import BatchSettings, load_settings
from vnode_sync.batch.spool import EventSpool
from vnode_sync.errors import Unavailable, VNodeSyncError

log = logging.getLogger(__name__)

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


def _start_watchdog(seconds: float, exit_code: int) -> threading.Timer:
    """End the process at the bound even if a call hangs where a deadline does not reach (DNS, I/O)."""

    def expire():
        log.error("gave up at the hook's time bound; the job goes on")
        os._exit(exit_code)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    return timer


def _describe_outcome(event: JobEvent, outcome: JobOutcome) -> str:
    if event.phase is JobPhase.START:
        asked = f", requested {event.requested_priority}" if event.requested_priority else ""
        rates = "".join(f", {what} {asked / 1e6:.1f} MB/s" + ("" if asked == held else f" asked, {held / 1e6:.1f} in force")
                        for what, asked, held in (("reservation", event.requested_reservation, outcome.reservation_bps),
                                                  ("limit", event.requested_limit, outcome.limit_bps)) if asked)
        return (f"{event.describe()} started: user active with {outcome.running_jobs} running job(s), "
                f"job priority {outcome.effective_priority}{asked}{rates} (generation {outcome.generation})")
    state = "still active" if outcome.user_active else "inactive"
    return (f"{event.describe()} ended: user {state}, {outcome.running_jobs} job(s) left "
            f"(generation {outcome.generation})")


def deliver_spooled(client: CoordinatorClient, spool: EventSpool, time_left: Callable[[], float],
                    running: set[str] | None = None) -> int:
    """Send spooled events while time allows; returns how many are still pending.

    With `running` (the batch system's list) a spooled start of a job that has ended since
    is dropped instead of sent.
    """
    pending = spool.pending()
    for event in list(pending):
        if event.phase is JobPhase.START and running is not None and event.job_id not in running:
            spool.forget(event)
            pending.remove(event)
            log.info("dropped spooled start of %s: no longer running", event.describe())
            continue
        budget = min(_SPOOL_CALL_SECONDS, time_left())
        if budget <= 0.05:
            break
        try:
            outcome = client.send(event, budget)
        except Unavailable:
            break
        except VNodeSyncError as e:   # refused for good: keeping it would block the spool forever
            log.warning("dropped spooled event: %s", e)
        else:
            log.info("delivered spooled event: %s", _describe_outcome(event, outcome))
        spool.forget(event)
        pending.remove(event)
    return len(pending)


def parse_event(hook: Hook, argv: Sequence[str], env: Mapping[str, str], node: str) -> JobEvent:
    if hook.system == "slurm":
        return jobs.from_slurm_env(hook.phase, env, node or None)
    return jobs.from_pbs_argv(hook.phase, argv, sister=hook.sister, node=node or None)


def _place(settings: BatchSettings, event: JobEvent) -> None:
    from vnode_sync.agents.compute.placement import spawn_watcher  # only sites that enable it pay the import
    p = settings.placement
    try:
        pid = spawn_watcher(event.user, event.uid, event.job_id, p.watch_seconds, p.cgroup_root, p.cgroup_name,
                            settings.log_file)
    except OSError as e:
        log.warning("cannot start placement for %s: %s", event.describe(), e)
        return
    log.info("placing %s in its user's VNode (watcher pid %d, %.0fs)", event.describe(), pid, p.watch_seconds)


def _spool(spool: EventSpool, event: JobEvent) -> str:
    try:
        path = spool.save(event)
    except OSError as e:
        return f"it could not be spooled ({e}): run `vnode-batch reconcile` once the coordinator is back"
    return f"spooled to {path} for `vnode-batch reconcile`"


def run_hook(hook_name: str, argv: Sequence[str], env: Mapping[str, str], config_path: str | None = None,
             started: float | None = None) -> int:
    """Run one hook to completion; the return value is the exit code the batch system sees.

    `started` (time.monotonic) is when the process began; the time bound counts from there.
    """
    started = time.monotonic() if started is None else started
    hook = HOOKS[hook_name]
    hook_log = _HookLog(hook_name)
    try:
        settings = load_settings(config_path, env)
    except VNodeSyncError as e:
        hook_log.open(None)
        log.error("cannot read settings, doing nothing: %s", e)
        hook_log.close()
        return EXIT_OK
    hook_log.open(settings.log_file)
    failure = EXIT_FAIL_CLOSED if settings.fail_closed else EXIT_OK
    watchdog = _start_watchdog(max(settings.timeout_seconds - (time.monotonic() - started), 0.1), failure)
    try:
        return _run(hook, argv, env, settings, started, failure)
    finally:
        watchdog.cancel()
        hook_log.close()


def _run(hook: Hook, argv: Sequence[str], env: Mapping[str, str], settings: BatchSettings, started: float,
         failure: int) -> int:
    def time_left() -> float:
        return settings.timeout_seconds - _EXIT_MARGIN_SECONDS - (time.monotonic() - started)

    try:
        event = parse_event(hook, argv, env, settings.node)
    except VNodeSyncError as e:
        # Not a job we can name (e.g. root's): failing it, even fail-closed, would help no one.
        log.error("nothing to do for this job: %s", e)
        return EXIT_OK
    spool = EventSpool(settings.spool_dir)
    code = EXIT_OK
    try:
        client = CoordinatorClient(settings.coordinator, settings.security)
    except VNodeSyncError as e:
        log.error("%s; %s is not reported; %s", e, event.describe(), _spool(spool, event))
        return failure
    with client:
        try:
            outcome = client.send(event, time_left())
        except Unavailable as e:
            log.error("%s; %s runs without a change to its user's share; %s", e, event.describe(),
                      _spool(spool, event))
            code = failure
        except VNodeSyncError as e:
            spool.forget(event)
            log.error("%s: %s", event.describe(), e)
            code = failure
        else:
            spool.forget(event)
            log.info("%s", _describe_outcome(event, outcome))
            deliver_spooled(client, spool, time_left)
    if event.phase is JobPhase.START and settings.placement.enabled and code == EXIT_OK:  # else it never runs
        _place(settings, event)
    return code
