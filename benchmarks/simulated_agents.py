"""Simulated storage agents: real gRPC streams to a real coordinator, no cgroup work.

Each agent registers, holds its WatchDesiredState stream and, as soon as a desired state
arrives, has applied it (it enforces nothing) and reports its generation applied on its
StreamUsage call, as a real agent does after a reconcile pass; with REPORT_SECONDS it also
reports that often, as a real agent's report_seconds. Like a real agent, a failed call (refused,
timed out, stream ended) is retried with jittered backoff, so an agent never silently gives up.
Many agents share one process on one asyncio loop (`run_agents`), a few hundred streams per
channel, so one client process can hold thousands of streams.

    python -m benchmarks.simulated_agents ADDRESS DEVICE FIRST COUNT [REPORT_SECONDS]

runs agents n<FIRST>..n<FIRST+COUNT-1>. Each time all of them have applied a generation it prints
{"all_applied": generation} on a line (so a benchmark waits for "every agent applied" without
polling the coordinator, which would load what it measures). When stdin closes or says "report",
it prints, as one JSON line, {"applied": {generation: [unix times the agents had it]},
"retries": {what: count}}.
"""

import asyncio
import json
import os
import random
import resource
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

import grpc
from grpc import aio

from vnode_sync.supervision import set_within
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc

STREAMS_PER_CHANNEL = 200
# Each channel its own TCP connection (gRPC otherwise shares one among a process's channels).
CHANNEL_OPTIONS = (("grpc.use_local_subchannel_pool", 1),)
RPC_TIMEOUT_SECONDS = 60.0
RETRY_FIRST_SECONDS, RETRY_CAP_SECONDS = 0.2, 2.0


def node_id(i: int) -> str:
    return f"n{i:05d}"


def raise_open_files_limit() -> int:
    """Thousands of streams need thousands of sockets: soft limit up to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


@dataclass
class Record:
    """What the agents of one process saw: when each generation was applied."""

    agents: int
    applied: dict[int, list[float]] = field(default_factory=dict)
    retries: Counter = field(default_factory=Counter)
    _applied_by: dict[int, set[str]] = field(default_factory=dict)

    def agent_applied(self, node: str, generation: int) -> None:
        by = self._applied_by.setdefault(generation, set())
        if node not in by:
            by.add(node)
            self.applied.setdefault(generation, []).append(time.time())
            if len(by) == self.agents:
                print(json.dumps({"all_applied": generation}), flush=True)


async def _reporter(reports, node: str, applied: list[int], wake: asyncio.Event, every: float,
                    record: Record) -> None:
    """The agent's one writer on its report call: at once after a new state, and every `every` s
    (0: only after a new state), as a real agent's report_seconds."""
    try:
        while True:
            if every:
                await set_within(wake, every * random.uniform(0.9, 1.1))
            else:
                await wake.wait()
            wake.clear()
            await reports.write(pb.UsageReport(node_id=node, applied_generation=applied[0],
                                               sampled_at_unix=time.time()))
    except (grpc.RpcError, aio.UsageError, asyncio.InvalidStateError):
        record.retries["StreamUsage failed"] += 1


class StreamChannels:
    """Channels to the coordinator's fan-out processes (by port), STREAMS_PER_CHANNEL streams each."""

    def __init__(self, address: str):
        self.host = address.rpartition(":")[0]
        self._channels: dict[tuple[int, int], aio.Channel] = {}

    def stub(self, port: int, agent: int, default: pb_grpc.AgentLinkStub) -> pb_grpc.AgentLinkStub:
        if not port:
            return default
        key = (port, agent // STREAMS_PER_CHANNEL)
        if key not in self._channels:
            self._channels[key] = aio.insecure_channel(f"{self.host}:{port}", options=CHANNEL_OPTIONS)
        return pb_grpc.AgentLinkStub(self._channels[key])

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()


async def simulated_agent(channel: aio.Channel, node: str, device: str, record: Record,
                          report_seconds: float = 0.0, streams: StreamChannels | None = None, index: int = 0) -> None:
    link = pb_grpc.AgentLinkStub(channel)
    delay = RETRY_FIRST_SECONDS
    while True:
        step, reports, reporter = "Register", None, None
        try:
            registered = await link.Register(pb.RegisterRequest(node_id=node, backend="simulated",
                                                                devices=[pb.Device(name=device)]),
                                             timeout=RPC_TIMEOUT_SECONDS)
            # A coordinator with fan-out processes serves the stream at another port, as a real agent follows.
            watch = streams.stub(registered.stream_port, index, link) if streams else link
            step, reports = "WatchDesiredState", watch.StreamUsage()
            applied, wake = [0], asyncio.Event()
            reporter = asyncio.create_task(_reporter(reports, node, applied, wake, report_seconds, record))
            async for state in watch.WatchDesiredState(pb.WatchRequest(node_id=node)):
                record.agent_applied(node, state.generation)
                delay = RETRY_FIRST_SECONDS
                applied[0] = state.generation
                wake.set()
            record.retries["stream ended"] += 1
        except grpc.RpcError as e:
            record.retries[f"{step} {e.code().name}"] += 1
        finally:
            if reporter is not None:
                reporter.cancel()
            if reports is not None:
                reports.cancel()
        await asyncio.sleep(delay * random.uniform(0.8, 1.2))
        delay = min(RETRY_CAP_SECONDS, delay * 2)


async def run_agents(address: str, device: str, nodes: list[str], until: asyncio.Future,
                     report_seconds: float = 0.0) -> Record:
    """Run the agents until `until` is done; returns what they saw."""
    record = Record(len(nodes))
    channels = [aio.insecure_channel(address, options=CHANNEL_OPTIONS) for _ in range(0, len(nodes), STREAMS_PER_CHANNEL)]
    streams = StreamChannels(address)
    agents = [asyncio.create_task(simulated_agent(channels[i // STREAMS_PER_CHANNEL], node, device, record,
                                                  report_seconds, streams, i))
              for i, node in enumerate(nodes)]
    await until
    for agent in agents:
        agent.cancel()
    await asyncio.gather(*agents, return_exceptions=True)
    for channel in channels:
        await channel.close()
    await streams.close()
    return record


async def _main(address: str, device: str, first: int, count: int, report_seconds: float) -> None:
    loop = asyncio.get_running_loop()
    until = loop.create_future()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    async def wait_for_report():
        await reader.readline()  # "report" or end of input
        until.set_result(None)
    waiter = asyncio.create_task(wait_for_report())
    record = await run_agents(address, device, [node_id(i) for i in range(first, first + count)], until,
                              report_seconds)
    await waiter
    print(json.dumps({"applied": record.applied, "retries": record.retries}), flush=True)


# Below the coordinator's CPU priority: on a site, agents are on other machines (see coordinator_scale).
NICE = 10

if __name__ == "__main__":
    if len(sys.argv) not in (5, 6):
        sys.exit("usage: python -m benchmarks.simulated_agents ADDRESS DEVICE FIRST COUNT [REPORT_SECONDS] "
                 "(a process of simulated agents that coordinator_scale starts)")
    raise_open_files_limit()
    os.nice(NICE)
    address_, device_, first_, count_ = sys.argv[1:5]
    asyncio.run(_main(address_, device_, int(first_), int(count_), float(sys.argv[5]) if len(sys.argv) > 5 else 0.0))
