"""The handoff benchmark's reading of perf stat (no HDFS)."""

import subprocess

import pytest

from benchmarks import dispatch_handoffs

PERF_CSV = """
16713,,context-switches,12001874935,100.00,,
12003.45,msec,task-clock,12003450000,100.00,1.000,CPUs utilized
"""


def test_perf_stat_reads_switches_and_cpu_seconds(monkeypatch):
    seen = []

    def fake_run(argv, **kwargs):
        seen.append(argv)
        return subprocess.CompletedProcess(argv, 0, "", PERF_CSV)
    monkeypatch.setattr(dispatch_handoffs.subprocess, "run", fake_run)
    assert dispatch_handoffs.perf_stat(4242, 12) == (16713, pytest.approx(12.00345))
    assert seen[0][:6] == ["perf", "stat", "-x,", "-e", "context-switches,task-clock", "-p"] and "4242" in seen[0]


def test_a_bad_round_count_is_refused_before_anything_starts(capsys):
    with pytest.raises(SystemExit) as exit_:
        dispatch_handoffs.main(["--rounds", "0"])
    assert exit_.value.code == 2 and "--rounds" in capsys.readouterr().err
