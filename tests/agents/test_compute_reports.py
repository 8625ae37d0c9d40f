"""The compute agent's connection reports: sent when the set changes, and sent again unchanged every
RESEND_SECONDS, so a coordinator that has just started or taken over (it keeps reports in memory
only) learns the connections, and the jobs that have VNodes by them, without waiting for a change."""

import grpc

from vnode_sync.agents.compute import main as compute
from vnode_sync.agents.compute.connections import OwnedConnection
from vnode_sync.agents.config import AgentConfig


class _Link:
    def __init__(self):
        self.reports = []

    def ReportConnections(self, report, timeout):
        self.reports.append([(c.client_port, c.job) for c in report.connections])


def test_an_unchanged_set_is_sent_again_only_after_the_resend_period(monkeypatch):
    config = AgentConfig.model_validate({"node_id": "cn1", "role": "compute", "coordinator": "127.0.0.1:1",
                                         "insecure": True, "compute": {"storage_endpoints": [":9866"]}})
    now = [1000.0]
    found = [OwnedConnection("10.0.0.5", 40001, "alice", "10.0.0.9", 9866, "77")]
    monkeypatch.setattr(compute.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(compute, "storage_connections", lambda users, endpoints, proc_root: list(found))
    agent = compute.ComputeAgent(config, config.compute, None, grpc.insecure_channel("127.0.0.1:1"))
    agent.link = link = _Link()
    agent.report_connections()
    now[0] += compute.RESEND_SECONDS - 1
    agent.report_connections()
    assert link.reports == [[(40001, "77")]], "unchanged within the period: not sent again"
    found.append(OwnedConnection("10.0.0.5", 40002, "alice", "10.0.0.9", 9866, ""))
    agent.report_connections()
    assert link.reports[-1] == [(40001, "77"), (40002, "")], "a change is sent at once"
    now[0] += compute.RESEND_SECONDS
    agent.report_connections()
    assert len(link.reports) == 3, "the same set again, the period over"
