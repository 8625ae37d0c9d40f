"""The benchmarks' one scenario runner: the order policies run in, what each cell records (its CPU and
the machine's steal), the seeds it accepts, and the distribution and worst scenario it reports."""

import argparse
import os

import pytest

from benchmarks import scenario_runner
from benchmarks.scenario_runner import as_given, distribution, in_passes, parse_seeds, rotated, run_cell, run_cells, worst

STAT = "cpu  {user} 0 100 5000 40 0 0 {steal} 0 0\n"


def test_rotated_orders_put_each_policy_first_second_and_last_alike_over_the_seeds():
    orders = [rotated(seed, ("none", "static", "wc")) for seed in range(6)]
    assert [o[0] for o in orders[:3]] == ["none", "static", "wc"]     # each leads in turn
    assert orders[3] == tuple(reversed(orders[0]))                    # then the cycle runs backwards
    for position in range(3):
        assert sorted(order[position] for order in orders) == ["none", "none", "static", "static", "wc", "wc"]


def test_each_pass_runs_the_policies_in_the_reverse_order_of_the_one_before():
    assert in_passes(["static", "wc-weights"], 1) == [(0, "static"), (0, "wc-weights")]
    assert in_passes(["static", "wc-weights"], 3) == [(0, "static"), (0, "wc-weights"), (1, "wc-weights"),
                                                      (1, "static"), (2, "static"), (2, "wc-weights")]


def test_cells_run_in_the_order_given_and_come_back_in_the_policies_order():
    ran = []
    policies = {name: (lambda scenario, name=name: ran.append((scenario, name)) or f"{name}:{scenario}")
                for name in ("none", "static", "wc")}
    done = list(run_cells([(1, "a"), (2, "b")], policies, rotated))
    assert ran == [("a", p) for p in rotated(1, tuple(policies))] + [("b", p) for p in rotated(2, tuple(policies))]
    assert [(seed, scenario, list(cells)) for seed, scenario, cells in done] == [
        (1, "a", ["none", "static", "wc"]), (2, "b", ["none", "static", "wc"])]
    assert done[1][2]["wc"].outcome == "wc:b" and done[1][2]["wc"].seed == 2
    assert list(run_cells([(0, "x")], policies, as_given))[0][2]["none"].outcome == "none:x"


def test_a_cell_records_the_steal_the_machine_lost_while_it_ran(tmp_path):
    (tmp_path / "stat").write_text(STAT.format(user=1000, steal=7))

    def busy_while_the_host_steals():
        (tmp_path / "stat").write_text(STAT.format(user=1300, steal=7 + 3 * os.sysconf("SC_CLK_TCK")))
        return sum(range(100_000))

    cell = run_cell(4, "wc", busy_while_the_host_steals, proc=str(tmp_path))
    assert (cell.seed, cell.policy, cell.outcome) == (4, "wc", sum(range(100_000)))
    assert cell.steal_seconds == pytest.approx(3.0)
    assert cell.cpu_seconds > 0


def test_a_cell_on_this_machine_reads_the_real_proc():
    cell = run_cell(0, "none", lambda: None)
    assert cell.steal_seconds >= 0 and cell.cpu_seconds >= 0


def test_seeds_are_ranges_and_lists_and_anything_else_is_refused():
    assert parse_seeds("0-3,7") == [0, 1, 2, 3, 7]
    for bad in ("", "a", "3-x", "-1"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_seeds(bad)


def test_the_distribution_names_its_quantiles_and_the_worst_is_the_lowest_score():
    assert distribution([1.0, 0.5, 0.75]) == "min 0.5000 p5 0.5250 median 0.7500"
    assert distribution([2, 4], (0, 100), digits=1) == "min 2.0 max 4.0"
    assert worst({3: 0.9, 5: 0.2, 8: 0.2}) == 5
    assert scenario_runner.steal_line([]) == "steal: 0.0 s over 0 cells, at most 0.0 s in one"
