"""The compute agent: tells the storage side whose connections are whose, and keeps each
job's processes in its user's VNode on this compute node.

Both are level-triggered passes. Connections: every established TCP connection from a
user's process (uid >= min_uid, named by the local passwd database, as batch systems
name users) to a storage endpoint is reported to the coordinator, which passes the
whole set to the storage agents. The set is sent when it changes, and again every
RESEND_SECONDS when it does not: the coordinator keeps reports in memory only, so one that
has just restarted or taken over as leader learns them (and the jobs that have VNodes by
them) from the next send. Placement: every process whose environment names a
batch job (SLURM_JOB_ID, PBS_JOBID) is put in its owner's VNode, including processes
of job steps that slurmstepd forks after the prolog has finished.
"""

import logging
import pwd
import signal
import threading
import time
from collections.abc import Callable

import grpc

from vnode_sync.agents.compute.connections import storage_connections
from vnode_sync.agents.compute.placement import job_processes, place_processes, placer_of
from vnode_sync.agents.config import AgentConfig, ComputeSettings
from vnode_sync.agents.plugins import make_backend
from vnode_sync.errors import VNodeSyncError
from vnode_sync.kernel.backend import LimitEnforcer
from vnode_sync.supervision import EXIT_LOOP_FAILED, LoopFailed, run_passes
from vnode_sync.wire import vnode_pb2 as pb, vnode_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

RPC_TIMEOUT_SECONDS = 5.0
# How often an unchanged set is sent again: a bound on how long a coordinator that started meanwhile
# charges this node's connections to their users instead of their jobs (one small call per node).
RESEND_SECONDS = 30.0


def local_users(min_uid: int) -> dict[int, str]:
    return {entry.pw_uid: entry.pw_name for entry in pwd.getpwall() if entry.pw_uid >= min_uid}


class ComputeAgent:
    def __init__(self, config: AgentConfig, settings: ComputeSettings, backend: LimitEnforcer | None,
                 channel: grpc.Channel):
        self.config, self.settings, self.backend = config, settings, backend
        self.link = pb_grpc.AgentLinkStub(channel)
        self._stop = threading.Event()
        self._reported: list[pb.ConnectionOwner] | None = None
        self._resend_at = 0.0   # monotonic: when the set is sent again unchanged
        self._placed: set[int] = set()
        self._next_placement = 0.0   # monotonic: when jobs' processes are placed next
        # For metrics: the last report's outcome, failed reports, job processes placed (cumulative).
        self.reachable: bool | None = None
        self.report_failures = 0
        self.processes_placed = 0

    def report_connections(self) -> None:
        users = local_users(self.settings.min_uid)
        owned = [pb.ConnectionOwner(client_address=c.client_address, client_port=c.client_port, user=c.user,
                                    server_address=c.server_address, server_port=c.server_port, job=c.job)
                 for c in storage_connections(users, self.settings.endpoints, self.config.proc_root)]
        if owned == self._reported and time.monotonic() < self._resend_at:
            return
        try:
            self.link.ReportConnections(pb.ConnectionReport(reporter=self.config.node_id, connections=owned),
                                        timeout=RPC_TIMEOUT_SECONDS)
            self._reported = owned
            self._resend_at = time.monotonic() + RESEND_SECONDS
            self.reachable = True
        except grpc.RpcError as e:
            self.reachable = False
            self.report_failures += 1
            log.warning("connection report not delivered (%s); retrying", e.code().name)

    @property
    def connections_reported(self) -> int:
        return len(self._reported or ())

    def place_jobs(self) -> None:
        if self.backend is None:
            return
        users = local_users(self.settings.min_uid)
        processes = job_processes(self.config.proc_root, self.settings.min_uid)
        by_user: dict[str, list[int]] = {}
        for pid, (uid, _) in processes.items():
            if pid not in self._placed and uid in users:
                by_user.setdefault(users[uid], []).append(pid)
        for user, pids in by_user.items():
            try:
                placed = place_processes(self.backend, user, pids, self.config.proc_root).pids
                self.processes_placed += len(placed - self._placed)
                self._placed |= placed
            except VNodeSyncError as e:
                log.warning("placing %s's job processes: %s", user, e)
        self._placed &= set(processes)

    def run(self) -> None:
        """Report and place until stopped; raises LoopFailed when passes keep failing."""
        run_passes("connection reports and job placement", f"compute node {self.config.node_id}",
                   self._one_pass, self._stop)

    def _one_pass(self) -> float:
        self.report_connections()
        if time.monotonic() >= self._next_placement:
            self.place_jobs()
            self._next_placement = time.monotonic() + self.settings.placement_seconds
        return self.settings.connection_seconds

    def stop(self) -> None:
        self._stop.set()


def run_compute_agent(config: AgentConfig, channel: grpc.Channel,
                      started: Callable[[ComputeAgent], None] = lambda agent: None) -> int:
    """Run until SIGTERM; `started(agent)` is called once the agent exists (its metrics hook in there)."""
    settings = config.compute
    try:
        backend = make_backend(config)
        placer_of(backend)
    except VNodeSyncError as e:
        log.warning("no job placement on this node: %s", e)
        backend = None
    agent = ComputeAgent(config, settings, backend, channel)
    started(agent)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: agent.stop())
    log.info("compute node %s: reporting connections to %s, placing jobs under %s", config.node_id,
             ", ".join(f"{h or '*'}:{p}" for h, p in settings.endpoints), config.cgroup_subtree)
    try:
        agent.run()
    except LoopFailed as e:
        log.error("%s; exiting %d so the service manager restarts this agent", e, EXIT_LOOP_FAILED)
        return EXIT_LOOP_FAILED
    if config.teardown_on_exit and backend is not None:
        backend.teardown()
    return 0
