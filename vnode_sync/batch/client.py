"""Telling the coordinator about jobs, over gRPC, never waiting longer than a given deadline."""

import logging
import time
from dataclasses import dataclass

import grpc

from vnode_sync.batch.jobs import JobEvent, JobPhase
from vnode_sync.errors import InvalidArgument, Unavailable, VNodeSyncError
from vnode_sync.security.tls import TransportSecurity, secure_channel, tls_for_coordinator
from vnode_sync.wire.leader import dial
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

# Codes after which trying again later may succeed; anything else is the coordinator saying no.
_RETRYABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED,
              grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL}


@dataclass(frozen=True)
class JobOutcome:
    """What the coordinator made of a job event."""

    user_active: bool
    running_jobs: int             # the user's jobs on all nodes, as the coordinator counts them
    effective_priority: int       # 0 after an end
    generation: int
    reservation_bps: int = 0      # the user's floor and ceiling in force after the event (0: none)
    limit_bps: int = 0


def _error(e: grpc.RpcError, address: str, what: str, waited: float) -> VNodeSyncError:
    code = e.code()
    detail = e.details() or code.name
    if code in _RETRYABLE:
        return Unavailable(f"coordinator at {address} unreachable for {what} "
                           f"({code.name} after {waited:.1f}s: {detail})")
    return InvalidArgument(f"coordinator at {address} refused {what}: {code.name}: {detail}")


class CoordinatorClient:
    def __init__(self, address: str, security: TransportSecurity | None = None):
        """Raises ConfigError if `security` does not allow this address or its certificate is unusable."""
        self.address = address
        files = tls_for_coordinator(security or TransportSecurity(), address, "batch hook", log)
        self._channel = dial(address, lambda one: secure_channel(one, files) if files else grpc.insecure_channel(one))
        self._admin = pb_grpc.AdminStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "CoordinatorClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, method, request, deadline_seconds: float, what: str):
        started = time.monotonic()
        try:
            return method(request, timeout=max(deadline_seconds, 0.05))
        except grpc.RpcError as e:
            raise _error(e, self.address, what, time.monotonic() - started) from e

    def send(self, event: JobEvent, deadline_seconds: float) -> JobOutcome:
        """Deliver a start or end; both are idempotent on the coordinator's side."""
        request = pb.JobRequest(job_id=event.job_id, user=event.user, uid=event.uid, node=event.node,
                                account=event.account, queue=event.queue,
                                requested_priority=event.requested_priority,
                                reservation_bps=event.requested_reservation, limit_bps=event.requested_limit)
        what = f"{event.phase.value} of {event.describe()}"
        if event.phase is JobPhase.START:
            reply = self._call(self._admin.StartJob, request, deadline_seconds, what)
        else:
            reply = self._call(self._admin.EndJob, request, deadline_seconds, what)
        user = reply.user if reply.HasField("user") else pb.User()
        return JobOutcome(user.active, user.running_jobs, reply.effective_priority, reply.generation,
                          user.reservation_bps, user.limit_bps)

    def reconcile(self, node: str, running_job_ids: list[str], deadline_seconds: float) -> list[str]:
        """Tell the coordinator every job running on `node`; returns the jobs it dropped."""
        reply = self._call(self._admin.ReconcileJobs,
                           pb.RunningJobsRequest(source=node, job_ids=running_job_ids),
                           deadline_seconds, f"reconcile of {len(running_job_ids)} running job(s) on {node}")
        return list(reply.expired_job_ids)
