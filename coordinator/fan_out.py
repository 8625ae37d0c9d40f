"""Change fan-out on the event loop: one event per node that its streams wait on.

A bump (made on the store thread) wakes the publisher, which reads the new snapshot once, off the
loop, then wakes every node; bursts of bumps coalesce into one snapshot. A change of connections
wakes only the nodes whose connections changed, at most once per CONNECTIONS_PUBLISH_SECONDS.
Both publishers are supervised loops: a failed pass is retried (its change kept) after a backoff.
"""

import asyncio

from vnode_sync.coordinator.call_threads import StoreThread
from vnode_sync.coordinator.cluster import Cluster
from vnode_sync.supervision import run_passes_async

# Changed connections are published at most this often: one send per node for a burst of reports.
CONNECTIONS_PUBLISH_SECONDS = 0.05


class FanOut:
    def __init__(self, cluster: Cluster, store_thread: StoreThread):
        self.publishing = cluster.publishing
        self.runtime = cluster.runtime
        self.store_thread = store_thread
        self._events: dict[str, asyncio.Event] = {}  # node_id -> what its streams wait on now
        self.closing = False
        self.granting = asyncio.Event()   # clear while a new leader learns (docs/ha.md): streams wait
        self.granting.set()
        self._bumped = asyncio.Event()
        self._connections = asyncio.Event()
        self._connections_published = 0   # the version of the connections the streams have
        self._loop = asyncio.get_running_loop()
        self.publishing.add_listener(lambda _generation: self._loop.call_soon_threadsafe(self._bumped.set))

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

    def event_of(self, node_id: str) -> asyncio.Event:
        event = self._events.get(node_id)
        if event is None:
            event = self._events[node_id] = asyncio.Event()
        return event

    def learn_for(self, seconds: float) -> None:
        """Streams send nothing for `seconds` (a new leader learning the demand from usage reports)."""
        self.granting.clear()
        self._loop.call_later(seconds, self.granting.set)

    def close_streams(self) -> None:
        self.closing = True
        self.wake()

    def wake(self, nodes: set[str] | None = None) -> None:
        """Wake the streams of `nodes` (None: every node's)."""
        if nodes is None:
            woken, self._events = self._events, {}
            for event in woken.values():
                event.set()
            return
        for node in nodes:
            event = self._events.pop(node, None)
            if event is not None:
                event.set()
