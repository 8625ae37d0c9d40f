"""--policies of the benchmarks that compare sharing policies: known names in the benchmark's order, a
baseline that always runs, and a one-line error for a name it does not know or for none at all."""

import argparse

import pytest

from benchmarks.policy_names import policy_list

KNOWN = ("static", "wc-rates", "wc-weights", "coordinator stopped")


def test_named_policies_come_in_the_known_order_with_the_baseline_that_always_runs():
    assert policy_list(" coordinator stopped,wc-weights ", KNOWN) == ["wc-weights", "coordinator stopped"]
    assert policy_list("wc-weights", KNOWN, always=("static",)) == ["static", "wc-weights"]
    assert policy_list("", KNOWN, always=("static",)) == ["static"]


@pytest.mark.parametrize("text", ["wc-weights,bogus", "", " , "])
def test_an_unknown_name_or_none_is_an_error(text):
    with pytest.raises(argparse.ArgumentTypeError, match="known: static, wc-rates"):
        policy_list(text, KNOWN)
