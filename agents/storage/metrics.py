"""The storage agent's Prometheus metrics (docs/metrics.md).

Per-user series come from the reconciler's last usage sample, taken every report interval for
the coordinator anyway: a scrape reads memory only, never the kernel and never the capture
loop's lock, so its cost does not depend on the backend and it cannot delay a capture. Capture
latency is the one value observed as it happens (a histogram), once per new handler thread.

Series are bounded by the agent's configuration, whatever the site's users: `user` takes the
`metrics.top_users` users held or busiest on this node (agents/storage/top_users.py), the default
VNode (user="(default)") and user="(other)" for all the rest (no user name can be either); `device`
only on the node's totals, by the agent's devices; `node` is this agent's node id, `volume` by the
node's data volumes (a DataNode's storage IDs); no label per thread, connection or job.
"""

import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from vnode_sync.agents.handlers.base import HandlerThread
from vnode_sync.agents.storage.agent import StorageAgent
from vnode_sync.agents.storage.link import LINK_STATES
from vnode_sync.agents.storage.top_users import IO_FIELDS, OTHER_USER, TopUsers, View
from vnode_sync.kernel.backend import user_of_vnode
from vnode_sync.kernel.procfs import thread_start_seconds
from vnode_sync.kernel.types import WHOLE_NODE
from vnode_sync.metrics.settings import DEFAULT_TOP_USERS

DEFAULT_USER = "(default)"
WHOLE_NODE_LABEL = "(node)"   # the device label of a backend that counts the node as a whole (the DataNode's)
# Birth of a handler thread -> in its user's VNode. Measured 10-25 ms p99 on an idle host
# (benchmarks/capture_latency); /proc's start time has 10 ms resolution (USER_HZ 100).
CAPTURE_BUCKETS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
DIRECTIONS = (("read", "read_bps"), ("write", "write_bps"))


def user_label(vnode: str) -> str:
    return user_of_vnode(vnode) or DEFAULT_USER


class CaptureTimer:
    """Times each handler thread from its birth (/proc start time) to its first placement. Threads
    born before the agent started are not timed: their wait was the agent's absence."""

    def __init__(self, registry: CollectorRegistry, node_id: str, proc_root: str = "/proc"):
        self.proc_root = proc_root
        self.started = time.clock_gettime(time.CLOCK_BOOTTIME)
        self.histogram = Histogram("vnode_sync_agent_capture_latency_seconds",
                                   "From a handler thread's birth to its placement in its first VNode",
                                   ["node"], buckets=CAPTURE_BUCKETS, registry=registry).labels(node_id)

    def placed(self, thread: HandlerThread) -> None:
        born = thread_start_seconds(self.proc_root, thread.pid, thread.tid)
        if born is not None and born >= self.started:
            self.histogram.observe(max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - born))


class StorageAgentCollector(Collector):
    def __init__(self, agent: StorageAgent, top_users: int | None = None):
        self.agent = agent
        settings = agent.config.metrics
        self.top = TopUsers(top_users if top_users is not None else
                            settings.top_users if settings is not None else DEFAULT_TOP_USERS)

    def collect(self) -> Iterator[Metric]:
        agent, node = self.agent, self.agent.config.node_id
        yield from self._agent(node)
        yield from self._volume_queues(node)
        sample = agent.reconciler.last_sample
        if sample is None:
            return
        view = self.top.view(sample)
        names = {dev: name for name, dev in dict(agent.reconciler.devices).items()}  # a copy: apply may add one
        names[WHOLE_NODE] = WHOLE_NODE_LABEL
        yield from self._node_totals(node, names, view)
        io = {key: CounterMetricFamily(f"vnode_sync_user_{key}", text, labels=["node", "user"])
              for key, text in (("read_bytes", "Bytes the user's VNode read from the node's devices"),
                                ("written_bytes", "Bytes the user's VNode wrote to the node's devices"),
                                ("reads", "Read operations of the user's VNode (Lustre: RPCs)"),
                                ("writes", "Write operations of the user's VNode (Lustre: RPCs)"))}
        for vnode in view.named:
            usage = sample.usage.get(vnode)
            if usage is not None:
                counts = [sum(getattr(c, f) for dev, c in usage.devices.items() if dev in names) for f in IO_FIELDS]
                for family, value in zip(io.values(), counts):
                    family.add_metric([node, user_label(vnode)], value)
        other = [sum(c[i] for dev, c in view.other.devices.items() if dev in names) for i in range(len(IO_FIELDS))]
        for family, value in zip(io.values(), other):
            family.add_metric([node, OTHER_USER], value)
        yield from io.values()
        yield from self._limits(node, names, {v: sample.limits[v] for v in view.named if v in sample.limits},
                                sample.node_limits)
        yield from self._held(node, sample, view)
        if agent.backend.placer is not None:
            threads = GaugeMetricFamily("vnode_sync_user_threads", "Handler threads the agent placed in the "
                                        "user's VNode", labels=["node", "user"])
            for vnode in view.named:
                if vnode in sample.limits:
                    threads.add_metric([node, user_label(vnode)], sample.threads.get(vnode, 0))
            threads.add_metric([node, OTHER_USER], view.other_threads)
            yield threads

    def _node_totals(self, node: str, names: dict, view: View) -> Iterator[Metric]:
        """Every VNode's I/O per device, and how many users the node has and holds: always, whatever
        top_users names."""
        io = [CounterMetricFamily(f"vnode_sync_node_{key}", text, labels=["node", "device"])
              for key, text in (("read_bytes", "Bytes every VNode on the node read from the device"),
                                ("written_bytes", "Bytes every VNode on the node wrote to the device"),
                                ("reads", "Read operations of every VNode on the device (Lustre: RPCs)"),
                                ("writes", "Write operations of every VNode on the device (Lustre: RPCs)"))]
        for dev, counts in view.node.devices.items():
            if dev in names:
                for family, value in zip(io, counts):
                    family.add_metric([node, names[dev]], value)
        yield from io
        yield _one(GaugeMetricFamily("vnode_sync_node_users", "Users with a VNode on the node",
                                     labels=["node"]), node, view.users)
        yield _one(GaugeMetricFamily("vnode_sync_node_users_held", "Users held at their limit on the node over "
                                     "the last report interval", labels=["node"]), node, view.users_held)

    def _agent(self, node: str) -> Iterator[Metric]:
        agent = self.agent
        info = GaugeMetricFamily("vnode_sync_agent_info", "The agent's role and enforcement backend (always 1)",
                                 labels=["node", "role", "backend"])
        info.add_metric([node, "storage", agent.backend.name], 1)
        yield info
        applied = agent.reconciler.applied_generation
        coordinator = agent.link.known_generation
        for name, text, value in (
                ("vnode_sync_agent_applied_generation", "The desired state's generation this agent enforces", applied),
                ("vnode_sync_agent_coordinator_generation", "The newest generation the coordinator sent this agent",
                 coordinator),
                ("vnode_sync_agent_generation_lag", "Generations the agent is behind the coordinator's as it last "
                 "heard it", max(0, coordinator - applied) if applied else 0)):
            yield _one(GaugeMetricFamily(name, text, labels=["node"]), node, value)
        state = GaugeMetricFamily("vnode_sync_agent_coordinator_connection_state",
                                  "1 for the state of the agent's link to the coordinator: connecting, connected "
                                  "(stream open), unreachable, refused (the coordinator refused this agent)",
                                  labels=["node", "state"])
        for name in LINK_STATES:
            state.add_metric([node, name], 1 if agent.link.state == name else 0)
        yield state
        reconciler = agent.reconciler
        yield _one(CounterMetricFamily("vnode_sync_agent_reconcile_passes", "Reconcile passes run (new state, "
                                       "periodic resync, fallback)", labels=["node"]), node, reconciler.passes)
        yield _one(CounterMetricFamily("vnode_sync_agent_reconcile_errors", "What reconcile passes could not do "
                                       "(one per error found in a pass, and one per pass that failed)",
                                       labels=["node"]), node, reconciler.errors_found + agent.failed_passes)
        yield _one(GaugeMetricFamily("vnode_sync_agent_enforcing", "1 if the backend enforced the shares at the "
                                     "last reconcile pass, 0 if not (e.g. a DataNode hook not woven; the reason is "
                                     "in the log and in vnodectl nodes)", labels=["node"]),
                   node, 0 if reconciler.not_enforcing else 1)

    def _volume_queues(self, node: str) -> Iterator[Metric]:
        """Each data volume's dispatcher (the DataNode's SFQ(D)), as the backend's last usage read left it."""
        queues = self.agent.backend.volume_queues
        if not queues:
            return
        depth = GaugeMetricFamily("vnode_sync_volume_depth", "Packets the volume's dispatcher lets be in flight at "
                                  "once (the least depth at which its throughput stops rising)", labels=["node", "volume"])
        moved = GaugeMetricFamily("vnode_sync_volume_moved_bytes_per_second", "What the volume moved over the "
                                  "dispatcher's last interval, reads and writes", labels=["node", "volume"])
        waiting = GaugeMetricFamily("vnode_sync_volume_waiting_packets", "Packets waiting for a slot at the volume",
                                    labels=["node", "volume"])
        for queue in queues:
            labels = [node, queue.volume]
            depth.add_metric(labels, queue.depth)
            moved.add_metric(labels, queue.moved_bytes_per_second)
            waiting.add_metric(labels, queue.waiting)
        yield depth
        yield moved
        yield waiting

    def _limits(self, node: str, names: dict, limits: dict, node_limits: dict) -> Iterator[Metric]:
        rate = GaugeMetricFamily("vnode_sync_user_limit_bytes_per_second",
                                 "The user's limit in force on the node, summed over its devices: its static share "
                                 "or its work-conserving allocation (absent: no limit)",
                                 labels=["node", "user", "direction"])
        weight = GaugeMetricFamily("vnode_sync_user_weight", "The user's BFQ weight on the node (work-conserving "
                                   "sharing on a BFQ host; the largest of its devices')", labels=["node", "user"])
        for vnode, device_limits in limits.items():
            user = user_label(vnode)
            on_node = [limit for limit in device_limits if limit.device in names]
            for direction, field in DIRECTIONS:
                if vnode in node_limits:   # a backend that shares the node enforces its share of the node
                    total = getattr(node_limits[vnode], direction).ceiling_bps
                else:
                    total = sum(getattr(limit, field) for limit in on_node)
                if total:
                    rate.add_metric([node, user, direction], total)
            weights = [limit.weight for limit in on_node if limit.weight]
            if weights:
                weight.add_metric([node, user], max(weights))
        yield rate
        yield weight

    def _held(self, node: str, sample, view: View) -> Iterator[Metric]:
        held_seconds = CounterMetricFamily("vnode_sync_user_held_seconds", "Wall-clock seconds the user's VNode "
                                           "was held at its limit on this node (source: measured by the backend's "
                                           "throttle, or estimated; (other): summed over the users it folds)",
                                           labels=["node", "user", "source"])
        held_now = GaugeMetricFamily("vnode_sync_user_held", "1 if the user's VNode was held at its limit over the "
                                     "last report interval ((other): how many of the users it folds were)",
                                     labels=["node", "user", "source"])
        for vnode in view.named:
            state = sample.held.get(vnode)
            if state is not None:
                labels = [node, user_label(vnode), state.source]
                held_seconds.add_metric(labels, state.seconds)
                held_now.add_metric(labels, 1 if state.held else 0)
        other = view.other
        if other.held_source is not None:
            held_seconds.add_metric([node, OTHER_USER, other.held_source], other.held_seconds)
            held_now.add_metric([node, OTHER_USER, other.held_source], view.other_held)
        yield held_seconds
        yield held_now
        wait = CounterMetricFamily("vnode_sync_user_throttle_wait_seconds", "Seconds the backend's throttle made the "
                                   "user's transfers wait, summed over transfers (measured backends only)",
                                   labels=["node", "user", "direction"])
        for vnode in view.named:
            usage = sample.usage.get(vnode)
            if usage is None:
                continue
            for direction, value in (("read", usage.read_wait_seconds), ("write", usage.write_wait_seconds)):
                if value is not None:
                    wait.add_metric([node, user_label(vnode), direction], value)
        if other.measured_waits:
            wait.add_metric([node, OTHER_USER, "read"], other.read_wait_seconds)
            wait.add_metric([node, OTHER_USER, "write"], other.write_wait_seconds)
        yield wait


def _one(family, node: str, value: float):
    family.add_metric([node], value)
    return family

