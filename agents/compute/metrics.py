"""The compute agent's Prometheus metrics (docs/metrics.md): read from the agent at scrape time."""

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from vnode_sync.agents.compute.main import ComputeAgent

# The compute agent has no stream: its link is as its last connection report went.
_STATES = (("connecting", None), ("connected", True), ("unreachable", False))


class ComputeAgentCollector(Collector):
    def __init__(self, agent: ComputeAgent):
        self.agent = agent

    def collect(self) -> Iterator[Metric]:
        agent, node = self.agent, self.agent.config.node_id
        info = GaugeMetricFamily("vnode_sync_agent_info", "The agent's role and enforcement backend (always 1)",
                                 labels=["node", "role", "backend"])
        info.add_metric([node, "compute", agent.backend.name if agent.backend else "none"], 1)
        yield info
        state = GaugeMetricFamily("vnode_sync_agent_coordinator_connection_state",
                                  "1 for the state of the agent's link to the coordinator (compute agents: as the "
                                  "last connection report went)", labels=["node", "state"])
        for name, reachable in _STATES:
            state.add_metric([node, name], 1 if agent.reachable is reachable else 0)
        yield state
        for family, value in (
                (GaugeMetricFamily("vnode_sync_compute_connections_reported", "Storage connections of users this "
                                   "host last reported to the coordinator", labels=["node"]),
                 agent.connections_reported),
                (CounterMetricFamily("vnode_sync_compute_report_errors", "Connection reports the coordinator did "
                                     "not take (retried)", labels=["node"]), agent.report_failures),
                (CounterMetricFamily("vnode_sync_compute_job_processes_placed", "Batch-job processes put in their "
                                     "user's VNode on this host", labels=["node"]), agent.processes_placed)):
            family.add_metric([node], value)
            yield family
