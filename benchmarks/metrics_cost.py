"""What the metrics endpoint costs: scrape time and the storage agent's CPU with 1,000 users' VNodes.

    sudo .venv/bin/python -m benchmarks.metrics_cost [--users 1000] [--seconds 20] [--scrape-every 1]

Runs a real coordinator and a real storage agent (blkio-v1 VNodes on a loop device, one per active
user, usage reported every second) twice: with 10 users and with --users users. In each, in the same
run:
- the agent's CPU (utime+stime from /proc) over --seconds without scrapes, then over --seconds while
  a client scrapes its /metrics every --scrape-every seconds (Prometheus's default is 60 s, sites
  use 15 s; 1 s is a heavy case). The ratio with/without is the endpoint's cost to the agent.
- the scrape time (request to the last byte, over a fresh loopback connection) and the page's size
  and series; the scrape time at --users against 10 users is the baseline ratio.
- the coordinator's scrape time with the same users.
Both clusters run under one CPU-priority group (testbed.cpu_priority) so other work on a shared
host narrows the noise for both alike.
"""

import argparse
import contextlib
import os
import statistics
import sys
import time
import urllib.request

from benchmarks.percentile import percentile
from testbed.cpu_priority import cpu_priority
from testbed.local_cluster import LocalCluster, LocalNode, LocalUser
from testbed.loopdev import loop_device
from testbed.names import unique_name
from testbed.process_cpu import cpu_seconds
from testbed.ports import free_port

MB = 1_000_000
FIRST_UID = 71_000


def users(count: int) -> list[LocalUser]:
    return [LocalUser(f"mu{i:05d}", FIRST_UID + i, 1 + i % 100) for i in range(count)]


def scrape(url: str) -> tuple[float, int, int]:
    """(seconds to the last byte, bytes, sample lines) of one scrape."""
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as answer:
        body = answer.read()
    elapsed = time.perf_counter() - start
    lines = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    return elapsed, len(body), lines


def users_on_page(url: str) -> int:
    """The users the agent's page says the node has (it names only its top_users of them)."""
    with urllib.request.urlopen(url, timeout=30) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith("vnode_sync_node_users{"):
                return int(float(line.rsplit(" ", 1)[1]))
    return 0


def measure(name: str, device: str, count: int, seconds: float, every: float) -> dict:
    agent_port, coordinator_port = free_port(), free_port()
    node = LocalNode("node1", (device,), 1000 * MB, 1000 * MB, {"kind": "generic", "comm_pattern": "vs-nothing"},
                     {"metrics": {"listen": f"127.0.0.1:{agent_port}"}})
    with LocalCluster(f"{name}.u{count}", users(count), [node],
                      coordinator_settings={"metrics": {"listen": f"127.0.0.1:{coordinator_port}"}}) as cluster:
        agent = cluster.agents["node1"].pid
        url = f"http://127.0.0.1:{agent_port}/metrics"
        cluster.wait_for(lambda: users_on_page(url) >= count, timeout=60, what=f"{count} users' VNodes on the agent")
        time.sleep(2)   # past the first passes
        start = cpu_seconds(agent)
        time.sleep(seconds)
        idle_cpu = cpu_seconds(agent) - start
        times, sizes, lines = [], 0, 0
        start, deadline = cpu_seconds(agent), time.monotonic() + seconds
        next_scrape = time.monotonic()
        while time.monotonic() < deadline:
            elapsed, sizes, lines = scrape(url)
            times.append(elapsed)
            next_scrape += every
            time.sleep(max(0.0, next_scrape - time.monotonic()))
        scraped_cpu = cpu_seconds(agent) - start
        coordinator = [scrape(f"http://127.0.0.1:{coordinator_port}/metrics")[0] for _ in range(10)]
        return {"users": count, "idle_cpu": idle_cpu, "scraped_cpu": scraped_cpu, "scrapes": len(times),
                "scrape_p50": statistics.median(times), "scrape_p99": percentile(times, 99), "bytes": sizes,
                "series": lines, "coordinator_p50": statistics.median(coordinator), "seconds": seconds}


def report(result: dict) -> None:
    seconds = result["seconds"]
    print(f"  {result['users']:>5} users: page {result['bytes'] / 1024:.0f} KiB, {result['series']} samples; "
          f"scrape p50 {result['scrape_p50'] * 1000:.1f} ms, p99 {result['scrape_p99'] * 1000:.1f} ms "
          f"({result['scrapes']} scrapes); coordinator scrape p50 {result['coordinator_p50'] * 1000:.1f} ms")
    extra = result["scraped_cpu"] - result["idle_cpu"]
    print(f"         agent CPU: {100 * result['idle_cpu'] / seconds:.2f} % of a core without scrapes, "
          f"{100 * result['scraped_cpu'] / seconds:.2f} % with (ratio {result['scraped_cpu'] / result['idle_cpu']:.2f}); "
          f"{1000 * extra / max(1, result['scrapes']):.1f} ms of CPU per scrape")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each CPU measurement")
    parser.add_argument("--scrape-every", type=float, default=1.0, help="seconds between scrapes")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("metrics_cost: error: must run as root (it makes cgroups and a loop device)", file=sys.stderr)
        return 2
    name = unique_name("bench-metrics").replace("vnode-sync-test", "vnode-sync-bench")
    with contextlib.ExitStack() as stack:
        stack.enter_context(cpu_priority(f"{name}.cpu"))
        device, _ = stack.enter_context(loop_device(f"{name}.disk"))
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        baseline = measure(name, device, 10, args.seconds, args.scrape_every)
        heavy = measure(name, device, args.users, args.seconds, args.scrape_every)
    print(f"metrics endpoint cost, one scrape every {args.scrape_every:g} s, {args.seconds:g} s per measurement:")
    report(baseline)
    report(heavy)
    print(f"  scrape time {args.users} users / 10 users: p50 {heavy['scrape_p50'] / baseline['scrape_p50']:.1f}x")
    print(f"  agent CPU with / without scrapes at {args.users} users: "
          f"{heavy['scraped_cpu'] / heavy['idle_cpu']:.2f}x")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
