"""The one held rule: a throttle's waits, or what moved against what the limit allows (entering at 90 %,
staying down to 80 %), never without a limit."""

from vnode_sync.kernel.held import at_limit, waited_held


def test_held_by_waits_from_a_tenth_of_the_interval():
    assert waited_held(0.05, 0.5) and not waited_held(0.04, 0.5) and not waited_held(1.0, 0.0)


def test_held_at_the_limit_enters_at_90_percent_and_stays_down_to_80():
    assert at_limit(9.0, 10.0) and not at_limit(8.5, 10.0)
    assert at_limit(8.5, 10.0, was_held=True) and not at_limit(7.9, 10.0, was_held=True)
    assert not at_limit(5.0, 0)      # no limit: never held
