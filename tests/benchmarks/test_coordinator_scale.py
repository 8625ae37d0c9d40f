"""The scale benchmark's machinery at a small size: a real coordinator, simulated agents in a
client process that tell when all of them applied a generation, and the figures it prints."""

import pytest

from benchmarks import coordinator_scale


@pytest.mark.parametrize("fan_out_processes", [1, 2])
def test_a_small_run_measures_every_round_with_no_retries(fan_out_processes):
    # The idle window only has to exist here: the machinery, not the figure (the benchmark keeps 5 s).
    result = coordinator_scale.run(20, rounds=2, fan_out_processes=fan_out_processes, idle_seconds=0.5)
    assert result["agents"] == 20 and result["rounds"] == 2 and result["fan_out"] == fan_out_processes
    assert 0 < result["p50_ms"] <= result["p99_ms"] < 30_000
    # The listed rounds are rounds of their own: every one of them ended with every node listed.
    assert result["listed_rounds"] == 3 and 0 < result["listed_p50_ms"] <= result["listed_p99_ms"]
    assert result["retries"] == {}, "every agent registered and held its stream at the first try"
    assert result["loaded_admin_ms"] > 0 and result["idle_admin_ms"] > 0
    # The total counts the fan-out processes too (20 agents over 2 rounds may use under a clock tick).
    assert result["round_cpu_ms_per_1000"] + 1e-6 >= result["main_cpu_ms_per_1000"] >= 0
