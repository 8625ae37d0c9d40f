"""Change fan-out on the event loop: one event per node that its streams wait on.

A bump (made on the store thread) wakes `publisher`, which reads the new snapshot once, off the
loop, then wakes every node; bursts of bumps coalesce into one snapshot. A change of connections
wakes only the nodes whose connections changed, at most once per CONNECTIONS_PUBLISH_SECONDS.
"""

import asyncio

from vnode_sync.coordinator.call_threads import StoreThread
from vnode_sync.coordinator.cluster import Cluster

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
        self._loop = asyncio.get_running_loop()
        self.publishing.add_listener(lambda _generation: self._loop.call_soon_threadsafe(self._bumped.set))

    async def prime(self) -> None:
        await self.store_thread.run(self.publishing.refresh_snapshot)

    def connections_reported(self) -> None:
        if self.runtime.connections_changed():
            self._connections.set()

    async def publisher(self) -> None:
        while True:
            await self._bumped.wait()
            self._bumped.clear()
            await self.store_thread.run(self.publishing.refresh_snapshot)
            self.wake()

    async def connection_publisher(self) -> None:
        while True:
            await self._connections.wait()
            self._connections.clear()
            connections = self.runtime.take_connections()
            if connections is not None:
                self.wake(self.publishing.publish_connections(connections))
            await asyncio.sleep(CONNECTIONS_PUBLISH_SECONDS)

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
