"""The scenario benchmark's draw and summary maths (no HDFS)."""

import argparse
import io

import pytest

from testbed.hdfs_cluster import HdfsCluster
from testbed.hdfs_cluster.daemons import DataNode, DataNodePorts
from vnode_sync.errors import InvalidArgument
from vnode_sync.kernel.types import DeviceNumber

from benchmarks.edge_scenarios import (BULK, KINDS, MAX_USERS, PROFILES, SIZES_MIB, Cell, Scenario, ScenarioUser,
                                       cells_from_json, cells_to_json, draw, judge, parse_policies, parse_scenario,
                                       report, weighted_shares)
from benchmarks.scenario_runner import rotated

SEEDS = range(400)


def test_a_seed_draws_the_same_scenario_every_time():
    assert draw(7) == draw(7)
    assert draw(7) != draw(8)


def test_every_draw_stays_inside_the_stated_distribution():
    for seed in SEEDS:
        scenario = draw(seed)
        assert 2 <= len(scenario.users) <= MAX_USERS
        assert any(u.kind in BULK for u in scenario.users), "every scenario has a backlogged user"
        for u in scenario.users:
            assert 1 <= u.weight <= 16 and u.kind in KINDS
            if u.interactive:
                assert u.transfer_mib in SIZES_MIB and 0.2 <= u.gap_seconds <= 5.0


def test_the_draw_covers_every_count_kind_size_and_far_apart_weights():
    scenarios = [draw(seed) for seed in SEEDS]
    assert {len(s.users) for s in scenarios} == set(range(2, MAX_USERS + 1))
    assert {u.kind for s in scenarios for u in s.users} == set(KINDS)
    assert {u.transfer_mib for s in scenarios for u in s.users if u.interactive} == set(SIZES_MIB)
    far_apart = sum(1 for s in scenarios if max(u.weight for u in s.users) >= 9 * min(u.weight for u in s.users))
    assert far_apart >= len(scenarios) / 3


SCENARIO = Scenario(0, (ScenarioUser(0, 1, "bulk reader"), ScenarioUser(1, 9, "bulk writer"),
                        ScenarioUser(2, 4, "interactive reader", 4, 1.0)))


def cells() -> dict[str, Cell]:
    return {
        "none": Cell(0, "none", 30, {2: [0.2, 0.3, 0.4]}, {0: 30e6, 1: 30e6}, node_bps=60e6),
        "static": Cell(0, "static", 30, {2: [0.1, 0.1, 0.2]}, {0: 4e6, 1: 36e6}, node_bps=40e6),
        "wc": Cell(0, "wc", 30, {2: [0.11, 0.12, 0.3]}, {0: 6e6, 1: 51e6}, node_bps=57e6),
    }


def test_a_backlogged_users_rate_is_set_against_its_weight_of_what_the_backlogged_moved():
    shares = weighted_shares(SCENARIO, {0: 6e6, 1: 54e6})
    assert shares == pytest.approx({0: 1.0, 1: 1.0})
    assert weighted_shares(SCENARIO, {0: 12e6, 1: 48e6})[0] == pytest.approx(2.0)
    assert weighted_shares(SCENARIO, {0: 12e6}) == {}, "a lone backlogged user's share says nothing"


def test_where_a_link_binds_readers_and_writers_share_apart():
    mixed = Scenario(0, (ScenarioUser(0, 16, "bulk writer"), ScenarioUser(1, 4, "bulk reader"),
                         ScenarioUser(2, 13, "bulk writer"), ScenarioUser(3, 1, "interactive reader", 4, 1.0)))
    rates = {0: 16e6, 1: 37e6, 2: 26e6}
    apart = weighted_shares(mixed, rates, by_direction=True)
    assert apart == pytest.approx({0: 16 / (42 * 16 / 29), 2: 26 / (42 * 13 / 29)}), "the lone reader says nothing"
    assert set(weighted_shares(mixed, rates)) == {0, 1, 2}
    assert PROFILES["net"].shared_by_direction and not PROFILES["paced"].shared_by_direction


def test_judge_sets_latency_against_static_and_throughput_against_none():
    verdict = judge(SCENARIO, cells())["wc"]
    assert verdict.latency[2] == pytest.approx((0.12 / 0.1, 0.3 / 0.2))
    assert verdict.throughput == pytest.approx(57 / 60)
    assert verdict.worst_latency() == pytest.approx(1.5)
    assert verdict.misses() == pytest.approx(1.5 / 1.2 - 1)
    assert judge(SCENARIO, cells())["static"].misses() > 0   # 40 of none's 60


def test_a_user_without_transfers_is_judged_on_nothing():
    by_policy = cells()
    by_policy["wc"].transfers[2] = []
    assert judge(SCENARIO, by_policy)["wc"].latency[2] is None


def test_cells_survive_json_and_the_report_names_the_worst_scenario():
    scenario, back = cells_from_json(cells_to_json(SCENARIO, cells()))
    assert scenario == SCENARIO and back == cells()
    out = io.StringIO()
    report({0: SCENARIO}, {0: cells()}, out)
    text = out.getvalue()
    assert "worst scenario under wc: seed 0" in text
    assert "<= 1.2 in 0 of 1 scenarios, <= 1.5 in 1 of 1" in text


def test_the_three_dirs_profiles_volumes_survive_the_state_file():
    dn = DataNode("dn0", "/w/dn0/disk/hdfs", "/w/dn0/disk", "/w/img", "/dev/loop1", DeviceNumber(7, 1),
                  DataNodePorts(1, 2, 3), "/w/log", more_data_dirs=("/w/dn0/volume1/disk/hdfs",),
                  more_loop_devices=("/dev/loop2",))
    back = DataNode.from_json(dn.to_json())
    assert back == dn
    assert back.data_dirs == ("/w/dn0/disk/hdfs", "/w/dn0/volume1/disk/hdfs")
    assert back.loop_devices == ("/dev/loop1", "/dev/loop2")


def test_more_disks_on_a_disk_that_is_not_paced_are_refused_before_anything_is_made(tmp_path):
    with pytest.raises(InvalidArgument, match="more_disks_mbps"):
        HdfsCluster("edge-scenarios-refused", workdir=str(tmp_path / "w"), disk="loop", more_disks_mbps=(30,))
    assert not (tmp_path / "w").exists()


def test_a_shaped_link_for_more_than_one_datanode_is_refused_before_anything_is_made(tmp_path):
    with pytest.raises(InvalidArgument, match="datanode_link_mbps"):
        HdfsCluster("edge-scenarios-refused", workdir=str(tmp_path / "w"), datanodes=2, datanode_link_mbps=40)
    assert not (tmp_path / "w").exists()


def test_a_given_scenario_and_policies_are_parsed_and_bad_ones_refused_in_one_line():
    scenario = parse_scenario("bulk-reader:8,bulk-writer:4")
    assert scenario.users == (ScenarioUser(0, 8, "bulk reader"), ScenarioUser(1, 4, "bulk writer"))
    assert parse_policies("none,wc,wc-nocpu") == ("none", "wc", "wc-nocpu")
    assert set(rotated(5, ("none", "wc", "wc-nocpu"))) == {"none", "wc", "wc-nocpu"}
    for bad in ("interactive-reader:4", "bulk-reader:0", "bulk-reader", "bulk-reader:1," * 7):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_scenario(bad)
    for bad in ("wc,wc", "fast", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_policies(bad)


def test_a_miss_is_called_beyond_chance_only_when_drawing_the_transfers_again_would_not_undo_it():
    # Three transfers each side, one slow on each: the p99 ratio 1.5 is what resampling moves it to and from.
    few = cells()
    assert judge(SCENARIO, few)["wc"].worst_latency() > 1.2
    assert judge(SCENARIO, few)["wc"].worst_latency_low() <= 1.2
    # Sixty transfers each side, every one of wc's twice static's: past 1.2 whatever is drawn.
    many = cells()
    many["static"].transfers[2] = [0.1 + i / 1000 for i in range(60)]
    many["wc"].transfers[2] = [2 * t for t in many["static"].transfers[2]]
    verdict = judge(SCENARIO, many)["wc"]
    assert verdict.worst_latency_low() > 1.2
    out = io.StringIO()
    report({0: SCENARIO}, {0: many}, out)
    assert "past it beyond chance (95 % interval's low end above it): 1 of 1" in out.getvalue()


def test_a_cells_timeline_survives_json_and_gives_its_lend_and_reclaim_times():
    by_policy = cells()
    wc = by_policy["wc"]
    # u2 (interactive) moves from 1.0 to 2.0 s beside u0 and u1, who take the whole node before and after.
    wc.timeline = [(round(k * 0.1, 6), {0: 10 * k, 1: 10 * k,
                                        2: 5 * max(0, min(k, 20) - 10)}) for k in range(41)]
    wc.spans = {2: [(1.0, 2.0)]}
    scenario, back = cells_from_json(cells_to_json(SCENARIO, by_policy))
    assert back == by_policy
    verdict = judge(scenario, back)["wc"]
    assert verdict.reclaim == [pytest.approx(0.1)] and verdict.lend == [pytest.approx(0.1)]
    out = io.StringIO()
    report({0: scenario}, {0: back}, out)
    assert "lend, the scenario's longest (s): <= 1 in 1 of 1" in out.getvalue()
