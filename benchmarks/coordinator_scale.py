"""The coordinator at 100, 1,000 and 10,000 storage agents, and `vnodectl status` at 10,000 users x 100 nodes.

    .venv/bin/python -m benchmarks.coordinator_scale [--agents 100 1000 10000] [--rounds 20] [--fan-out-processes 1 2]

A real coordinator process; simulated storage agents (benchmarks.simulated_agents: real gRPC
streams, no cgroup work) spread over several client processes, each an asyncio loop holding
many streams. Per size, and per coordinator `fan_out_processes` setting (1: its own event loop
serves every stream; N: N child processes do), it prints:
  - set-priority -> every agent applied: p50/p99 over rounds of the time from sending SetPriority
    until the last agent had the new generation (agents' own clocks, same host; the agents tell
    the benchmark, which does not poll the coordinator in these rounds), and as a ratio to one idle
    Admin round trip measured in the same run; then, in further rounds, until ListNodes showed
    every node at it ("list", from the agents' reports);
  - an Admin call's latency (ListUsers, median of 50) with every stream open against the same call
    before any agent connected (same run, same coordinator): the ratio should stay within 2x;
  - the coordinator's RSS and CPU per 1,000 agents: RSS grown since idle; CPU per change: its CPU
    over the rounds that do not poll it (SetPriority, the fan-out, every agent's report of the new
    generation; until it is idle again after the last round) per round; and over 5 idle seconds
    with all streams open (with --report-seconds 1 every agent also reports usage once a second,
    as a real agent does by default).
The simulated agents run at a lower CPU priority (nice 10): on a real site they are on other
machines, and here they share the coordinator's 2 cores.
Then, at 10,000 users x 100 nodes, the whole `vnodectl status` command (one line per user at that
size), with --json --summary and --per-node (a million lines), and the Status RPC with every entry, against
ListUsers at the same size (the baseline: one round trip with every user).
Targets: p99 < 100 ms at 100 agents, < 1 s at 10,000; Admin within 2x; status < 1 s.
"""

import argparse
import json
import math
import os
import selectors
import statistics
import subprocess
import sys
import time

import grpc
import psutil

from benchmarks.percentile import percentile
from benchmarks.simulated_agents import node_id, raise_open_files_limit
from testbed.local_cluster import LocalCluster, LocalNode, LocalUser
from testbed.names import unique_name
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc

MB = 1_000_000
DEVICE = "/dev/vnode-sync-bench"  # the simulated agents enforce nothing: no device is needed
AGENTS_PER_PROCESS = 1_000
ADMIN_SAMPLES = 50
IDLE_CPU_SECONDS = 5.0
ROUND_GAP_SECONDS = 0.2
IDLE_CHECK_SECONDS = 0.1
# Agents report after each new state; --report-seconds 1 adds a real agent's periodic report (its
# default report_seconds). 10,000 agents reporting every second did not all connect within 600 s
# here: ~10,000 messages/s to the coordinator and from the client processes on the same 2 cores.
REPORT_SECONDS = 0.0
USERS = [LocalUser("alice", 64_201, 4), LocalUser("bob", 64_202, 8)]


def admin_latency(admin: pb_grpc.AdminStub) -> float:
    samples = []
    for _ in range(ADMIN_SAMPLES):
        t0 = time.perf_counter()
        admin.ListUsers(pb.ListUsersRequest(), timeout=30)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


class AgentProcesses:
    """Simulated agents over several client processes; tells when every agent applied a generation
    from the agents' own lines, so waiting for it puts no load on the coordinator."""

    def __init__(self, address: str, n_agents: int, report_seconds: float):
        n_processes = max(1, math.ceil(n_agents / AGENTS_PER_PROCESS))
        per = math.ceil(n_agents / n_processes)
        self.processes = [subprocess.Popen([sys.executable, "-m", "benchmarks.simulated_agents", address, DEVICE,
                                            str(first), str(min(per, n_agents - first)), str(report_seconds)],
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                          for first in range(0, n_agents, per)]
        self._selector = selectors.DefaultSelector()
        for p in self.processes:
            self._selector.register(p.stdout, selectors.EVENT_READ, p)
        self._all_applied = {p.pid: 0 for p in self.processes}

    def wait_all_applied(self, generation: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while min(self._all_applied.values()) < generation:
            left = deadline - time.monotonic()
            if left <= 0:
                behind = sum(g < generation for g in self._all_applied.values())
                raise TimeoutError(f"{behind} of {len(self.processes)} agent processes have not all applied "
                                   f"generation {generation} after {timeout} s")
            for key, _ in self._selector.select(left):
                line = key.fileobj.readline()
                if not line:
                    raise RuntimeError(f"agent process {key.data.pid} ended (exit {key.data.wait()})")
                self._all_applied[key.data.pid] = max(self._all_applied[key.data.pid],
                                                      json.loads(line)["all_applied"])

    def collect(self) -> tuple[dict[int, list[float]], dict[str, int]]:
        """Stop the agents; every generation's applied times, and the retries, over all processes."""
        applied: dict[int, list[float]] = {}
        retries: dict[str, int] = {}
        for p in self.processes:
            p.stdin.write("report\n")
            p.stdin.flush()
        for p in self.processes:
            line = p.stdout.readline()
            while line and "all_applied" in line:
                line = p.stdout.readline()
            p.wait(60)
            record = json.loads(line or "{}")
            for generation, times in record.get("applied", {}).items():
                applied.setdefault(int(generation), []).extend(times)
            for what, count in record.get("retries", {}).items():
                retries[what] = retries.get(what, 0) + count
        self.processes = []
        return applied, retries

    def kill(self) -> None:
        for p in self.processes:
            p.kill()
            p.wait()


def all_applied(admin: pb_grpc.AdminStub, n_agents: int, generation: int) -> bool:
    nodes = admin.ListNodes(pb.ListNodesRequest(), timeout=60).nodes
    return sum(n.connected and n.applied_generation >= generation for n in nodes) == n_agents


def set_priority(admin: pb_grpc.AdminStub, i: int, sent: dict[int, float]) -> int:
    """Round i's change of alice's priority; the generation it made (its send time kept in `sent`)."""
    t0 = time.time()
    admin.SetPriority(pb.SetPriorityRequest(user="alice", priority=1 + (i + 5) % 99), timeout=30)
    generation = admin.ListUsers(pb.ListUsersRequest(), timeout=30).generation
    sent[generation] = t0
    return generation


def wait_idle(process: "CoordinatorCpu", timeout: float = 60.0) -> None:
    """Until `process` used under 2 % of a core over 100 ms (its work of the last round is done)."""
    deadline = time.monotonic() + timeout
    cpu = process.seconds()
    while time.monotonic() < deadline:
        time.sleep(IDLE_CHECK_SECONDS)
        now = process.seconds()
        if now - cpu < 0.02 * IDLE_CHECK_SECONDS:
            return
        cpu = now
    raise TimeoutError(f"the coordinator was not idle within {timeout} s after the last round")


class CoordinatorCpu:
    """CPU seconds and RSS of the coordinator process and of its fan-out processes (its children)."""

    def __init__(self, pid: int):
        self.process = psutil.Process(pid)

    def _processes(self) -> list[psutil.Process]:
        return [self.process, *self.process.children()]

    def by_process(self) -> dict[int, float]:
        seconds = {}
        for p in self._processes():
            try:
                seconds[p.pid] = sum(p.cpu_times()[:2])
            except psutil.NoSuchProcess:
                pass
        return seconds

    def seconds(self) -> float:
        return sum(self.by_process().values())

    def rss(self) -> int:
        return sum(p.memory_info().rss for p in self._processes())


def run(n_agents: int, rounds: int, report_seconds: float = REPORT_SECONDS, fan_out_processes: int = 1,
        idle_seconds: float = IDLE_CPU_SECONDS) -> dict:
    nodes = [LocalNode(node_id(i), (DEVICE,), 60 * MB, 60 * MB) for i in range(n_agents)]
    cluster = LocalCluster(unique_name(f"bench-scale-{n_agents}"), USERS, nodes,
                           coordinator_settings={"fan_out_processes": fan_out_processes})
    agents: AgentProcesses | None = None
    try:
        cluster.start_coordinator()
        coordinator = CoordinatorCpu(cluster.coordinator.pid)
        if fan_out_processes > 1:
            cluster.wait_for(lambda: len(coordinator.by_process()) == 1 + fan_out_processes, timeout=60,
                             what=f"{fan_out_processes} fan-out processes")
        with grpc.insecure_channel(cluster.address) as channel:
            admin = pb_grpc.AdminStub(channel)
            idle_admin = admin_latency(admin)
            rss_idle = coordinator.rss()
            t_connect = time.perf_counter()
            generation = admin.ListUsers(pb.ListUsersRequest(), timeout=30).generation
            agents = AgentProcesses(cluster.address, n_agents, report_seconds)
            agents.wait_all_applied(generation, timeout=600)
            connect_seconds = time.perf_counter() - t_connect
            cluster.wait_for(lambda: all_applied(admin, n_agents, generation), timeout=120, interval=1.0,
                             what=f"the coordinator to list {n_agents} agents connected")
            rss_streams = coordinator.rss()
            loaded_admin = admin_latency(admin)
            cpu0 = coordinator.seconds()
            time.sleep(idle_seconds)  # with --report-seconds 0 nothing is sent: ~0
            idle_cpu = (coordinator.seconds() - cpu0) / idle_seconds
            # The change's cost: SetPriority until every agent applied it and its report landed, with no
            # poll of the coordinator (the agents tell the benchmark); the CPU window ends once the
            # coordinator is idle again after the last round.
            sent: dict[int, float] = {}
            cpu0, by_process0 = coordinator.seconds(), coordinator.by_process()
            for i in range(rounds):
                generation = set_priority(admin, i, sent)
                agents.wait_all_applied(generation, timeout=120)
                time.sleep(ROUND_GAP_SECONDS)
            wait_idle(coordinator)
            round_cpu = (coordinator.seconds() - cpu0) / rounds
            used = {pid: t - by_process0.get(pid, 0.0) for pid, t in coordinator.by_process().items()}
            main_cpu = used.pop(coordinator.process.pid) / rounds
            busiest_child_cpu = max(used.values(), default=0.0) / rounds
            cluster.wait_for(lambda: all_applied(admin, n_agents, generation), timeout=120, interval=0.25,
                             what=f"generation {generation} listed")
            # Then, in rounds of their own, until ListNodes shows every node at it (polls load the coordinator).
            listed_sent: dict[int, float] = {}
            known: list[float] = []
            for i in range(rounds, rounds + max(3, rounds // 2)):
                generation = set_priority(admin, i, listed_sent)
                cluster.wait_for(lambda: all_applied(admin, n_agents, generation), timeout=120,
                                 interval=0.02 if n_agents <= 100 else 0.25, what=f"generation {generation} listed")
                known.append(time.time() - listed_sent[generation])
                time.sleep(ROUND_GAP_SECONDS)
        applied, retries = agents.collect()
    finally:
        if agents:
            agents.kill()
        cluster.stop()
    every_agent = [max(applied[g]) - t0 for g, t0 in sent.items() if len(applied.get(g, ())) == n_agents]
    per_agent = [t - t0 for g, t0 in sent.items() for t in applied.get(g, ())]
    thousands = n_agents / 1000
    return {"agents": n_agents, "fan_out": fan_out_processes, "rounds": len(every_agent), "listed_rounds": len(known), "connect_s": connect_seconds,
            "p50_ms": 1000 * statistics.median(every_agent), "p99_ms": 1000 * percentile(every_agent, 99),
            "listed_p50_ms": 1000 * statistics.median(known), "listed_p99_ms": 1000 * percentile(known, 99),
            "agent_p50_ms": 1000 * statistics.median(per_agent), "retries": retries,
            "idle_admin_ms": 1000 * idle_admin, "loaded_admin_ms": 1000 * loaded_admin,
            "rss_mb_per_1000": (rss_streams - rss_idle) / MB / thousands, "rss_mb": rss_streams / MB,
            "idle_cpu_pct_per_1000": 100 * idle_cpu / thousands,
            "round_cpu_ms_per_1000": 1000 * round_cpu / thousands,
            "main_cpu_ms_per_1000": 1000 * main_cpu / thousands,
            "child_cpu_ms_per_1000": 1000 * busiest_child_cpu / thousands}


def status_seconds(n_users: int, n_nodes: int, times: int = 3) -> dict[str, float]:
    """Medians, in seconds, at n_users x n_nodes: the whole `vnodectl status` command (process start to
    exit, its table written to a pipe) as an admin runs it, with --json --summary and with --per-node (every
    (user, node) line); the Status RPC with every entry (answer received and parsed); and the
    baseline, one ListUsers round trip with every user. And a SetPriority alone and one made while a
    Status of every entry is in flight (Status is read on the store thread, encoded off it)."""
    users = [LocalUser(f"u{i:05d}", 100_000 + i, 1 + i % 100) for i in range(n_users)]
    nodes = [LocalNode(f"s{i:03d}", (DEVICE,), 60 * MB, 60 * MB) for i in range(n_nodes)]
    cluster = LocalCluster(unique_name(f"bench-status-{n_users}"), users, nodes)
    samples: dict[str, list[float]] = {}

    def timed(what: str, call) -> None:
        t0 = time.perf_counter()
        call()
        samples.setdefault(what, []).append(time.perf_counter() - t0)

    def command(*args: str) -> None:
        result = subprocess.run([sys.executable, "-m", "vnode_sync.ctl.main", "--coordinator", cluster.address,
                                 "--insecure", "status", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert result.returncode == 0 and result.stdout.count(b"\n") >= n_users, result.stderr
    try:
        cluster.start_coordinator()
        with grpc.insecure_channel(cluster.address, options=[("grpc.max_receive_message_length", 1 << 30)]) as ch:
            admin = pb_grpc.AdminStub(ch)
            admin.Status(pb.StatusRequest(), timeout=120)  # warm: the generation's snapshot is read once
            for _ in range(times):
                timed("vnodectl status", lambda: command())
                timed("vnodectl status --json --summary", lambda: command("--json", "--summary"))
                timed("vnodectl status --per-node", lambda: command("--per-node"))
                timed("Status RPC, every entry", lambda: admin.Status(pb.StatusRequest(), timeout=120))
                timed("ListUsers (baseline)", lambda: admin.ListUsers(pb.ListUsersRequest(), timeout=120))
            for priority in range(2, 2 + 2 * times, 2):   # after the others: each changes the generation
                timed("SetPriority alone", lambda: admin.SetPriority(
                    pb.SetPriorityRequest(user="u00000", priority=priority), timeout=120))
                pending = admin.Status.future(pb.StatusRequest(), timeout=120)
                time.sleep(0.3)   # the Status is being read, then encoded
                timed("SetPriority during a Status", lambda: admin.SetPriority(
                    pb.SetPriorityRequest(user="u00000", priority=priority + 1), timeout=120))
                pending.result()
            status = admin.Status(pb.StatusRequest(), timeout=120)
        assert len(status.users) == n_users and all(len(u.nodes) == n_nodes for u in status.users)
        return {what: statistics.median(values) for what, values in samples.items()}
    finally:
        cluster.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, nargs="*", default=[100, 1000, 10000])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--report-seconds", type=float, default=REPORT_SECONDS,
                        help="each agent's usage report period (0: only after a new state)")
    parser.add_argument("--fan-out-processes", type=int, nargs="*", default=[1],
                        help="run each size with each of these coordinator fan_out_processes settings")
    parser.add_argument("--no-status", action="store_true", help="skip the 10,000 users x 100 nodes status")
    args = parser.parse_args()
    raise_open_files_limit()  # inherited by the coordinator and the agent processes
    results = []
    for n in args.agents:
        for processes in args.fan_out_processes:
            # The largest size runs fewer rounds: the machine's cores are shared.
            results.append(run(n, args.rounds if n < 10_000 else max(3, args.rounds // 4), args.report_seconds,
                               processes))
            r = results[-1]
            print(f"# {n} agents, {processes} fan-out process(es): connected and applied in {r['connect_s']:.1f} s; "
                  f"agents' retries: {r['retries'] or 'none'}; load {os.getloadavg()[0]:.1f}", flush=True)
    base = results[0] if results else None
    print(f"{'agents':>7} {'fan-out':>7} {'rounds':>6} {'p50 ms':>8} {'p99 ms':>8} {'list p50':>8} {'list p99':>8} {'p50/RTT':>8} "
          f"{'admin idle ms':>13} "
          f"{'admin streams ms':>16} {'streams/idle':>12} {'RSS MB':>7} {'MB/1000':>8} {'idle CPU %/1000':>15} "
          f"{'CPU ms/change/1000':>18} {'main':>6} {'busiest fan-out':>15} {'vs first run':>12}")
    for r in results:
        print(f"{r['agents']:>7} {r['fan_out']:>7} {r['rounds']:>6} {r['p50_ms']:>8.1f} {r['p99_ms']:>8.1f} "
              f"{r['listed_p50_ms']:>8.1f} {r['listed_p99_ms']:>8.1f} "
              f"{r['p50_ms'] / r['idle_admin_ms']:>8.1f} {r['idle_admin_ms']:>13.2f} {r['loaded_admin_ms']:>16.2f} "
              f"{r['loaded_admin_ms'] / r['idle_admin_ms']:>12.2f} {r['rss_mb']:>7.0f} {r['rss_mb_per_1000']:>8.1f} "
              f"{r['idle_cpu_pct_per_1000']:>15.2f} {r['round_cpu_ms_per_1000']:>18.1f} "
              f"{r['main_cpu_ms_per_1000']:>6.1f} {r['child_cpu_ms_per_1000']:>15.1f} "
              f"{r['round_cpu_ms_per_1000'] / base['round_cpu_ms_per_1000']:>12.2f}")
    print("(p50/p99: set-priority until every agent had the new state, on the agents' clocks, in rounds where nothing "
          "polls the coordinator; CPU per change: the coordinator's CPU over those rounds (SetPriority, the fan-out, every "
          "agent's report of it) per round per 1,000 agents; list: in further rounds, until ListNodes showed every node "
          "at it, from the agents' reports, polled every 20 ms, 250 ms above 100 agents)")
    print("(fan-out: the coordinator's fan_out_processes; CPU per change sums the coordinator and its fan-out processes; "
          "main: the coordinator process alone; busiest fan-out: the fan-out process that used the most; vs first run: CPU per change per 1,000 agents relative to the "
          "first line: ~1 means flat cost)")
    if not args.no_status:
        print(f"status at 10,000 users x 100 nodes (medians of 3; load {os.getloadavg()[0]:.1f}):")
        timings = status_seconds(10_000, 100)
        baseline = timings["ListUsers (baseline)"]
        for what, seconds in timings.items():
            print(f"  {what:<28} {1000 * seconds:>8.0f} ms  {seconds / baseline:>6.1f}x ListUsers")
        print(f"  SetPriority during a Status: {timings['SetPriority during a Status'] / timings['SetPriority alone']:.1f}x "
              "SetPriority alone")
    return 0


if __name__ == "__main__":
    sys.exit(main())
