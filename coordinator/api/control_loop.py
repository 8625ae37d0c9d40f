"""The work-conserving control loop: a tick every policy.control_seconds, counted from the last
tick's start (a tick that took longer is followed at once: at site size the weight step's own time
would otherwise add to every round of lending weight), and at once after an admin change (a new
generation) or a report of a user newly held at its cap on a cap-only node (one back from idle:
only a step raises its cap); only the streams of nodes whose weights or caps changed send. After a
tick that sent weights, the next also waits until every node sent them has reported rates measured
under them, at most AWAIT_PERIODS periods: a step on older rates answers its own past and swings
(benchmarks/site_simulation.py). The tick (the weight step, for every node) runs off the event loop;
a failed pass is retried after a backoff (supervised)."""

import asyncio

from vnode_sync.coordinator.state.call_threads import StoreThread
from vnode_sync.coordinator.cluster import Cluster
from vnode_sync.coordinator.fan_out.changes import FanOut
from vnode_sync.supervision import run_passes_async, set_within

# After a tick that sent nodes new weights, the next waits until each of them has reported rates
# measured wholly under them (a step on rates from before its last weights answers its own past and
# swings), but at most this many control periods (an agent may be gone).
AWAIT_PERIODS = 3.0
# How often a tick waiting for reports under the last weights looks again (the check is a dict's size).
AWAIT_POLL_SECONDS = 0.05


async def allocation_loop(cluster: Cluster, fan_out: FanOut, store_thread: StoreThread) -> None:
    loop = asyncio.get_running_loop()
    poke = asyncio.Event()
    cluster.publishing.add_listener(lambda _generation: loop.call_soon_threadsafe(poke.set))
    cluster.weights.on_capped_user_held(lambda: loop.call_soon_threadsafe(poke.set))
    period = cluster.config.policy.control_seconds
    began = loop.time()

    async def tick() -> None:
        nonlocal began
        poked = await set_within(poke, max(0.0, began + period - loop.time()))
        limit = began + AWAIT_PERIODS * period
        while not poked and cluster.awaiting_reports() and loop.time() < limit:
            poked = await set_within(poke, min(AWAIT_POLL_SECONDS, limit - loop.time()))
        if poked:
            await store_thread.run(cluster.publishing.refresh_snapshot)   # the change's users
        poke.clear()
        began = loop.time()
        snapshot = cluster.publishing.snapshot()
        changed = await loop.run_in_executor(None, cluster.control_tick, snapshot.rows, snapshot.groups)
        if changed:
            fan_out.wake()

    await run_passes_async("allocation", "work-conserving control loop", tick)
