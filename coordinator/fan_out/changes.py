"""Change fan-out on the event loop: one future per node that its streams wait on.

A bump (made on the store thread) wakes the publisher, which reads the new snapshot once, off the
loop, then wakes every node; bursts of bumps coalesce into one snapshot. A change of connections
wakes only the nodes whose connections changed, at most once per CONNECTIONS_PUBLISH_SECONDS.
Both publishers are supervised loops: a failed pass is retried (its change kept) after a backoff.
With fan-out processes (fan_out/processes.py), every wake also hands the woken nodes' messages
to the processes that serve their streams; when one of them (re)starts, the streams of its nodes
served here meanwhile are ended, so their agents register again and move there.

A node's streams await a bare future (not an asyncio.Event, whose wait makes a future, finds the
running loop and keeps a list of waiters each time): at 10,000 streams per change that was about
a tenth of the loop's time.
"""

import asyncio
from collections.abc import Callable

from vnode_sync.coordinator.state.call_threads import StoreThread
from vnode_sync.coordinator.cluster import Cluster
from vnode_sync.supervision import run_passes_async

# Changed connections are published at most this often: one send per node for a burst of reports.
CONNECTIONS_PUBLISH_SECONDS = 0.05


class NodeChanges:
    """Per node, the future that its next change completes; shared by the node's streams."""

    def __init__(self):
        self._changes: dict[str, asyncio.Future] = {}  # node_id -> what its streams wait on now
        self._moves: dict[str, int] = {}  # node_id -> times its streams here were ended (`move`)
        self.closing = False

    def moves_of(self, node_id: str) -> int:
        return self._moves.get(node_id, 0)

    def move(self, nodes: list[str]) -> None:
        """End the streams of `nodes` open now (their agents register again and are sent elsewhere)."""
        for node in nodes:
            self._moves[node] = self._moves.get(node, 0) + 1
        self.wake(set(nodes))

    def change_of(self, node_id: str) -> asyncio.Future:
        change = self._changes.get(node_id)
        if change is None or change.done():
            change = self._changes[node_id] = asyncio.get_running_loop().create_future()
        return change

    @staticmethod
    async def wait_for(change: asyncio.Future) -> None:
        """Until `change` is done. A stream that is cancelled while waiting cancels the shared future
        too; another stream of the same node that sees that goes on (its next `change_of` is new)."""
        try:
            await change
        except asyncio.CancelledError:
            if not change.cancelled() or asyncio.current_task().cancelling():
                raise

    def wake(self, nodes: set[str] | None = None) -> None:
        """Wake the streams of `nodes` (None: every node's)."""
        if nodes is None:
            woken, self._changes = self._changes, {}
            for change in woken.values():
                if not change.done():
                    change.set_result(None)
            return
        for node in nodes:
            change = self._changes.pop(node, None)
            if change is not None and not change.done():
                change.set_result(None)

    def close(self) -> None:
        self.closing = True
        self.wake()


async def send_changes(context, node_id: str, changes: NodeChanges, message_of: Callable[[str], bytes | None]) -> None:
    """A desired-state stream: the node's message, then each new one, until `changes` closes.
    `message_of` returns the same object until the message changes (None: none yet)."""
    sent, moves = None, changes.moves_of(node_id)
    while not changes.closing and changes.moves_of(node_id) == moves:
        changed = changes.change_of(node_id)  # taken before reading the message: no change is missed
        message = message_of(node_id)
        if message is not None and message is not sent:
            await context.write(message)
            sent = message
        await changes.wait_for(changed)


class FanOut:
    def __init__(self, cluster: Cluster, store_thread: StoreThread):
        self.publishing = cluster.publishing
        self.runtime = cluster.runtime
        self.store_thread = store_thread
        self.changes = NodeChanges()
        self._wake_listeners: list[Callable[[set[str] | None], None]] = []
        self.granting = asyncio.Event()   # clear while a new leader learns (docs/ha.md): streams wait
        self.granting.set()
        self._bumped = asyncio.Event()
        self._connections = asyncio.Event()
        self._connections_published = 0   # the version of the connections the streams have
        self._loop = asyncio.get_running_loop()
        self.publishing.add_listener(lambda _generation: self._loop.call_soon_threadsafe(self._bumped.set))

    def on_wake(self, listener: Callable[[set[str] | None], None]) -> None:
        """`listener(nodes)` at every wake (nodes None: every node's): the fan-out processes, if any."""
        self._wake_listeners.append(listener)

    @property
    def closing(self) -> bool:
        return self.changes.closing

    @closing.setter
    def closing(self, closing: bool) -> None:   # resumed after a pause (docs/ha.md)
        self.changes.closing = closing

    async def prime(self) -> None:
        await self.store_thread.run(self.publishing.refresh_snapshot)

    def connections_reported(self) -> None:
        if self.runtime.connections_version() != self._connections_published:
            self._connections.set()

    async def publisher(self) -> None:
        await run_passes_async("publisher", "desired-state fan-out", self._publish_snapshot)

    async def _publish_snapshot(self) -> None:
        await self._bumped.wait()
        self._bumped.clear()
        try:
            await self.store_thread.run(self.publishing.refresh_snapshot)
        except Exception:
            self._bumped.set()   # read again by the retry
            raise
        self.wake()

    async def connection_publisher(self) -> None:
        await run_passes_async("connection publisher", "connection fan-out", self._publish_connections)

    async def _publish_connections(self) -> float:
        await self._connections.wait()
        self._connections.clear()
        version, connections = self.runtime.connections()
        if version != self._connections_published:
            try:
                self.wake(self.publishing.publish_connections(connections))
            except Exception:
                self._connections.set()   # published by the retry
                raise
            self._connections_published = version
        return CONNECTIONS_PUBLISH_SECONDS

    async def send(self, context, node_id: str) -> None:
        """The node's desired-state stream served here."""
        await self.granting.wait()
        await send_changes(context, node_id, self.changes, self.publishing.stream_message)

    def learn_for(self, seconds: float) -> None:
        """Streams send nothing for `seconds` (a new leader learning the demand from usage reports)."""
        self.granting.clear()
        self._loop.call_later(seconds, self.granting.set)

    def close_streams(self) -> None:
        self.changes.close()

    def wake(self, nodes: set[str] | None = None) -> None:
        """Wake the streams of `nodes` (None: every node's), here and in the fan-out processes."""
        self.changes.wake(nodes)
        for listener in self._wake_listeners:
            listener(nodes)
