"""A bulk_shares --trace file as a table: rates and waits per user from two samples' counters, and the
coordinator's view where it answered."""

from benchmarks.bulk_trace import rows


def sample(t: float, alice_bytes: int, bob_wait_ns: int, given) -> dict:
    users = {"alice": {"write_bytes": alice_bytes, "write_wait_ns": 0, "write_ops": 1},
             "bob": {"write_bytes": 0, "write_wait_ns": bob_wait_ns, "write_ops": 2}}
    node = {"write_rate_bps": 57e6, "write_backlogged": 2.0, "disk_busy": 0.99}
    return {"policy": "wc-weights", "t": t, "dn": {"dn0": {"node": node, "users": users}, "dn1": "socket gone"},
            **({"given": given} if given is not None else {})}


def test_rates_and_waits_come_from_the_difference_of_two_samples_and_the_coordinators_view_is_shown():
    given = {"vsb1234bob": [{"allocated_write_bps": 20e6, "demand_write_bps": None},
                            {"allocated_write_bps": 0, "demand_write_bps": 0.0}]}
    table = rows([sample(1.0, 0, 0, None), sample(1.5, 15_000_000, 400_000_000, given)], "write")
    assert table == ["  1.5 | dn0: a  30.0 w0.00 o1 b   0.0 w0.80 o2 R 57.0 bl2 disk 0.99 | dn1: ? | "
                     "ob 20.0/-1.0,0.0/0.0"]


def test_a_coordinator_that_did_not_answer_leaves_its_columns_out():
    table = rows([sample(1.0, 0, 0, None), sample(2.0, 1_000_000, 0, "vnodectl failed")], "write")
    assert table[0].endswith("| dn1: ?")
