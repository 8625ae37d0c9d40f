"""A usage report names the allocation its rates were measured under, and the report after new
weights comes a rate span later."""

import pytest

from vnode_sync.agents.storage.demand import FLOW_SPAN_SECONDS
from vnode_sync.agents.storage.report_interval import PROBE_CPU_SHARE, ReportInterval, next_look_in, next_report_in


def test_a_report_names_the_allocation_in_force_over_its_whole_rate_span_or_none():
    interval = ReportInterval()
    assert interval.close(100.0, in_force=0) == 0          # the first: no interval yet
    assert interval.close(101.0, in_force=7) == 0          # measured with no allocation; 7 applied now
    assert interval.close(101.0 + FLOW_SPAN_SECONDS, in_force=7) == 7
    assert interval.close(102.0, in_force=9) == 7          # the report as 9 is applied measures 7
    # Reports more often than the rate span: 9 is named once the span lies wholly after it took force.
    assert interval.close(102.0 + FLOW_SPAN_SECONDS / 2, in_force=9) == 0
    assert interval.close(102.0 + FLOW_SPAN_SECONDS, in_force=9) == 9
    assert interval.close(102.0 + 1.5 * FLOW_SPAN_SECONDS, in_force=9) == 9


def test_after_new_weights_the_next_report_is_a_rate_span_away_else_the_configured_period():
    assert next_report_in(applied_new=True, report_seconds=1.0) == FLOW_SPAN_SECONDS
    assert next_report_in(applied_new=True, report_seconds=0.2) == 0.2
    assert next_report_in(applied_new=False, report_seconds=1.0) == 1.0


def test_a_sharp_move_is_reported_early_only_once_its_rates_are_wholly_new_and_under_the_weights_in_force():
    interval = ReportInterval()
    interval.close(100.0, in_force=7)                       # 7 applied at 100
    assert not interval.may_report_early(100.0 + FLOW_SPAN_SECONDS / 2)
    assert interval.may_report_early(100.0 + FLOW_SPAN_SECONDS)
    interval.close(101.0, in_force=7)                       # a regular report
    assert not interval.may_report_early(101.0 + FLOW_SPAN_SECONDS / 2)
    assert interval.may_report_early(101.0 + FLOW_SPAN_SECONDS)
    interval.close(102.0, in_force=9)                       # 9 applied
    assert not interval.may_report_early(102.0 + FLOW_SPAN_SECONDS * 0.9)


def test_looks_between_reports_come_less_often_where_they_would_take_more_than_their_share_of_a_core():
    assert next_look_in(0.25, look_cpu_seconds=0.001) == 0.25
    slow = next_look_in(0.25, look_cpu_seconds=0.05)         # a look at ~1,000 VNodes
    assert slow > 0.25 and 0.05 / slow == pytest.approx(PROBE_CPU_SHARE)
