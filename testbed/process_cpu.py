"""The CPU that processes took, in seconds or over a span as a share of one core: what vnode-sync's
own coordinator and agents take from the DataNodes and clients they run beside on a small testbed.

    with CpuSpan({"coordinator": [pid], "agents": agent_pids}) as span:
        ...
    span.shares   # {"coordinator": 0.04, "agents": 0.11}; a role whose processes all ended early: None
"""

import contextlib
import time

import psutil

from testbed.local_cluster import LocalCluster


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of process PID so far (psutil.Error if it is gone)."""
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def _cpu_seconds_if_running(pid: int) -> float | None:
    with contextlib.suppress(psutil.Error):
        return cpu_seconds(pid)
    return None


class CpuSpan:
    def __init__(self, roles: dict[str, list[int]]):
        self.roles = roles
        self.shares: dict[str, float | None] = {}
        self._start: dict[int, float | None] = {}
        self._t0 = 0.0

    def __enter__(self) -> "CpuSpan":
        self._start = {pid: _cpu_seconds_if_running(pid) for pids in self.roles.values() for pid in pids}
        self._t0 = time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        elapsed = time.monotonic() - self._t0
        for role, pids in self.roles.items():
            used = []
            for pid in pids:
                start, end = self._start.get(pid), _cpu_seconds_if_running(pid)
                if start is not None and end is not None:
                    used.append(end - start)
            self.shares[role] = sum(used) / elapsed if used and elapsed > 0 else None

    def describe(self) -> str:
        """'coordinator 4.1 %, agents 11.0 % of a core' (a role not measured: '-')."""
        parts = [f"{role} {100 * share:.1f} %" if share is not None else f"{role} -"
                 for role, share in self.shares.items()]
        return ", ".join(parts) + " of a core"


def compact(shares: dict[str, float | None]) -> str:
    """CpuSpan.shares as '4/11 %' (% of a core per role, in order; '-': not measured), for a table column."""
    return "/".join("-" if share is None else f"{100 * share:.0f}" for share in shares.values()) + " %"


def cluster_roles(cluster: LocalCluster) -> dict[str, list[int]]:
    """The cluster's processes that are running, by role."""
    coordinator = cluster.coordinator
    running = coordinator is not None and coordinator.poll() is None
    return {"coordinator": [coordinator.pid] if running else [],
            "agents": [p.pid for p in cluster.agents.values() if p.poll() is None]}
