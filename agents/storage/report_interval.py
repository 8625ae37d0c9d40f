"""Which weights a usage report was measured under.

The agent reports at once when it applies a new state (that report still measures the old
weights); the next report is due FLOW_SPAN_SECONDS later, the first whose rates (which span that
long at least) are measured wholly under the new weights. The coordinator's next weight step waits
for such a report from every node it sent weights (coordinator/control_loop.py): a step on rates
from before its own last weights would answer its own past and swing.
"""

import math
from dataclasses import dataclass

from vnode_sync.agents.storage.demand import FLOW_SPAN_SECONDS


@dataclass
class ReportInterval:
    allocation: int = 0         # the allocation sequence in force (0: none)
    since: float = -math.inf    # monotonic seconds: when it took force

    def close(self, now: float, in_force: int) -> int:
        """A report at `now`: the sequence its rates were measured under, 0 if their span (the last
        FLOW_SPAN_SECONDS at least) reaches back past the moment it took force; from here on
        `in_force` is."""
        measured = self.allocation if now - self.since >= FLOW_SPAN_SECONDS else 0
        if in_force != self.allocation:
            self.allocation, self.since = in_force, now
        return measured


def next_report_in(applied_new: bool, report_seconds: float) -> float:
    """Seconds to the next report: a span after new weights, else the configured period."""
    return min(FLOW_SPAN_SECONDS, report_seconds) if applied_new else report_seconds
