"""A real Prometheus scraping a simulated site: what today's storage-agent page and the bounded one cost.

    .venv/bin/python -m benchmarks.metrics_site [--agents 1000] [--users 1000] [--scrape-seconds 30] [--cycles 4]

Every agent is a lightweight HTTP endpoint on loopback (one asyncio process, as
benchmarks.simulated_agents holds thousands of streams) serving the exposition text a storage agent's
collector makes for a node with --users active users (blkio-like: one device, static limits, threads
placed, 1 % held): --agents endpoints serve today's collector (agents/storage/metrics.py at
--baseline, loaded from git) and --agents serve the bounded one of this tree (metrics.top_users).
Both pages are made once and served gzip'd when asked, as prometheus_client does. One Prometheus
scrapes both sets in the same run. Today's set is scraped in full (fetched, parsed: its
scrape_duration_seconds is real) but its samples are dropped by metric_relabel_configs before
storage, since its --agents x 9,000 series would not fit this host's memory; the series it would
make are its scrape_samples_scraped. The bounded set is stored, and Prometheus's head series say so.
"""

import argparse
import asyncio
import gzip
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from types import SimpleNamespace

from prometheus_client import CollectorRegistry, generate_latest

from benchmarks.metrics_cost import scrape
from benchmarks.simulated_agents import raise_open_files_limit
from testbed.names import unique_name
from testbed.prometheus_server import WHY_NO_PROMETHEUS, PrometheusServer
from vnode_sync.agents.storage.demand import Flow, VNodeDemand
from vnode_sync.agents.storage.reconciler import UsageSample
from vnode_sync.kernel.backend import HELD_ESTIMATED, VNodeUsage, vnode_name
from vnode_sync.kernel.types import DeviceLimits, DeviceNumber, IoCounters
from vnode_sync.metrics.settings import DEFAULT_TOP_USERS

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEVICE = DeviceNumber(8, 16)
MB = 1_000_000


def node_sample(users: int) -> UsageSample:
    """A node with `users` active users reading, user i at i KB/s, one in a hundred held at its limit."""
    usage, demand, limits, threads = {}, {}, {}, {}
    for i in range(users):
        vnode, held = vnode_name(f"u{i:05d}"), i % 100 == 7
        usage[vnode] = VNodeUsage({DEVICE: IoCounters(i * 4096 * 1000, i * 4096, i * 1000, i)})
        demand[vnode] = VNodeDemand({DEVICE: (Flow(i * 1000.0, held), Flow(0.0))}, held, float(i % 60), HELD_ESTIMATED)
        limits[vnode] = [DeviceLimits(DEVICE, read_bps=20 * MB, write_bps=10 * MB)]
        threads[vnode] = 2
    return UsageSample(time.time(), usage, demand, demand, limits, {}, threads)


def stand_in_agent(sample: UsageSample, top_users: int):
    """What a collector reads of a storage agent, as a blkio agent with this sample holds it."""
    return SimpleNamespace(
        config=SimpleNamespace(node_id="n00000", metrics=SimpleNamespace(top_users=top_users)),
        reconciler=SimpleNamespace(last_sample=sample, devices={"/dev/sdb": DEVICE}, applied_generation=7,
                                   passes=100, errors_found=0, not_enforcing=None),
        link=SimpleNamespace(known_generation=7, state="connected"),
        backend=SimpleNamespace(name="blkio-v1", placer=object(), volume_queues=()), failed_passes=0)


def baseline_collector_class(revision: str):
    """Today's StorageAgentCollector: agents/storage/metrics.py as it is at `revision`."""
    source = subprocess.run(["git", "-C", REPO, "show", f"{revision}:agents/storage/metrics.py"], check=True,
                            capture_output=True, text=True).stdout
    # Loaded from a file that is removed once loaded: the module keeps its code, the run leaves nothing.
    with tempfile.TemporaryDirectory(prefix="vnode-sync-bench.baseline.") as workdir:
        path = os.path.join(workdir, "baseline_metrics.py")
        with open(path, "w") as f:
            f.write(source)
        spec = importlib.util.spec_from_file_location("baseline_metrics", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module.StorageAgentCollector


def timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def page(collector) -> bytes:
    registry = CollectorRegistry()
    registry.register(collector)
    return generate_latest(registry)


class Pages:
    """Serves one page at many loopback ports, HTTP/1.1 keep-alive, gzip when the scraper accepts it."""

    def __init__(self, body: bytes):
        self.plain, self.gzipped = body, gzip.compress(body)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                zipped = b"gzip" in head.lower()
                body = self.gzipped if zipped else self.plain
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                             + (b"Content-Encoding: gzip\r\n" if zipped else b"")
                             + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()


def serve_site(sites: dict[str, Pages], agents: int) -> dict[str, list[str]]:
    """`agents` endpoints per page set on a background event loop; job -> its targets."""
    loop = asyncio.new_event_loop()
    targets: dict[str, list[str]] = {}
    ready = threading.Event()

    async def start() -> None:
        for job, pages in sites.items():
            for _ in range(agents):
                server = await asyncio.start_server(pages.serve, "127.0.0.1", 0, backlog=16)
                targets.setdefault(job, []).append(f"127.0.0.1:{server.sockets[0].getsockname()[1]}")
        ready.set()

    def run() -> None:
        loop.run_until_complete(start())
        loop.run_forever()

    threading.Thread(target=run, name="site", daemon=True).start()
    ready.wait()
    return targets


def own_metric(prometheus: PrometheusServer, name: str) -> float:
    with urllib.request.urlopen(f"{prometheus.url}/metrics", timeout=10) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=1000, help="simulated agents per exporter")
    parser.add_argument("--users", type=int, default=1000, help="active users on each node")
    parser.add_argument("--top-users", type=int, default=DEFAULT_TOP_USERS)
    parser.add_argument("--scrape-seconds", type=float, default=30.0)
    parser.add_argument("--cycles", type=int, default=4, help="scrape intervals measured after all targets are up")
    parser.add_argument("--baseline", default="87a272f", help="the revision whose collector is today's")
    args = parser.parse_args(argv)
    if WHY_NO_PROMETHEUS:
        print(f"metrics_site: error: {WHY_NO_PROMETHEUS}", file=sys.stderr)
        return 2
    from vnode_sync.agents.storage.metrics import StorageAgentCollector

    raise_open_files_limit()
    sample = node_sample(args.users)
    collectors = {"today": baseline_collector_class(args.baseline)(stand_in_agent(sample, args.top_users)),
                  "bounded": StorageAgentCollector(stand_in_agent(sample, args.top_users), args.top_users)}
    bodies, made = {}, {}
    for job, collector in collectors.items():
        bodies[job] = page(collector)
        # What making the page costs the agent at each scrape (its own CPU; the endpoints below serve it made).
        made[job] = min(timed(lambda: page(collector)) for _ in range(5))
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"one node, {args.users} active users, one device (top_users {args.top_users}):")
    for job, body in bodies.items():
        samples = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
        print(f"  {job:>7}: {samples} samples, {len(body) / 1024:.0f} KiB ({len(gzip.compress(body)) / 1024:.0f} KiB "
              f"gzip'd), made by the collector in {made[job] * 1000:.1f} ms (best of 5)")
    targets = serve_site({job: Pages(body) for job, body in bodies.items()}, args.agents)
    one = {job: min(scrape(f"http://{t[0]}/metrics")[0] for _ in range(5)) for job, t in targets.items()}
    drop = {"metric_relabel_configs": [{"source_labels": ["__name__"], "regex": ".+", "action": "drop"}]}
    start = time.time()
    with PrometheusServer(unique_name("metrics-site"), targets, scrape_seconds=args.scrape_seconds,
                          job_settings={"today": drop}) as prometheus:
        prometheus.wait_for_targets_up(timeout=4 * args.scrape_seconds + 60)
        up_at = time.time()
        cpu0 = own_metric(prometheus, "process_cpu_seconds_total")
        time.sleep(args.cycles * args.scrape_seconds)
        cpu = own_metric(prometheus, "process_cpu_seconds_total") - cpu0
        window = f"{int(args.cycles * args.scrape_seconds)}s"

        def by_job(expr: str) -> dict[str, float]:
            return prometheus.values(expr, "job")
        results = {
            "targets up": by_job("count by (job) (up == 1)"),
            "samples per scrape, all targets (the series the site makes)": by_job(
                "sum by (job) (scrape_samples_scraped)"),
            "stored per scrape (after relabelling)": by_job("sum by (job) (scrape_samples_post_metric_relabeling)"),
            "scrape time per target, mean (s)": by_job(
                f"avg by (job) (avg_over_time(scrape_duration_seconds[{window}]))"),
            "scrape time per target, p99 (s)": by_job(
                f"quantile by (job) (0.99, max_over_time(scrape_duration_seconds[{window}]))"),
            "scrape time, all targets of a cycle summed (s)": by_job(
                f"sum by (job) (avg_over_time(scrape_duration_seconds[{window}]))"),
        }
        rss = own_metric(prometheus, "process_resident_memory_bytes")
        head_series = own_metric(prometheus, "prometheus_tsdb_head_series")
    print(f"Prometheus {args.scrape_seconds:g} s scrape interval, {args.agents} agents per exporter, {args.cycles} "
          f"intervals measured ({time.time() - start:.0f} s in all, targets up after {up_at - start:.0f} s):")
    for what, values in results.items():
        print(f"  {what}: " + ", ".join(f"{job} {values.get(job, float('nan')):.4g}" for job in ("today", "bounded")))
    print("  one scrape by a client, best of 5 (s): " + ", ".join(f"{job} {t:.4f}" for job, t in one.items()))
    share = 100 * cpu / (args.cycles * args.scrape_seconds)
    print(f"  Prometheus head series {head_series:.0f} (the bounded set stored; today's dropped), resident memory "
          f"{rss / 2**20:.0f} MiB, CPU {cpu:.1f} s over the {window} ({share:.0f} % of a core)")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(json.dumps({"results": results, "client_scrape_seconds": one, "head_series": head_series, "rss": rss,
                      "cpu_seconds": cpu, "collector_seconds": made}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
