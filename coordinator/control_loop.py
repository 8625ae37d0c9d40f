"""The work-conserving control loop: a tick every policy.control_seconds, and at once after an
admin change (a new generation) or a report of a user back from idle; only the streams of nodes
whose allocation changed send. The tick runs off the event loop."""

import asyncio

from vnode_sync.coordinator.call_threads import StoreThread
from vnode_sync.coordinator.cluster import Cluster
from vnode_sync.coordinator.fan_out import FanOut
from vnode_sync.supervision import set_within


async def allocation_loop(cluster: Cluster, fan_out: FanOut, store_thread: StoreThread) -> None:
    loop = asyncio.get_running_loop()
    poke = asyncio.Event()
    cluster.publishing.add_listener(lambda _generation: loop.call_soon_threadsafe(poke.set))
    cluster.runtime.allocation_wanted = lambda: loop.call_soon_threadsafe(poke.set)
    period = cluster.config.policy.control_seconds
    while True:
        if await set_within(poke, period):
            await store_thread.run(cluster.publishing.refresh_snapshot)   # the change's users
        poke.clear()
        users = cluster.publishing.snapshot().users
        changed = await loop.run_in_executor(None, cluster.allocator.tick, users)
        if changed:
            fan_out.wake()
