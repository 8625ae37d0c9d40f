"""The coordinator's fan-out processes (config `fan_out_processes` > 1): started, fed and supervised here.

Each child (fan_out_process.py) serves the desired-state streams of one share of the nodes
(`share_of`). At every wake the coordinator hands each child the messages of its woken nodes,
serialized once here (publishing.stream_message), in one FanOutBatch frame on the child's stdin;
a child that (re)starts first gets all of its nodes'. Register tells an agent the port of its
node's child (0 while that child is down: the agent then watches on the coordinator itself).
The agents' usage reports go there too; each child hands on the reports it authorized in
batches, which are taken here as the coordinator's own StreamUsage takes them. A child that ends
is started again (with backoff); the streams it had are counted closed, and their agents, whose
streams broke, register again; once it serves, the coordinator ends its own streams of the
child's nodes, so they move back. Children end when the coordinator's pipe closes, so none
outlives it.
"""

import asyncio
import functools
import logging
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from vnode_sync.coordinator.fan_out.pipe import frame, read_frame, share_of
from vnode_sync.coordinator.control.node_runtime import NodeRuntimes
from vnode_sync.coordinator.control.publishing import Publishing
from vnode_sync.coordinator.serialized import field_entry
from vnode_sync.errors import VNodeSyncError
from vnode_sync.supervision import PassSupervisor
from vnode_sync.wire import vnode_pb2 as pb

log = logging.getLogger(__name__)

_STATES = pb.FanOutBatch.DESCRIPTOR.fields_by_name["states"].number
_NODE_ID = pb.FanOutState.DESCRIPTOR.fields_by_name["node_id"].number
_MESSAGE = pb.FanOutState.DESCRIPTOR.fields_by_name["message"].number

START_SECONDS = 30.0     # a child that has not told its port by then is killed and started again
STOP_SECONDS = 0.7       # at stop, children get this long to end after their pipe closes, then SIGKILL


@dataclass(frozen=True)
class FanOutCommand:
    """How to start the children: the coordinator's config file and the host to serve on."""

    config_path: str
    host: str
    processes: int


def listen_host(address: str) -> str:
    """The host part of a host:port listen address ("[::]" stays bracketed)."""
    return address.rpartition(":")[0] or "0.0.0.0"


class FanOutProcesses:
    def __init__(self, command: FanOutCommand, publishing: Publishing, runtime: NodeRuntimes):
        self.command = command
        self.publishing = publishing
        self.runtime = runtime
        n = command.processes
        self._take_nodes([node.node_id for node in publishing.config.storage_nodes])
        self._closed = False
        self._learn_until = 0.0   # loop time
        self._ports = [0] * n
        self._pipes: list[asyncio.StreamWriter | None] = [None] * n
        self._children: list[asyncio.subprocess.Process | None] = [None] * n
        self._stopping = False
        self._ready_listeners: list[Callable[[list[str]], None]] = []

    def on_ready(self, listener: Callable[[list[str]], None]) -> None:
        """`listener(a child's nodes)` once it serves them: their streams served meanwhile by the
        coordinator end."""
        self._ready_listeners.append(listener)

    def _take_nodes(self, node_ids: list[str]) -> None:
        n = self.command.processes
        self._shares: list[list[str]] = [[] for _ in range(n)]
        for node_id in node_ids:
            self._shares[share_of(node_id, n)].append(node_id)
        self._node_parts = {node_id: field_entry(_NODE_ID, node_id.encode()) for node_id in node_ids}
        self._nodes_part = pb.FanOutBatch(nodes=pb.FanOutNodes(node_ids=node_ids)).SerializeToString()

    def set_nodes(self, node_ids: list[str]) -> None:
        """Storage nodes added or removed at runtime (on the loop): every child is told the new list
        (whose nodes it accepts reports and streams of) with its share's current messages."""
        self._take_nodes(node_ids)
        for k, pipe in enumerate(self._pipes):
            if pipe is not None:
                self._send(k, self._shares[k], with_nodes=True)

    def close_streams(self, closed: bool) -> None:
        """As the coordinator's own streams (on the loop): closed, every child ends its streams and
        opens none until reopened (a leader cut off from ZooKeeper, docs/ha.md)."""
        self._closed = closed
        self._send_gate(pb.FanOutGate(closed=closed))

    def learn_for(self, seconds: float) -> None:
        """Every child's streams send nothing for `seconds` (on the loop; a new leader learning)."""
        self._learn_until = asyncio.get_running_loop().time() + seconds
        self._send_gate(pb.FanOutGate(closed=self._closed, learn_seconds=seconds))

    def _gate(self) -> pb.FanOutGate:
        """The gate as it is now, for a child that starts."""
        learn = max(0.0, self._learn_until - asyncio.get_running_loop().time())
        return pb.FanOutGate(closed=self._closed, learn_seconds=learn)

    def _send_gate(self, gate: pb.FanOutGate) -> None:
        part = pb.FanOutBatch(gate=gate).SerializeToString()
        for pipe in self._pipes:
            if pipe is not None:
                pipe.write(frame(part))

    def port_for(self, node_id: str) -> int:
        """The port of the child serving this node's streams; 0 while it is down."""
        return self._ports[share_of(node_id, self.command.processes)]

    async def wait_ready(self, timeout: float = START_SECONDS) -> bool:
        """Until every child serves (True) or `timeout` (False: the coordinator serves the others' streams)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while not all(self._ports):
            if asyncio.get_running_loop().time() > deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    def supervisors(self) -> list[tuple[str, Callable[[], Awaitable[None]]]]:
        """(name, task) for each child, to run on the server's loop as its background tasks."""
        return [(f"fan-out-{k + 1}", functools.partial(self._supervise, k)) for k in range(self.command.processes)]

    def publish(self, nodes: set[str] | None) -> None:
        """Hand the children the current messages of `nodes` (None: every node)."""
        for k, pipe in enumerate(self._pipes):
            if pipe is not None:
                share = self._shares[k] if nodes is None else [n for n in nodes if share_of(n, len(self._pipes)) == k]
                if share:
                    self._send(k, share)

    def _send(self, k: int, nodes: list[str], with_nodes: bool = False) -> None:
        """One FanOutBatch, written as serialized pieces (no message object per node: the batch of
        10,000 nodes is built at every change); `with_nodes`: with the list of every node."""
        message, node_part = self.publishing.stream_message, self._node_parts
        batch = [field_entry(_STATES, node_part[n] + field_entry(_MESSAGE, message(n))) for n in nodes if n in node_part]
        batch.append(pb.FanOutBatch(generation=self.publishing.generation()).SerializeToString())
        if with_nodes:
            batch.append(self._nodes_part)
        self._pipes[k].write(frame(b"".join(batch)))

    async def _supervise(self, k: int) -> None:
        supervisor = PassSupervisor(f"fan-out process {k + 1}", "coordinator")
        while not self._stopping:
            try:
                await self._run_child(k, supervisor)
                if self._stopping:
                    return
                raise RuntimeError("ended")
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - a child that ends or fails is started again
                delay = supervisor.failed(e)
            await asyncio.sleep(delay)

    async def _run_child(self, k: int, supervisor: PassSupervisor) -> None:
        c = self.command
        child = self._children[k] = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "vnode_sync.coordinator.api.fan_out_process", "--config", c.config_path,
            "--host", c.host, "--index", str(k), "--of", str(c.processes),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=1 << 24)
        opened: dict[str, int] = {}
        try:
            hello = await asyncio.wait_for(read_frame(child.stdout), START_SECONDS)
            if hello is None:
                raise RuntimeError(f"ended before serving (exit {await child.wait()})")
            self._pipes[k] = child.stdin
            child.stdin.write(frame(pb.FanOutBatch(gate=self._gate()).SerializeToString()))
            self._send(k, self._shares[k], with_nodes=True)   # the store's nodes, which may differ from the file's
            self._ports[k] = pb.FanOutEvent.FromString(hello).port
            supervisor.succeeded()
            for listener in self._ready_listeners:
                listener(self._shares[k])
            log.info("fan-out process %d of %d (pid %d) serves the streams of %d nodes on port %d",
                     k + 1, c.processes, child.pid, len(self._shares[k]), self._ports[k])
            while (payload := await read_frame(child.stdout)) is not None:
                event = pb.FanOutEvent.FromString(payload)
                for report in event.reports:
                    self._take(report)
                if event.opened in self._node_parts:   # a configured node (the child checked; so does this)
                    self.runtime.stream_opened(event.opened)
                    opened[event.opened] = opened.get(event.opened, 0) + 1
                elif opened.get(event.closed):
                    self.runtime.stream_closed(event.closed)
                    opened[event.closed] -= 1
            code = await child.wait()
            if not self._stopping:
                raise RuntimeError(f"exited {code}")
        finally:
            self._ports[k], self._pipes[k] = 0, None
            for node, streams in opened.items():
                for _ in range(streams):
                    self.runtime.stream_closed(node)
            if child.returncode is None:
                child.kill()
                await child.wait()

    def _take(self, report: pb.UsageReport) -> None:
        try:
            self.runtime.report_usage(report)
        except VNodeSyncError as e:   # the child checked what the coordinator's StreamUsage would refuse
            log.info("usage report from %s (via a fan-out process) not taken: %s", report.node_id, e)

    async def stop(self) -> None:
        """Close every child's pipe (it ends its streams and exits); SIGKILL any left after STOP_SECONDS."""
        self._stopping = True
        children = [c for c in self._children if c is not None and c.returncode is None]
        for child in children:
            child.stdin.close()
        if children:
            await asyncio.wait([asyncio.create_task(c.wait()) for c in children], timeout=STOP_SECONDS)
            for child in children:
                if child.returncode is None:
                    child.kill()
