from benchmarks.datanode_throttle_overhead import epoch_medians


def test_each_epoch_of_rounds_gets_its_own_median():
    assert epoch_medians([1.0, 0.9, 1.1, 0.5, 0.7], swap_every=3) == "1.000, 0.600"
