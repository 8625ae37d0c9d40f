"""Several real coordinator processes on one ZooKeeper ensemble (docs/ha.md), for HA tests and
benchmarks: each on its own loopback port with its own config under a work dir named with the run
name (testbed.leftovers finds them); one leads, the others stand by. Any one can be killed and
started again.

    with ZooKeeperEnsemble(name) as zk, HACoordinators(name, zk.hosts, config) as coordinators:
        coordinators.leader()          # index of the one that serves
        coordinators.kill(i); coordinators.start_one(i)
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import grpc
import yaml

from testbed.lifecycle import StartedService
from testbed.local_cluster import LocalCluster
from testbed.processes import stop_process
from testbed.ports import free_port
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc


class HACoordinators(StartedService):
    def __init__(self, name: str, zookeeper_hosts: str | list[str], config: dict, count: int = 3,
                 session_timeout_seconds: float = 4.0, root: str | None = None):
        """`zookeeper_hosts`: one connection string for all, or one per coordinator (to cut one off)."""
        self.name = name
        self.workdir = tempfile.mkdtemp(prefix=f"{name}.coordinators.")
        self.ports = [free_port() for _ in range(count)]
        self.processes: list[subprocess.Popen | None] = [None] * count
        self.root = root or f"/{name}"
        self.configs = []
        for i, port in enumerate(self.ports):
            path = os.path.join(self.workdir, f"coordinator-{i}.yaml")
            with open(path, "w") as f:
                yaml.safe_dump({**config, "listen": f"127.0.0.1:{port}", "insecure": True,
                                "zookeeper": {"hosts": zookeeper_hosts if isinstance(zookeeper_hosts, str)
                                              else zookeeper_hosts[i], "root": self.root,
                                              "advertise": f"127.0.0.1:{port}",
                                              "session_timeout_seconds": session_timeout_seconds,
                                              **config.get("zookeeper", {})}}, f)
            self.configs.append(path)

    @property
    def addresses(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def log_path(self, index: int) -> str:
        return os.path.join(self.workdir, f"coordinator-{index}.log")

    def start(self) -> "HACoordinators":
        for i in range(len(self.ports)):
            self.start_one(i)
        self.wait_for_leader()
        return self

    def start_one(self, index: int, timeout: float = 30) -> None:
        """Start coordinator `index`; returns once it listens (as a standby or the leader)."""
        log = open(self.log_path(index), "ab")
        process = subprocess.Popen([sys.executable, "-m", "vnode_sync.coordinator.main", "--config",
                                    self.configs[index], "--print-port"],
                                   stdout=subprocess.PIPE, stderr=log, text=True)
        log.close()
        self.processes[index] = process
        line = _readline(process, timeout)
        if not line.strip().isdigit():
            stop_process(process, signal.SIGKILL)
            raise RuntimeError(f"coordinator {index} did not start: {self.log_tail(index)}")

    def log_tail(self, index: int, lines: int = 8) -> str:
        with open(self.log_path(index), errors="replace") as f:
            return " | ".join(f.read().strip().splitlines()[-lines:])

    def answers(self, index: int, timeout: float = 1.0) -> bool:
        """Whether coordinator `index` serves (a standby refuses)."""
        with grpc.insecure_channel(f"127.0.0.1:{self.ports[index]}") as channel:
            try:
                pb_grpc.AdminStub(channel).ListUsers(pb.ListUsersRequest(), timeout=timeout)
                return True
            except grpc.RpcError:
                return False

    def leader(self, among: tuple[int, ...] | None = None) -> int | None:
        running = [i for i, p in enumerate(self.processes) if p is not None and p.poll() is None
                   and (among is None or i in among)]
        return next((i for i in running if self.answers(i)), None)

    def wait_for_leader(self, timeout: float = 30, among: tuple[int, ...] | None = None) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.leader(among)
            if found is not None:
                return found
            time.sleep(0.1)
        raise TimeoutError(f"no coordinator leads after {timeout}s: "
                           + "; ".join(self.log_tail(i, 3) for i in range(len(self.ports))))

    def kill(self, index: int, sig: int = signal.SIGKILL) -> None:
        process = self.processes[index]
        if process is not None:
            stop_process(process, sig)

    def stop(self) -> None:
        for process in self.processes:
            if process is not None:
                stop_process(process)
        shutil.rmtree(self.workdir, ignore_errors=True)


def _readline(process: subprocess.Popen, timeout: float) -> str:
    """The process's next stdout line, or '' if none within `timeout` or it exited."""
    import selectors
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            return ""
    return process.stdout.readline()


class HALocalCluster(LocalCluster):
    """A LocalCluster whose coordinator is several HACoordinators on `zookeeper_hosts`: agents and
    vnodectl are given every coordinator's address and follow the leader."""

    def __init__(self, name: str, users, nodes, zookeeper_hosts: str, count: int = 3,
                 session_timeout_seconds: float = 4.0, **kwargs):
        self.coordinators: HACoordinators | None = None
        super().__init__(name, users, nodes, **kwargs)
        document = {k: v for k, v in self.coordinator_document().items() if k not in ("listen", "state_path")}
        self.coordinators = HACoordinators(name, zookeeper_hosts, document, count, session_timeout_seconds)

    @property
    def address(self) -> str:
        return self.coordinators.addresses if self.coordinators else ""

    def start_coordinator(self) -> None:
        self.coordinators.start()

    def processes(self) -> list[subprocess.Popen]:
        return [p for p in (*self.coordinators.processes, *self.agents.values()) if p is not None]

    def stop_coordinator(self, sig: int = signal.SIGTERM) -> None:
        self.coordinators.stop()
