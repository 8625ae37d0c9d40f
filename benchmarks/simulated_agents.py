"""Simulated storage agents: real gRPC streams to a real coordinator, no cgroup work.

Each agent registers, holds its WatchDesiredState stream and, as soon as a desired state
arrives, reports its generation applied (a ReportUsage call), as a real agent does after a
reconcile pass. Many agents share one process on one asyncio loop (`run_agents`), a few hundred
streams per channel, so one client process can hold thousands of streams.

    python -m benchmarks.simulated_agents ADDRESS DEVICE FIRST COUNT

runs agents n<FIRST>..n<FIRST+COUNT-1> until stdin closes or says "report", then prints, as
one JSON line, when each generation was applied by each agent: {generation: [unix times]}.
"""

import asyncio
import json
import resource
import sys
import time

import grpc
from grpc import aio

from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc

STREAMS_PER_CHANNEL = 200
# Each channel its own TCP connection (gRPC otherwise shares one among a process's channels).
CHANNEL_OPTIONS = (("grpc.use_local_subchannel_pool", 1),)


def node_id(i: int) -> str:
    return f"n{i:05d}"


def raise_open_files_limit() -> int:
    """Thousands of streams need thousands of sockets: soft limit up to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


async def simulated_agent(channel: aio.Channel, node: str, device: str, applied: dict[int, list[float]],
                          connected: asyncio.Event | None = None) -> None:
    link = pb_grpc.AgentLinkStub(channel)
    await link.Register(pb.RegisterRequest(node_id=node, backend="simulated", devices=[pb.Device(name=device)]),
                        timeout=120)
    stream = link.WatchDesiredState(pb.WatchRequest(node_id=node))
    try:
        async for state in stream:
            await link.ReportUsage(pb.UsageReport(node_id=node, applied_generation=state.generation,
                                                  sampled_at_unix=time.time()), timeout=120)
            applied.setdefault(state.generation, []).append(time.time())
    except (grpc.RpcError, asyncio.CancelledError):
        pass


async def run_agents(address: str, device: str, nodes: list[str], until: asyncio.Future) -> dict[int, list[float]]:
    """Run the agents until `until` is done; returns generation -> the times agents applied it."""
    applied: dict[int, list[float]] = {}
    channels = [aio.insecure_channel(address, options=CHANNEL_OPTIONS) for _ in range(0, len(nodes), STREAMS_PER_CHANNEL)]
    agents = [asyncio.create_task(simulated_agent(channels[i // STREAMS_PER_CHANNEL], node, device, applied))
              for i, node in enumerate(nodes)]
    await until
    for agent in agents:
        agent.cancel()
    await asyncio.gather(*agents, return_exceptions=True)
    for channel in channels:
        await channel.close()
    return applied


async def _main(address: str, device: str, first: int, count: int) -> None:
    loop = asyncio.get_running_loop()
    until = loop.create_future()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    async def wait_for_report():
        await reader.readline()  # "report" or end of input
        until.set_result(None)
    waiter = asyncio.create_task(wait_for_report())
    applied = await run_agents(address, device, [node_id(i) for i in range(first, first + count)], until)
    await waiter
    print(json.dumps(applied), flush=True)


if __name__ == "__main__":
    raise_open_files_limit()
    address_, device_, first_, count_ = sys.argv[1:5]
    asyncio.run(_main(address_, device_, int(first_), int(count_)))
