"""The agent's one demand estimate: rates per device and direction, held (measured from a throttle's
waits, the backend's word, or the rate against the limit), held time, and what a held VNode is taken to want."""

import pytest

from vnode_sync.agents.storage.demand import HELD_GROWTH, DemandEstimator, held_growth
from vnode_sync.kernel.backend import HELD_ESTIMATED, HELD_MEASURED, VNodeUsage
from vnode_sync.kernel.types import DeviceLimits, DeviceNumber, IoCounters

DEV = DeviceNumber(7, 3)
MB = 1_000_000


def counted(read_bytes: int, write_bytes: int = 0) -> dict:
    return {DEV: IoCounters(read_bytes, write_bytes)}


def test_a_cgroup_vnode_reading_at_its_limit_is_held_and_one_well_below_is_not():
    clock = DemandEstimator()
    limits = {"vnode.alice": [DeviceLimits(DEV, read_bps=20 * MB)], "vnode.bob": [DeviceLimits(DEV, read_bps=40 * MB)],
              "vnode.carol": [DeviceLimits(DEV, weight=500)]}
    first = clock.update({v: VNodeUsage(counted(0)) for v in limits}, limits, 100.0)
    assert {v: s.held for v, s in first.items()} == {"vnode.alice": False, "vnode.bob": False, "vnode.carol": False}
    later = clock.update({"vnode.alice": VNodeUsage(counted(19 * MB)), "vnode.bob": VNodeUsage(counted(10 * MB)),
                          "vnode.carol": VNodeUsage(counted(500 * MB))}, limits, 101.0)
    assert later["vnode.alice"].held and later["vnode.alice"].seconds == pytest.approx(1.0)
    assert not later["vnode.bob"].held and later["vnode.bob"].seconds == 0.0
    assert not later["vnode.carol"].held and later["vnode.carol"].source is None  # a weight is no limit: never held
    assert later["vnode.alice"].source == HELD_ESTIMATED
    read, write = later["vnode.alice"].devices[DEV]
    assert read.held and not write.held and read.rate == pytest.approx(19 * MB)
    assert read.demand == pytest.approx(HELD_GROWTH * 19 * MB)          # held: it wanted more than it moved
    bob_read, _ = later["vnode.bob"].devices[DEV]
    assert bob_read.demand == pytest.approx(10 * MB)                     # given all it asked: what it moved
    assert later["vnode.carol"].devices[DEV][0].rate == pytest.approx(500 * MB)


def test_a_cgroup_vnode_back_from_idle_at_its_cap_is_held_within_half_a_second():
    """A cap-only node's idle user keeps a probe cap (1.8 MB/s). Back, it reads at that cap: over the
    last 2 s it moved well below it (its idle time), over the last 0.5 s at it. Held at once, so the
    next step gives it its share; a user still idle is not."""
    clock = DemandEstimator()
    probe = int(1.8 * MB)
    limits = {"vnode.bob": [DeviceLimits(DEV, read_bps=probe)], "vnode.carol": [DeviceLimits(DEV, read_bps=probe)]}
    moved = {"vnode.bob": 0, "vnode.carol": 0}
    for t in (100.0, 100.5, 101.0, 101.5):      # idle
        clock.update({v: VNodeUsage(counted(b)) for v, b in moved.items()}, limits, t)
    moved["vnode.bob"] += probe // 2             # 0.5 s at his cap
    state = clock.update({v: VNodeUsage(counted(b)) for v, b in moved.items()}, limits, 102.0)
    assert state["vnode.bob"].held and not state["vnode.carol"].held
    assert state["vnode.bob"].devices[DEV][0].rate == pytest.approx(probe, rel=0.01)


def test_a_measured_backend_adds_its_wait_time_at_most_the_interval():
    clock = DemandEstimator()
    limits = {"vnode.alice": [DeviceLimits(DEV, write_bps=10 * MB)]}
    clock.update({"vnode.alice": VNodeUsage(counted(0), False, HELD_MEASURED, 0.0, 1.0)}, limits, 10.0)
    state = clock.update({"vnode.alice": VNodeUsage(counted(0, 10 * MB), True, HELD_MEASURED, 0.0, 1.4)},
                         limits, 11.0)
    assert state["vnode.alice"].held and state["vnode.alice"].seconds == pytest.approx(0.4)
    read, write = state["vnode.alice"].devices[DEV]
    assert write.held and not read.held      # the waits say which direction
    state = clock.update({"vnode.alice": VNodeUsage(counted(0, 20 * MB), True, HELD_MEASURED, 0.0, 4.4)},
                         limits, 12.0)   # three transfers waited at once: still one second of wall time
    assert state["vnode.alice"].seconds == pytest.approx(1.4) and state["vnode.alice"].source == HELD_MEASURED


def test_a_backend_estimate_counts_whole_intervals_and_gone_vnodes_are_forgotten():
    clock = DemandEstimator()
    limits = {"vnode.alice": [DeviceLimits(DEV, read_bps=MB)]}
    clock.update({"vnode.alice": VNodeUsage(counted(0), False, HELD_ESTIMATED)}, limits, 0.0)
    state = clock.update({"vnode.alice": VNodeUsage(counted(0), True, HELD_ESTIMATED)}, limits, 2.0)
    assert state["vnode.alice"].seconds == pytest.approx(2.0)
    clock.update({}, limits, 3.0)
    assert clock.update({"vnode.alice": VNodeUsage(counted(0), True, HELD_ESTIMATED)}, limits, 4.0)[
        "vnode.alice"].seconds == 0.0


def test_the_estimate_looks_at_a_span_so_one_read_more_or_less_does_not_decide():
    """1 MiB reads at a 20 MB/s limit, reported every 0.5 s: some intervals see 9 reads, some 10."""
    clock = DemandEstimator()
    limits = {"vnode.alice": [DeviceLimits(DEV, read_bps=20 * MB)]}
    total, states = 0, []
    for i in range(20):
        total += (9 if i % 2 else 10) * (1 << 20)   # 19.9 MB/s on average, 18.9 in the odd intervals
        states.append(clock.update({"vnode.alice": VNodeUsage(counted(total))}, limits, i * 0.5)["vnode.alice"])
    assert all(s.held for s in states[1:])
    assert states[-1].seconds == pytest.approx(9.5)


def test_a_held_vnode_stays_held_through_a_dip_and_is_released_well_below_its_limit():
    clock = DemandEstimator()
    limits = {"vnode.alice": [DeviceLimits(DEV, read_bps=10 * MB)]}
    total, held = 0, []
    for i, rate in enumerate([10, 10, 10, 10, 8.5, 8.5, 10, 10, 5, 5, 5, 5]):
        total += int(rate * MB)
        held.append(clock.update({"vnode.alice": VNodeUsage(counted(total))}, limits, float(i))["vnode.alice"].held)
    assert held == [False, True, True, True, True, True, True, True, False, False, False, False]


def test_measured_waits_below_a_tenth_of_the_interval_are_not_held_whatever_the_backend_says():
    """One threshold for every backend: the DataNode's own held flag is not taken, its waits are."""
    clock = DemandEstimator()
    clock.update({"vnode.alice": VNodeUsage(counted(0), False, HELD_MEASURED, 0.0, 0.0)}, {}, 10.0)
    state = clock.update({"vnode.alice": VNodeUsage(counted(5 * MB), True, HELD_MEASURED, 0.05, 0.0)}, {}, 11.0)
    assert not state["vnode.alice"].held and state["vnode.alice"].seconds == 0.0
    state = clock.update({"vnode.alice": VNodeUsage(counted(10 * MB), False, HELD_MEASURED, 0.3, 0.0)}, {}, 12.0)
    assert state["vnode.alice"].held and state["vnode.alice"].devices[DEV][0].held


def test_a_held_vnode_wants_what_its_waits_say_and_a_whole_interval_of_waits_or_no_timing_says_four_times():
    """A client that waited 0.2 s of 1 s moved for 0.8 s: unheld, it would have moved rate / 0.8. A
    barely held user taken to want four times its rate would have the center move its weight away
    from where it wants more (benchmarks.site_simulation)."""
    clock = DemandEstimator()
    limits = {"vnode.alice": [DeviceLimits(DEV, read_bps=10 * MB)]}
    clock.update({"vnode.alice": VNodeUsage(counted(0), False, HELD_MEASURED, 0.0, 0.0)}, limits, 10.0)
    state = clock.update({"vnode.alice": VNodeUsage(counted(8 * MB), True, HELD_MEASURED, 0.2, 0.0)}, limits, 11.0)
    read, _ = state["vnode.alice"].devices[DEV]
    assert read.held and read.demand == pytest.approx(read.rate / 0.8)
    state = clock.update({"vnode.alice": VNodeUsage(counted(16 * MB), True, HELD_MEASURED, 2.6, 0.0)}, limits, 12.0)
    read, _ = state["vnode.alice"].devices[DEV]     # three transfers waited 2.4 s at once
    assert read.held and read.demand == pytest.approx(HELD_GROWTH * read.rate)
    state = clock.update({"vnode.alice": VNodeUsage(counted(24 * MB), True, HELD_MEASURED, 3.4, 0.0)}, limits, 13.0)
    read, _ = state["vnode.alice"].devices[DEV]     # 0.8 of the interval: more than four times is a guess
    assert read.held and read.demand == pytest.approx(HELD_GROWTH * read.rate)
    assert held_growth(None, 1.0) == HELD_GROWTH and held_growth(0.5, 1.0) == pytest.approx(2.0)


def test_a_backend_word_holds_only_the_directions_that_moved_bytes():
    clock = DemandEstimator()
    clock.update({"vnode.alice": VNodeUsage(counted(0, 0), False, HELD_ESTIMATED)}, {}, 0.0)
    state = clock.update({"vnode.alice": VNodeUsage(counted(0, 4 * MB), True, HELD_ESTIMATED)}, {}, 1.0)
    read, write = state["vnode.alice"].devices[DEV]
    assert write.held and not read.held and write.demand == pytest.approx(HELD_GROWTH * 4 * MB)


def test_every_vnode_gets_rates_even_unlimited_and_counters_that_went_back_count_from_zero():
    clock = DemandEstimator()
    clock.update({"vnode.alice": VNodeUsage(counted(50 * MB))}, {}, 0.0)
    state = clock.update({"vnode.alice": VNodeUsage(counted(3 * MB))}, {}, 1.0)   # the VNode was made anew
    read, _ = state["vnode.alice"].devices[DEV]
    assert read.rate == 0.0 and not read.held and state["vnode.alice"].source is None


def test_a_look_between_reports_leaves_held_as_it_was_and_lends_later_rates_a_fresher_start():
    """The agent looks at demand every 0.25 s for sharp moves; held and held time still count over the
    interval between reports, as if it had not looked, and the next rate spans from the look."""
    looked, plain = DemandEstimator(), DemandEstimator()
    limits = {"vnode.alice": [DeviceLimits(DEV, read_bps=20 * MB)]}
    for estimate in (looked, plain):
        estimate.update({"vnode.alice": VNodeUsage(counted(0))}, limits, 100.0)
    peek = looked.update({"vnode.alice": VNodeUsage(counted(10 * MB))}, limits, 100.5, keep=False)
    assert peek["vnode.alice"].devices[DEV][0].rate == pytest.approx(20 * MB)
    assert looked.update({}, limits, 100.6, keep=False) == {}          # a VNode missing from a look is not forgotten
    after = {e: e.update({"vnode.alice": VNodeUsage(counted(19 * MB))}, limits, 101.0)["vnode.alice"]
             for e in (looked, plain)}
    assert after[looked].held and after[plain].held
    assert after[looked].seconds == after[plain].seconds == pytest.approx(1.0)
    assert after[looked].devices[DEV][0].rate == pytest.approx(18 * MB)     # 0.5 s from the look
    assert after[plain].devices[DEV][0].rate == pytest.approx(19 * MB)      # the whole second


def test_a_look_reported_after_all_starts_the_next_interval_as_a_kept_sample_would():
    limits = {"vnode.alice": [DeviceLimits(DEV, read_bps=20 * MB)]}
    looked, kept = DemandEstimator(), DemandEstimator()
    for estimate in (looked, kept):
        estimate.update({"vnode.alice": VNodeUsage(counted(0))}, limits, 100.0)
    looked.update({"vnode.alice": VNodeUsage(counted(19 * MB))}, limits, 101.0, keep=False)
    looked.keep_last_look()
    kept.update({"vnode.alice": VNodeUsage(counted(19 * MB))}, limits, 101.0)
    after = [e.update({"vnode.alice": VNodeUsage(counted(25 * MB))}, limits, 101.5) for e in (looked, kept)]
    assert after[0] == after[1] and after[0]["vnode.alice"].seconds == pytest.approx(1.5)
