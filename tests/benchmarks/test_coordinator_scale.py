"""The scale benchmark's machinery at a small size: a real coordinator, simulated agents in a
client process that tell when all of them applied a generation, and the figures it prints."""

from benchmarks import coordinator_scale


def test_a_small_run_measures_every_round_with_no_retries():
    result = coordinator_scale.run(20, rounds=2)
    assert result["agents"] == 20 and result["rounds"] == 2
    assert 0 < result["p50_ms"] <= result["p99_ms"] < 30_000
    assert result["listed_p99_ms"] >= result["p99_ms"], "an agent reports a state after it has it"
    assert result["retries"] == {}, "every agent registered and held its stream at the first try"
    assert result["loaded_admin_ms"] > 0 and result["idle_admin_ms"] > 0
