"""A recording Admin service on a real loopback port, and hook settings that point at it."""

import threading
from concurrent import futures
from dataclasses import dataclass, field

import grpc
import pytest
import yaml

from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc


class RecordingAdmin(pb_grpc.AdminServicer):
    """Counts jobs per user as the coordinator does, and records every call it gets."""

    def __init__(self):
        self.calls: list[tuple[str, object]] = []
        self.jobs: dict[tuple[str, str], str] = {}   # (job id, node) -> user
        self.lock = threading.Lock()

    def _user(self, name: str) -> pb.User:
        running = sum(1 for u in self.jobs.values() if u == name)
        return pb.User(name=name, active=running > 0, running_jobs=running)

    def StartJob(self, request, context):
        with self.lock:
            self.calls.append(("StartJob", request))
            self.jobs[(request.job_id, request.node)] = request.user
            user = self._user(request.user)
            user.reservation_bps, user.limit_bps = request.reservation_bps, request.limit_bps   # admitted
            return pb.JobResponse(user=user, effective_priority=request.requested_priority or 10,
                                  generation=len(self.calls))

    def EndJob(self, request, context):
        with self.lock:
            self.calls.append(("EndJob", request))
            user = self.jobs.pop((request.job_id, request.node), None)
            return pb.JobResponse(user=self._user(user) if user else None, generation=len(self.calls))

    def ReconcileJobs(self, request, context):
        with self.lock:
            self.calls.append(("ReconcileJobs", request))
            dropped = [j for (j, n) in self.jobs if n == request.source and j not in request.job_ids]
            for job_id in dropped:
                del self.jobs[(job_id, request.source)]
            return pb.RunningJobsResponse(expired_job_ids=dropped)

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


@dataclass
class FakeCoordinator:
    admin: RecordingAdmin
    address: str
    server: grpc.Server = field(repr=False)


def serve_admin(address: str = "127.0.0.1:0") -> FakeCoordinator:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    admin = RecordingAdmin()
    pb_grpc.add_AdminServicer_to_server(admin, server)
    port = server.add_insecure_port(address)
    server.start()
    return FakeCoordinator(admin, f"127.0.0.1:{port}", server)


@pytest.fixture
def fake_coordinator():
    coordinator = serve_admin()
    yield coordinator
    coordinator.server.stop(0)


def write_batch_config(path, coordinator: str, tmp_path, **extra) -> str:
    settings = {"coordinator": coordinator, "timeout_seconds": 3, "spool_dir": str(tmp_path / "spool"),
                "log_file": str(tmp_path / "log" / "batch.log"), "node": "cn1", **extra}
    with open(path, "w") as f:
        yaml.safe_dump(settings, f)
    return str(path)


@pytest.fixture
def dead_address():
    """A loopback port nobody listens on: connections are refused at once."""
    from testbed.ports import free_port
    return f"127.0.0.1:{free_port()}"
