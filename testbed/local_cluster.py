"""A real vnode-sync cluster on one host: a coordinator process and storage-agent processes.

Used by the demo, the end-to-end tests and the benchmarks. Everything it makes is named
with `name` (cgroup subtrees `<name>.<node>`, a work dir), and `stop()` removes it all.

    with LocalCluster("vnode-sync-demo.1234", users=[...], nodes=[...]) as cluster:
        cluster.vnodectl("set-priority", "alice", "8")
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc
import yaml

from vnode_sync.ctl.status_document import status_json
from vnode_sync.kernel.backend import HostCgroups
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc
from vnode_sync.wire.leader import dial
from testbed.lifecycle import StartedService
from testbed.processes import stop_process

STATUS_TIMEOUT_SECONDS = 10.0   # as vnodectl's own call (RPC_TIMEOUT_SECONDS)


@dataclass(frozen=True)
class LocalUser:
    name: str
    uid: int
    priority: int
    active: bool = True


@dataclass(frozen=True)
class LocalNode:
    node_id: str
    devices: tuple[str, ...]
    read_bps: int
    write_bps: int
    discovery: dict = field(default_factory=lambda: {"kind": "generic"})
    settings: dict = field(default_factory=dict)   # this node's own agent settings (e.g. its backend)
    endpoints: tuple[str, ...] = ()   # where clients reach its file system service (address:port)


class LocalCluster(StartedService):
    def __init__(self, name: str, users: list[LocalUser], nodes: list[LocalNode], sharing: str = "static",
                 workdir: str | None = None, agent_settings: dict | None = None,
                 coordinator_settings: dict | None = None, listen_host: str = "127.0.0.1"):
        self.name = name
        self.listen_host = listen_host  # where the coordinator listens and agents dial it
        self.users, self.nodes, self.sharing = users, nodes, sharing
        self.workdir = workdir or tempfile.mkdtemp(prefix=name + ".")
        self.agent_settings = agent_settings or {}
        self.coordinator_settings = coordinator_settings or {}
        self.port = 0
        self.coordinator: subprocess.Popen | None = None
        self.agents: dict[str, subprocess.Popen] = {}
        self._admin_channel: grpc.Channel | None = None   # for status(), to _admin_address
        self._admin_address = ""

    # ---- configs ----------------------------------------------------------

    @property
    def address(self) -> str:
        return f"{self.listen_host}:{self.port}"

    def cgroup_name(self, node_id: str) -> str:
        return f"{self.name}.{node_id}"

    def _write(self, filename: str, content: dict) -> str:
        path = os.path.join(self.workdir, filename)
        with open(path, "w") as f:
            yaml.safe_dump(content, f)
        return path

    def coordinator_config(self) -> str:
        return self._write("coordinator.yaml", self.coordinator_document())

    def coordinator_document(self) -> dict:
        return {
            "listen": self.address,
            "insecure": True,  # a single-host lab; the warning in coordinator.log says so
            "state_path": os.path.join(self.workdir, "coordinator.sqlite"),
            "policy": {"sharing": self.sharing, **self.coordinator_settings.get("policy", {})},
            "users": [{"name": u.name, "uid": u.uid, "priority": u.priority, "active": u.active}
                      for u in self.users],
            "storage_nodes": [{"id": n.node_id, "devices": [
                {"name": d, "read_bps": n.read_bps, "write_bps": n.write_bps} for d in n.devices],
                **({"endpoints": list(n.endpoints)} if n.endpoints else {})}
                for n in self.nodes],
            **{k: v for k, v in self.coordinator_settings.items() if k != "policy"},   # e.g. metrics
        }

    def agent_config(self, node: LocalNode) -> str:
        return self._write(f"agent-{node.node_id}.yaml", {
            "node_id": node.node_id, "coordinator": self.address, "insecure": True,
            "cgroup_name": self.cgroup_name(node.node_id), "devices": list(node.devices),
            "discovery": node.discovery, "teardown_on_exit": True,
            "state_cache": os.path.join(self.workdir, f"agent-{node.node_id}.state"),
            **self.agent_settings, **node.settings,
        })

    # ---- processes ----------------------------------------------------------

    def _log(self, name: str):
        return open(os.path.join(self.workdir, f"{name}.log"), "ab")

    def start_coordinator(self) -> None:
        self.coordinator = subprocess.Popen(
            [sys.executable, "-m", "vnode_sync.coordinator.main", "--config", self.coordinator_config(),
             "--print-port"], stdout=subprocess.PIPE, stderr=self._log("coordinator"), text=True)
        line = self.coordinator.stdout.readline()
        if not line.strip().isdigit():
            raise RuntimeError(f"coordinator did not start; see {self.workdir}/coordinator.log")
        self.port = int(line)

    def start_agent(self, node: LocalNode) -> subprocess.Popen:
        process = subprocess.Popen([sys.executable, "-m", "vnode_sync.agents.main", "--config",
                                    self.agent_config(node)], stderr=self._log(f"agent-{node.node_id}"))
        self.agents[node.node_id] = process
        return process

    def start(self, timeout: float = 20, poll_seconds: float = 0.1) -> "LocalCluster":
        """Start the coordinator and every agent; return once each agent applied its state. Each poll
        is a Status call the coordinator serves: on a slow (emulated) CPU poll less often, or the
        polls take the CPU the agents need to start."""
        self.start_coordinator()
        for node in self.nodes:
            self.start_agent(node)
        self.wait_for(self._every_agent_applied, timeout=timeout, interval=poll_seconds,
                      what="every agent connected and applied the desired state")
        return self

    def _every_agent_applied(self) -> bool:
        nodes = self.status()["nodes"]
        return (all(n["applied_generation"] for n in nodes if "applied_generation" in n)
                and len([n for n in nodes if n.get("connected")]) == len(self.nodes))

    def processes(self) -> list[subprocess.Popen]:
        """The coordinator and every agent started so far."""
        return [p for p in (self.coordinator, *self.agents.values()) if p is not None]

    def stop_coordinator(self, sig: int = signal.SIGTERM) -> None:
        if self.coordinator:
            stop_process(self.coordinator, sig, grace_seconds=10)

    def stop_agent(self, node_id: str, sig: int = signal.SIGTERM) -> None:
        process = self.agents.get(node_id)
        if process:
            stop_process(process, sig)

    def stop(self) -> None:
        for node_id in list(self.agents):
            self.stop_agent(node_id)
        self.stop_coordinator()
        self._close_admin()
        for node in self.nodes:  # an agent that died without tearing down leaves its subtree: remove it
            if os.path.exists(os.path.join(HostCgroups().blkio_v1, self.cgroup_name(node.node_id))):
                subprocess.run([sys.executable, "-m", "vnode_sync.agents.main", "--config",
                                self.agent_config(node), "--teardown"], capture_output=True)
        shutil.rmtree(self.workdir, ignore_errors=True)

    # ---- talking to it ----------------------------------------------------

    def vnodectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run([sys.executable, "-m", "vnode_sync.ctl.main", "--coordinator", self.address,
                                 "--insecure", *args], capture_output=True, text=True, timeout=30)
        if check and result.returncode != 0:
            raise RuntimeError(f"vnodectl {' '.join(args)} failed: {result.stderr.strip()}")
        return result

    def status(self) -> dict:
        """What `vnodectl status --json` prints, asked over a channel kept open here: a vnodectl
        process per poll costs a Python start, which takes seconds on a slow (emulated) CPU."""
        admin = pb_grpc.AdminStub(self._admin())
        return status_json(admin.Status(pb.StatusRequest(max_entries=0), timeout=STATUS_TIMEOUT_SECONDS))

    def _admin(self) -> grpc.Channel:
        """A channel to the current address (a restarted coordinator may listen on another port)."""
        if self._admin_channel is None or self._admin_address != self.address:
            self._close_admin()
            self._admin_channel, self._admin_address = dial(self.address, grpc.insecure_channel), self.address
        return self._admin_channel

    def _close_admin(self) -> None:
        if self._admin_channel is not None:
            self._admin_channel.close()
            self._admin_channel = None

    @staticmethod
    def wait_for(predicate, timeout: float, what: str, interval: float = 0.1,
                 explain: Callable[[], str] | None = None):
        """Poll `predicate` until it is true; on timeout, raise with `explain()`'s account of why."""
        deadline = time.monotonic() + timeout
        last_error = None
        while time.monotonic() < deadline:
            try:
                value = predicate()
                if value:
                    return value
            except Exception as e:  # the thing waited for may not answer yet
                last_error = e
            time.sleep(interval)
        raise TimeoutError(f"timed out after {timeout}s waiting for {what}"
                           + (f" (last error: {last_error})" if last_error else "")
                           + (f"\n{explain()}" if explain else ""))

    def agent_log_tail(self, node_id: str, lines: int = 20) -> str:
        try:
            with open(os.path.join(self.workdir, f"agent-{node_id}.log"), errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError as e:
            return f"(no agent log: {e})"
