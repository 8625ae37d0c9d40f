"""When the agent reports, and which weights a usage report was measured under.

The agent reports at once when it applies a new state (that report still measures the old
weights); the next report is due FLOW_SPAN_SECONDS later, the first whose rates (which span that
long at least) are measured wholly under the new weights. The coordinator's next weight step waits
for such a report from every node it sent weights (coordinator/api/control_loop.py): a step on rates
from before its own last weights would answer its own past and swing.

Between reports the agent looks at its demand every `probe_seconds` and reports at once when a user's
moved sharply (demand_summary.SHARP: it stopped, came back, halved or doubled), so the center lends
and gives back without waiting for the next report: once a rate span has passed since the last
report and since the weights in force took force (its rates are then new, and measured under them).
A look reads every VNode's counters, so a node with thousands of VNodes looks less often: looks take
at most PROBE_CPU_SHARE of one core (benchmarks.probe_cost: ~50 us per VNode here, so every 0.25 s up
to ~250 VNodes, every second at ~1,000).
"""

import math
from dataclasses import dataclass

from vnode_sync.agents.storage.demand import FLOW_SPAN_SECONDS

PROBE_CPU_SHARE = 0.05


@dataclass
class ReportInterval:
    allocation: int = 0         # the allocation sequence in force (0: none)
    since: float = -math.inf    # monotonic seconds: when it took force
    last_report: float = -math.inf

    def close(self, now: float, in_force: int) -> int:
        """A report at `now`: the sequence its rates were measured under, 0 if their span (the last
        FLOW_SPAN_SECONDS at least) reaches back past the moment it took force; from here on
        `in_force` is."""
        measured = self.allocation if now - self.since >= FLOW_SPAN_SECONDS else 0
        if in_force != self.allocation:
            self.allocation, self.since = in_force, now
        self.last_report = now
        return measured

    def may_report_early(self, now: float) -> bool:
        """Whether a sharp move seen at `now` may be reported now: its rates would span no time of
        the last report's, nor any before the weights in force took force."""
        return now - max(self.since, self.last_report) >= FLOW_SPAN_SECONDS


def next_report_in(applied_new: bool, report_seconds: float) -> float:
    """Seconds to the next report: a span after new weights, else the configured period."""
    return min(FLOW_SPAN_SECONDS, report_seconds) if applied_new else report_seconds


def next_look_in(probe_seconds: float, look_cpu_seconds: float) -> float:
    """Seconds to the next look between reports, after one that took `look_cpu_seconds` of CPU."""
    return max(probe_seconds, look_cpu_seconds / PROBE_CPU_SHARE)
