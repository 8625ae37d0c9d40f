from benchmarks.datanode_throttle_overhead import epoch_medians, target_verdict


def test_each_epoch_of_rounds_gets_its_own_median():
    assert epoch_medians([1.0, 0.9, 1.1, 0.5, 0.7], swap_every=3) == "1.000, 0.600"


def test_the_verdict_claims_2_percent_only_when_the_interval_allows():
    assert target_verdict(1.0, 0.981, rounds=30) == "within 2 % (the whole interval)"
    assert target_verdict(0.99, 0.95, rounds=30).startswith("within 2 % by the median")
    assert target_verdict(0.97, 0.95, rounds=30) == "NOT within 2 %"
    assert target_verdict(1.0, 1.0, rounds=3).startswith("too few rounds")
