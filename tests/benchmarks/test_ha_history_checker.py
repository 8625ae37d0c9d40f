"""The history checker of benchmarks.ha_failover finds what it claims to find: a missing
acknowledged change, changes made against real-time order, a shared generation, a lost update and
a wrong final state; a correct history passes."""

from benchmarks.ha_failover import Call, check_history

INITIAL = {"h0": 50}


def _calls(*spec):
    return [Call(0, "h0", value, started, ended, ok) for value, started, ended, ok in spec]


def test_a_correct_history_passes():
    calls = _calls((1, 0.0, 1.0, True), (2, 2.0, 3.0, True))
    audit = [("h0", 50, 1, 10), ("h0", 1, 2, 11)]
    result = check_history(calls, audit, {"h0": 2}, INITIAL)
    assert result["acknowledged"] == 2 and not any(v for k, v in result.items() if k not in ("acknowledged",
                                                                                           "not_acknowledged"))


def test_each_violation_is_counted():
    calls = _calls((1, 0.0, 1.0, True), (2, 2.0, 3.0, True), (3, 4.0, 5.0, True))
    assert check_history(calls, [("h0", 50, 1, 10), ("h0", 1, 2, 11)], {"h0": 2}, INITIAL)["acknowledged_missing"] == 1
    reordered = [("h0", 50, 2, 10), ("h0", 2, 1, 11), ("h0", 1, 3, 12)]
    assert check_history(calls, reordered, {"h0": 3}, INITIAL)["real_time_order_violations"] == 1
    shared = [("h0", 50, 1, 10), ("h0", 1, 2, 10), ("h0", 2, 3, 12)]
    assert check_history(calls, shared, {"h0": 3}, INITIAL)["generations_shared"] == 1
    lost = [("h0", 50, 1, 10), ("h0", 50, 2, 11), ("h0", 2, 3, 12)]   # the second did not see the first
    assert check_history(calls, lost, {"h0": 3}, INITIAL)["lost_updates"] == 1
    whole = [("h0", 50, 1, 10), ("h0", 1, 2, 11), ("h0", 2, 3, 12)]
    assert check_history(calls, whole, {"h0": 2}, INITIAL)["final_state_wrong"] == 1


def test_a_change_whose_answer_was_lost_may_link_the_chain():
    calls = _calls((1, 0.0, 1.0, True), (7, 1.5, 1.9, False), (2, 2.0, 3.0, True))
    audit = [("h0", 50, 1, 10), ("h0", 7, 2, 12)]   # 7 was made, its line lost with its coordinator
    assert check_history(calls, audit, {"h0": 2}, INITIAL)["lost_updates"] == 0
