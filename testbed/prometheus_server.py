"""A real Prometheus server (Debian's `prometheus` package) for tests and benchmarks.

Started by hand with its own config, storage dir and loopback port under a work dir named with
the run name (so testbed.leftovers finds a crashed run's daemon and files); stopped and removed
on exit. Queried through its HTTP API.

    with PrometheusServer(run_name, {"coordinator": ["127.0.0.1:9810"]}) as prom:
        prom.wait_for_targets_up()
        prom.query('vnode_sync_coordinator_generation')
"""

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

import yaml

from testbed.lifecycle import StartedService
from testbed.ports import free_port
from testbed.processes import stop_process

WHY_NO_PROMETHEUS = (None if shutil.which("prometheus") else
                     "needs the prometheus server (Debian's prometheus package; scripts/setup.d/prometheus.sh)")


def _duration(seconds: float) -> str:
    return f"{round(seconds * 1000)}ms"   # Prometheus durations take no fractions ("1.5s" is refused)


class PrometheusServer(StartedService):
    def __init__(self, name: str, jobs: dict[str, list[str]], scrape_seconds: float = 1.0,
                 rule_files: tuple[str, ...] = (), evaluation_seconds: float = 1.0,
                 job_settings: dict[str, dict] | None = None):
        self.name, self.jobs, self.scrape_seconds = name, jobs, scrape_seconds
        self.job_settings = job_settings or {}   # job -> more of its scrape config (e.g. metric_relabel_configs)
        self.rule_files, self.evaluation_seconds = rule_files, evaluation_seconds
        self.workdir = tempfile.mkdtemp(prefix=f"{name}.prometheus.")
        self.port = 0
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def config(self) -> str:
        path = os.path.join(self.workdir, "prometheus.yml")
        with open(path, "w") as f:
            yaml.safe_dump({
                "global": {"scrape_interval": _duration(self.scrape_seconds),
                           "scrape_timeout": _duration(self.scrape_seconds),
                           "evaluation_interval": _duration(self.evaluation_seconds)},
                "rule_files": list(self.rule_files),
                "scrape_configs": [{"job_name": job, "static_configs": [{"targets": targets}],
                                    **self.job_settings.get(job, {})}
                                   for job, targets in self.jobs.items()]}, f)
        return path

    def start(self, timeout: float = 30) -> "PrometheusServer":
        self.port = free_port()
        log = open(os.path.join(self.workdir, "prometheus.log"), "ab")
        self.process = subprocess.Popen(
            ["prometheus", f"--config.file={self.config()}", f"--storage.tsdb.path={self.workdir}/data",
             f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1h"],
            stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                with open(os.path.join(self.workdir, "prometheus.log")) as f:
                    last = f.read().strip().splitlines()[-3:]
                raise RuntimeError(f"prometheus exited {self.process.returncode}: {' | '.join(last)}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:
                    if answer.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"prometheus not ready after {timeout}s; see {self.workdir}/prometheus.log")

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _get(self, path: str, **params) -> dict:
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as answer:
            body = json.load(answer)
        if body.get("status") != "success":
            raise RuntimeError(f"prometheus {path} {params}: {body}")
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict]:
        """An instant query; each result is {"metric": labels, "value": [time, "value"]}."""
        params = {"query": expr} if at is None else {"query": expr, "time": f"{at:.3f}"}
        return self._get("/api/v1/query", **params)["result"]

    def values(self, expr: str, key: str, at: float | None = None) -> dict[str, float]:
        """The instant query's results as {label `key`'s value: float}."""
        return {r["metric"].get(key, ""): float(r["value"][1]) for r in self.query(expr, at)}

    def targets(self) -> list[dict]:
        return self._get("/api/v1/targets")["activeTargets"]

    def wait_for_targets_up(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            targets = self.targets()
            if targets and all(t["health"] == "up" for t in targets):
                return
            time.sleep(0.5)
        raise TimeoutError(f"scrape targets not all up after {timeout}s: "
                           f"{[(t['scrapeUrl'], t['health'], t.get('lastError')) for t in self.targets()]}")

    def alerts(self) -> list[dict]:
        return self._get("/api/v1/alerts")["alerts"]
