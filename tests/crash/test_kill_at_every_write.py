"""A kill at every syscall that writes state (strace fault injection, testbed/crash_points.py) in:
the coordinator's first start, a set-priority, a move into a group, a storage-node change, the storage agent's
state-cache write, a batch spool write. After each kill the next start holds the state before or the state after, never neither, and
never refuses a store it never finished. Each test prints its counts (pytest -s), as
`python -m testbed.crash_scenarios` does."""

import pytest

from testbed import crash_points, crash_scenarios

WHY_NOT = crash_points.missing()


@pytest.mark.slow
@pytest.mark.skipif(WHY_NOT is not None, reason=f"no fault injection here: {WHY_NOT}")
@pytest.mark.parametrize("name", list(crash_scenarios.SCENARIOS))
def test_a_kill_at_any_write_leaves_the_state_before_or_after_it(name, tmp_path):
    report = crash_scenarios.run(name, str(tmp_path))
    print(report.summary())
    assert report.points, "the step writes state"
    assert not report.failures, "\n".join(report.failures[:10])
    assert sum(report.outcomes.values()) == len(report.points), "one outcome per kill point"
    assert report.outcomes["before"] and report.outcomes["after"], "the kills fell on both sides of the commit"
