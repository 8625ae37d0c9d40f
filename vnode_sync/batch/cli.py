"""vnode-batch: batch-system hooks that make a user's share active while the user has a running job.

Install (as root, on every compute node):
  python -m vnode_sync.batch install-hooks --slurm /etc/slurm/vnode-sync
      writes slurm-prolog and slurm-epilog; in slurm.conf set
      Prolog=/etc/slurm/vnode-sync/slurm-prolog  Epilog=/etc/slurm/vnode-sync/slurm-epilog
      PrologFlags=Alloc (the share is active before the job's first step).
  python -m vnode_sync.batch install-hooks --pbs /var/spool/torque/mom_priv
      writes prologue, epilogue, prologue.parallel and epilogue.parallel (root, mode 0500,
      as pbs_mom requires).
The wrappers call this venv's interpreter by absolute path, so they work with the empty
environment pbs_mom gives them. Settings: /etc/vnode-sync/batch.yaml (coordinator address,
timeout_seconds, fail_closed, spool_dir, log_file, placement); $VNODE_COORDINATOR overrides.

Failure policy: if the coordinator cannot be reached within timeout_seconds (default 5),
the hook logs one line, spools the event and exits 0: the job runs, its user's share is
not changed until `reconcile` (or a later hook) delivers it. With fail_closed: true it exits
1 instead. Beware: Slurm DRAINS THE NODE and requeues the job when a Prolog exits non-zero
or passes PrologEpilogTimeout; pbs_mom aborts or requeues the job.

Reconcile (cron every minute, or --every 60, on every compute node):
  python -m vnode_sync.batch reconcile --system slurm     (or --system pbs --pbs-home DIR)
delivers spooled events, (re)starts every job the batch system says runs here and makes the
coordinator drop any job of this node that no longer runs (a lost epilogue). Each pass also
confirms the running jobs: the coordinator drops a job nobody confirmed for
policy.job_expiry_seconds, so without reconcile a job longer than that loses its share.
"""

import argparse
import logging
import os
import shlex
import signal
import sys
import threading
import time

from vnode_sync.batch.client import CoordinatorClient
from vnode_sync.batch.hooks import HOOKS, deliver_spooled, run_hook
from vnode_sync.batch.jobs import local_node_name
from vnode_sync.batch.running import RunningJobs, pbs_running_jobs, slurm_running_jobs
from vnode_sync.batch.settings import BatchSettings, load_settings
from vnode_sync.batch.spool import EventSpool
from vnode_sync.durable import write_atomically
from vnode_sync.distribution import version
from vnode_sync.errors import Unavailable, VNodeSyncError
from vnode_sync.logs import configure

log = logging.getLogger(__name__)

SLURM_WRAPPERS = {"slurm-prolog": "slurm-prolog", "slurm-epilog": "slurm-epilog"}
PBS_WRAPPERS = {"prologue": "pbs-prologue", "epilogue": "pbs-epilogue",
                "prologue.parallel": "pbs-prologue.parallel", "epilogue.parallel": "pbs-epilogue.parallel"}
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
# No job waits for reconcile, but a cron pass must end before the next one starts.
RECONCILE_BOUND_SECONDS = 30.0


def wrapper_text(hook: str, python: str, config: str | None) -> str:
    """A /bin/sh wrapper that needs no environment and exits 0 even if the interpreter is gone."""
    config_args = f" --config {shlex.quote(config)}" if config else ""
    py = shlex.quote(python)
    return (f"#!/bin/sh\n"
            f"# vnode-sync {hook}, written by `vnode-batch install-hooks`.\n"
            f"[ -x {py} ] || {{ echo \"vnode-sync {hook}: {python} is missing; the job goes on\" >&2; exit 0; }}\n"
            f"exec {py} -I -m vnode_sync.batch hook{config_args} {hook} \"$@\"\n")


def install_hooks(directory: str, wrappers: dict[str, str], config: str | None,
                  python: str = sys.executable, mode: int = 0o755) -> list[str]:
    os.makedirs(directory, exist_ok=True)
    written = []
    for filename, hook in wrappers.items():
        path = os.path.join(directory, filename)
        text = wrapper_text(hook, os.path.abspath(python), os.path.abspath(config) if config else None)
        write_atomically(path, text.encode(), mode)
        written.append(path)
    return written


def reconcile(settings: BatchSettings, system: str | None, node: str, pbs_home: str) -> int:
    """One pass: spool out, every running job (re)started, the rest of this node's jobs dropped."""
    started = time.monotonic()

    def time_left() -> float:
        return max(RECONCILE_BOUND_SECONDS - (time.monotonic() - started), 0)

    running: RunningJobs | None = None
    try:
        if system == "slurm":
            running = slurm_running_jobs(node, settings.timeout_seconds)
        elif system == "pbs":
            running = pbs_running_jobs(pbs_home)
    except Unavailable as e:
        log.warning("cannot list running jobs (%s); only spooled events are delivered", e)
    spool = EventSpool(settings.spool_dir)
    with CoordinatorClient(settings.coordinator, settings.security) as client:
        left = deliver_spooled(client, spool, time_left, set(running.job_ids) if running else None)
        if left:
            log.error("coordinator at %s unreachable; %d event(s) stay spooled in %s", settings.coordinator,
                      left, settings.spool_dir)
            return EXIT_FAILED
        if running is None:
            return EXIT_OK
        try:
            for event in running.starts:
                client.send(event, time_left())
            dropped = client.reconcile(node, running.job_ids, time_left())
        except VNodeSyncError as e:
            log.error("%s", e)
            return EXIT_FAILED
    log.info("node %s: %d running job(s) confirmed%s", node, len(running.job_ids),
             f", dropped ended job(s) {', '.join(dropped)}" if dropped else ", nothing dropped")
    return EXIT_OK


def _hook_main(argv: list[str], started: float | None) -> int:
    # Parsed by hand: everything after the hook name is pbs_mom's argv, which may hold anything.
    config = None
    if argv[:1] == ["--config"] and len(argv) >= 2:
        config, argv = argv[1], argv[2:]
    if not argv or argv[0] not in HOOKS:
        print(f"vnode-batch hook: expected one of {', '.join(HOOKS)}, got {argv[:1]}", file=sys.stderr)
        return EXIT_OK   # a miswired hook must not fail jobs either
    return run_hook(argv[0], argv[1:], dict(os.environ), config, started)


def main(argv: list[str] | None = None, started: float | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["hook"]:
        return _hook_main(argv[1:], started)
    parser = argparse.ArgumentParser(prog="vnode-batch", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="batch YAML (default /etc/vnode-sync/batch.yaml if present)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("hook", help="run a hook: hook [--config FILE] NAME [pbs_mom's arguments]")
    p = sub.add_parser("install-hooks", help="write the hook wrappers")
    p.add_argument("--slurm", metavar="DIR", help="write slurm-prolog and slurm-epilog here")
    p.add_argument("--pbs", metavar="MOM_PRIV", help="write prologue, epilogue and their .parallel here")
    p.add_argument("--hook-config", help="batch YAML the wrappers pass on (default: none, i.e. the default path)")
    p = sub.add_parser("reconcile", help="deliver spooled events and confirm this node's running jobs")
    p.add_argument("--system", choices=("slurm", "pbs"), help="where to read the running jobs from")
    p.add_argument("--pbs-home", default="/var/spool/torque", help="PBS_HOME holding mom_priv/jobs")
    p.add_argument("--node", help="this node's name (default: the config's node, else the short host name)")
    p.add_argument("--every", type=float, metavar="SECONDS",
                   help="repeat until SIGTERM (where no cron runs); keep well below the coordinator's "
                        "job_expiry_seconds, since each pass also confirms the running jobs")
    args = parser.parse_args(argv)
    configure("vnode-batch")
    try:
        if args.command == "install-hooks":
            if not (args.slurm or args.pbs):
                parser.error("install-hooks needs --slurm DIR and/or --pbs MOM_PRIV")
            written = []
            if args.slurm:
                written += install_hooks(args.slurm, SLURM_WRAPPERS, args.hook_config)
            if args.pbs:
                written += install_hooks(args.pbs, PBS_WRAPPERS, args.hook_config, mode=0o500)
            for path in written:
                print(path)
            return EXIT_OK
        settings = load_settings(args.config)
        node = args.node or settings.node or local_node_name()
        if not args.every:
            return reconcile(settings, args.system, node, args.pbs_home)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        while True:
            reconcile(settings, args.system, node, args.pbs_home)
            if stop.wait(args.every):
                return EXIT_OK
    except VNodeSyncError as e:
        log.error("%s", e)
        return EXIT_USAGE
