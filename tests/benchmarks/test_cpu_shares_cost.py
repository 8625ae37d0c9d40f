"""The per-op cost benchmark of the CPU shares refuses bad input in one line (its figures need root and HDFS's jar)."""

import pytest

from benchmarks import cpu_shares_cost


@pytest.mark.parametrize("rounds", ["5", "2000000"])
def test_rounds_out_of_range_are_refused_in_one_line(rounds, capsys):
    assert cpu_shares_cost.main(["--rounds", rounds]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--rounds {rounds}: allowed 10-1000000" in err
