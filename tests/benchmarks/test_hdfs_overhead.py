"""The overhead benchmark's bookkeeping: variants and its disk samples (its cases' order:
test_scenario_runner.py; what its verdict may claim: test_bootstrap.py)."""

import pytest

from benchmarks.hdfs_overhead import DiskSampler, Management


def test_a_variant_changes_only_the_settings_it_names():
    managed = Management("static", agent={"fast_thread_moves": True}, discovery={"events": "auto"})
    variant = managed.changed(["sharing=work-conserving", "discovery.events=poll", "policy.default_vnode_fraction=1.0"])
    assert variant == Management("work-conserving", agent={"fast_thread_moves": True}, discovery={"events": "poll"},
                                 policy={"default_vnode_fraction": 1.0})
    assert managed.discovery == {"events": "auto"}  # the managed case itself is untouched


@pytest.mark.parametrize("assignment", ["foo=1", "agent=1", "sharing=fast", "network.port=1", "agent.x"])
def test_a_variant_that_names_no_known_setting_is_refused(assignment):
    with pytest.raises(SystemExit, match="--variant"):
        Management().changed([assignment])


def test_the_disk_samples_split_a_trial_into_start_streaming_and_tail():
    sampler = DiskSampler([])
    sampler.samples = [(0.0, 0), (1.0, 0), (2.0, 100), (3.0, 200), (4.0, 200)]  # (time, bytes read so far)
    assert sampler.moment(0.1) == pytest.approx(1.2) and sampler.moment(0.9) == pytest.approx(2.8)
    assert sampler.middle_rate() == pytest.approx(100.0)  # 160 bytes in 1.6 s
    assert sampler.phases(started=0.5, ended=4.0) == pytest.approx((0.7, 1.6, 1.2))
