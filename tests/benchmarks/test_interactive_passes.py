"""benchmarks.interactive_shares --passes: how a policy's passes pool (their order: test_scenario_runner.py);
--ext4-options: what it passes to mount."""

import argparse

import pytest

from benchmarks.interactive_shares import alice_files, ext4_option_list, pooled, report


def test_a_policys_passes_pool_their_transfers_and_average_bobs_rate():
    first = {("alone", 1): [0.1, 0.2], ("turned down", "alone", 1): [0, 1], "delivered": 50.0, "control_cpu": "a"}
    second = {("alone", 1): [0.3], ("turned down", "alone", 1): [2], "delivered": 54.0, "control_cpu": "b"}
    assert pooled([first, second]) == {("alone", 1): [0.1, 0.2, 0.3], ("turned down", "alone", 1): [0, 1, 2],
                                       "delivered": 52.0, "control_cpu": "a / b"}


def test_every_pass_writes_or_reads_files_of_its_own_and_a_single_pass_keeps_the_old_names():
    assert alice_files("static", "beside bob", 4, 2) == ["/alice/static-beside-bob-4-0.bin",
                                                         "/alice/static-beside-bob-4-1.bin"]
    assert set(alice_files("static", "alone", 1, 3, 1)).isdisjoint(alice_files("static", "alone", 1, 3, 0))


def test_ext4_options_are_split_and_anything_mount_would_read_as_more_is_refused():
    assert ext4_option_list("nodelalloc,commit=30") == ("nodelalloc", "commit=30")
    with pytest.raises(argparse.ArgumentTypeError, match="ext4 mount option 'ro data'"):
        ext4_option_list("nodelalloc,ro data")


def test_the_report_prints_each_cells_ratios_and_their_intervals(capsys):
    args = argparse.Namespace(disk_mbps=60.0, direction="read", sizes=[1], rounds=3, passes=1, gap=1.5,
                              backend="datanode-throttle", bfq={}, hdfs_site={}, queue={}, native=False,
                              warm_up=True, ext4_options=("nodelalloc",), client_cpu="shared",
                              policies=["static", "wc-weights"])
    cells = {("alone", 1): [0.02, 0.02, 0.02], ("beside bob", 1): [0.04, 0.04, 0.04]}
    results = {"static": {**cells, "delivered": 55e6, "control_cpu": "-"},
               "wc-weights": {("alone", 1): [0.02, 0.02, 0.02], ("beside bob", 1): [0.05, 0.05, 0.05],
                              "delivered": 56e6, "control_cpu": "-"}}
    report(results, args)
    printed = capsys.readouterr().out
    assert "disks warmed up" in printed and "nodelalloc" in printed
    assert "beside bob     1 |       40 /      40 |         50 /        50   1.25   1.25 |" in printed
    assert "beside bob 1 MiB: wc-weights p50  1.25 (1.25-1.25)  p99  1.25 (1.25-1.25)" in printed
