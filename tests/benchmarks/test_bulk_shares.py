"""bulk_shares' split while both users are held at the edge: only the half-seconds where both waited
in a DataNode's scheduler count, so a client that could not use its share does not read as unfairness."""

from benchmarks.bulk_shares import both_held_ratio

MB = 1_000_000


def interval(dn: str, alice_mbs: float, bob_mbs: float, alice_waited: float, bob_waited: float) -> dict:
    return {("dn", (dn, "alice")): alice_mbs * MB, ("dn", (dn, "bob")): bob_mbs * MB,
            ("wait", (dn, "alice")): alice_waited, ("wait", (dn, "bob")): bob_waited}


def test_only_intervals_where_both_waited_count_toward_the_held_split():
    intervals = [{**interval("dn0", 40, 20, 0.9, 0.8), **interval("dn1", 30, 30, 0.1, 0.9)},   # alice not held on dn1
                 {**interval("dn0", 38, 20, 0.7, 0.6), **interval("dn1", 42, 20, 0.5, 0.5)}]
    median, count, of = both_held_ratio(intervals, ["dn0", "dn1"])
    assert (count, of) == (3, 4)
    assert median == 2.0   # of 2.0, 1.9 and 2.1; dn1's 1:1 in the first half-second is alice's own pace


def test_no_interval_with_both_held_gives_no_ratio():
    assert both_held_ratio([interval("dn0", 40, 20, 0.2, 0.9)], ["dn0"]) == (None, 0, 1)
