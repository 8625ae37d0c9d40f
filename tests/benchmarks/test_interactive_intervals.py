"""benchmarks.interactive_intervals: interactive_shares' output read back, passes pooled per run."""

from benchmarks.interactive_intervals import describe, main, parse_runs

OUTPUT = """\
# first run
load average at start: 0.1 0.2 0.3
[20 s] HDFS up, files written
  static pass 1 alone 1 MiB: p50 20 ms, p99 20 ms, all 20 20; her packets waited 0 ms a transfer
  wc-weights pass 1 alone 1 MiB: p50 30 ms, p99 30 ms, all 30 30; her packets waited 0 ms a transfer
  wc-weights pass 2 alone 1 MiB: p50 30 ms, p99 30 ms, all 30 30
  static pass 2 alone 1 MiB: p50 20 ms, p99 20 ms, all 20 20
alone          1 |       20 /      20 |         30 /        30   1.50   1.50 |
load average at start: 0.1 0.2 0.3
  static beside bob 4 MiB: p50 40 ms, p99 40 ms, all 40
  static-again beside bob 4 MiB: p50 20 ms, p99 20 ms, all 20; completeFile turned down for 1 of 1 (1 retries)
"""


def test_each_run_pools_its_passes_by_policy_phase_and_size_and_keeps_its_title():
    first, second = parse_runs(OUTPUT.splitlines())
    assert first.title == "first run" and second.title == ""
    assert dict(first.cells) == {("static", "alone", 1): [0.02] * 4, ("wc-weights", "alone", 1): [0.03] * 4}
    assert dict(second.cells) == {("static", "beside bob", 4): [0.04], ("static-again", "beside bob", 4): [0.02]}


def test_each_cell_is_divided_by_the_baselines_with_its_interval():
    first, second = parse_runs(OUTPUT.splitlines())
    assert describe(first, "static") == [
        "  alone        1 MiB wc-weights    n=4    p50  1.50 (1.50-1.50)  p99  1.50 (1.50-1.50)"]
    assert "static-again" in describe(second, "static")[0]
    assert describe(second, "wc-rates") == ["  no wc-rates transfers in this run"]


def test_a_file_without_transfers_or_missing_is_refused_in_one_line(tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("nothing here\n")
    assert main([str(empty)]) == 2
    assert main([str(tmp_path / "missing.txt")]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert errors == [f"interactive_intervals: {empty}: no interactive_shares transfers in it",
                      f"interactive_intervals: {tmp_path / 'missing.txt'}: No such file or directory"]


def test_cells_over_the_steal_limit_are_left_out_and_named():
    lines = ["load average at start: 0.1",
             "  static pass 1 beside bob 1 MiB: p50 20 ms, p99 20 ms, all 20 20; machine: steal 900 ms, iowait 5 ms",
             "  wc-weights pass 1 beside bob 1 MiB: p50 90 ms, p99 90 ms, all 90 90; machine: steal 34940 ms, iowait 5 ms",
             "  wc-weights pass 2 beside bob 1 MiB: p50 30 ms, p99 30 ms, all 30 30; machine: steal 10000 ms, iowait 5 ms"]
    kept, = parse_runs(lines, max_steal_ms=10_000)
    assert dict(kept.cells) == {("static", "beside bob", 1): [0.02, 0.02], ("wc-weights", "beside bob", 1): [0.03, 0.03]}
    assert kept.left_out == ["wc-weights pass 1 beside bob 1 MiB (steal 34.9 s)"]
    everything, = parse_runs(lines)
    assert everything.cells[("wc-weights", "beside bob", 1)] == [0.09, 0.09, 0.03, 0.03] and not everything.left_out
