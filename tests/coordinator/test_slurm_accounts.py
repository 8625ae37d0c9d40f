"""Groups from Slurm's accounts: sacctmgr's parsable associations parsed, copied into a coordinator's
tree (accounts as groups weighted by their fair-share, users placed), refreshed as Slurm changes; one
source per subtree (vnodectl cannot change these groups or their members); a user in two accounts
refused unless preferred.

No slurmdbd in the testbed (Debian's slurmctld here runs with accounting_storage/none, and sacctmgr
needs slurmdbd and its MySQL/MariaDB): the associations are sacctmgr 22.05's `--parsable2 --noheader`
format written out by hand (tests/coordinator/data/sacctmgr-assoc.txt), fed through a stand-in
sacctmgr that records its argv."""

import logging
import os
import stat

import pytest

from tests.conftest import COORDINATOR_CONFIG
from vnode_sync.coordinator.cluster import Cluster
from vnode_sync.coordinator.config import parse_config
from vnode_sync.coordinator.state.groups import GroupRecord
from vnode_sync.coordinator.commands.slurm_accounts import SlurmAccounts, copied_accounts, parse_associations
from vnode_sync.coordinator.state.store import StateStore
from vnode_sync.errors import InvalidArgument, InvalidSetting, Unavailable

ASSOCIATIONS = os.path.join(os.path.dirname(__file__), "data", "sacctmgr-assoc.txt")
USERS = ("ann", "bea", "cy", "dan", "eve", "fay")


def test_sacctmgr_associations_are_parsed_into_accounts_and_users():
    found = parse_associations(open(ASSOCIATIONS).read())
    assert found.parent == {"root": "", "physics": "root", "theory": "physics", "chem": "root", "bio": "root"}
    assert found.share["physics"] == "40" and found.share["bio"] == "parent"
    assert found.accounts_of == {"root": {"root"}, "ann": {"physics"}, "bea": {"physics", "chem"}, "cy": {"theory"},
                                 "dan": {"chem"}, "eve": {"bio"}}


@pytest.mark.parametrize("text, refused", [
    ("linux|physics||root\n", "sacctmgr line 1: 4 fields"),
    ("linux|physics||root|1\nother|chem||root|1\n", "clusters linux, other: name one in slurm_accounts.cluster"),
])
def test_output_not_as_asked_is_refused_in_one_line(text, refused):
    with pytest.raises(Unavailable, match=refused):
        parse_associations(text)


def test_accounts_the_tree_cannot_hold_are_left_out_with_their_subtrees():
    text = ("c|root|||1\nc|Physics||root|5\nc|sub||Physics|1\nc|chem||root|0\nc|big||root|50000\n"
            "c|a1||root|1\nc|a2||a1|1\nc|a3||a2|1\nc|a4||a3|1\nc|a5||a4|1\nc|a6||a5|1\nc|a7||a6|1\n")
    copied = copied_accounts(parse_associations(text), ["Physics", "chem", "big", "a1", "gone"], taken={"a3"})
    assert [(g.name, g.weight, g.parent) for g in copied.groups] == [
        ("chem", 1, ""), ("big", 10_000, ""), ("a1", 1, ""), ("a2", 1, "a1")]
    assert copied.refused == [
        "account Physics and the accounts under it not copied: invalid group name 'Physics': use 1-32 characters "
        "from a-z, 0-9, '_', '-', starting with a letter or '_'",
        "account chem: Slurm share '0' weighted 1",
        "account big: Slurm share 50000 is above the tree's 10000; weighted 10000",
        "account a3 and the accounts under it not copied: group a3 is kept by NSS (nss_groups); one source per group",
        "account gone (slurm_accounts.accounts) is not in Slurm's associations"]
    looped = copied_accounts(parse_associations("c|x||y|1\nc|y||x|1\n"), ["x"])
    assert [(g.name, g.parent) for g in looped.groups] == [("x", ""), ("y", "x")]
    deep = copied_accounts(parse_associations(text), ["a1"])
    assert [g.name for g in deep.groups] == ["a1", "a2", "a3", "a4", "a5", "a6"]
    assert deep.refused == ["account a7 and the accounts under it not copied: deeper than the tree's 6 levels of groups"]


def _stand_in_sacctmgr(tmp_path, text: str) -> str:
    """An executable that records its argv and prints `text`, as sacctmgr would."""
    (tmp_path / "assoc.txt").write_text(text)
    script = tmp_path / "sacctmgr"
    script.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/argv\ncat {tmp_path}/assoc.txt\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def _placed(cluster) -> dict[str, str]:
    return {u.name: u.group for u in cluster.store.users()}


def test_slurm_accounts_reach_the_tree_follow_slurm_and_stay_slurm_s(tmp_path, caplog):
    raw = {**COORDINATOR_CONFIG, "policy": {"sharing": "work-conserving"},
           "users": [{"name": n, "uid": 64_900 + i, "priority": 4} for i, n in enumerate(USERS)],
           "slurm_accounts": {"accounts": ["physics", "chem"], "cluster": "linux"}}
    config = parse_config(raw)
    cluster = Cluster(config, StateStore(str(tmp_path / "state.sqlite"), seed_users=config.users))
    text = open(ASSOCIATIONS).read()
    sacctmgr = _stand_in_sacctmgr(tmp_path, text)
    source = SlurmAccounts(config.slurm_accounts, cluster.group_commands, sacctmgr=sacctmgr)
    with caplog.at_level(logging.WARNING, logger="vnode_sync.coordinator.commands.slurm_accounts"):
        source()
    assert (tmp_path / "argv").read_text().split() == [
        "--parsable2", "--noheader", "show", "associations", "format=cluster,account,user,parentname,share",
        "cluster=linux"]
    assert {(g.name, g.weight, g.parent) for g in cluster.store.groups()} == {
        ("physics", 40, ""), ("theory", 3, "physics"), ("chem", 20, "")}
    assert _placed(cluster) == {"ann": "physics", "bea": "", "cy": "theory", "dan": "chem", "eve": "", "fay": ""}
    assert [r.getMessage() for r in caplog.records] == [
        "slurm accounts: user bea is in Slurm accounts chem, physics: a user sits in one group; name one under "
        "slurm_accounts.prefer (left where it is)"]
    generation = cluster.generation()
    source()
    assert cluster.generation() == generation, "nothing changed in Slurm: nothing changes"

    commands = cluster.group_commands
    for refused in (lambda: commands.move_user("eve", "physics", "admin"),
                    lambda: commands.move_user("ann", "", "admin"),
                    lambda: commands.move_user("cy", "chem", "admin"),
                    lambda: commands.set_group("theory", "admin", weight=5),
                    lambda: commands.remove_group("chem", "admin"),
                    lambda: commands.add_group(GroupRecord("lab", 1, "theory"), "admin")):
        with pytest.raises(InvalidArgument, match="kept by Slurm"):
            refused()
    assert cluster.generation() == generation
    commands.set_group("physics", "admin", ceiling_bps=50_000_000)     # floors and ceilings stay vnodectl's

    # Slurm changes: theory is gone (cy with it), chem's share halves and it moves under physics, a new
    # account optics under chem takes eve; the site prefers chem for bea.
    changed = "\n".join(line for line in text.splitlines() if "theory" not in line).replace(
        "|chem||root|20", "|chem||physics|10") + "\nlinux|optics||chem|2\nlinux|optics|eve||1\n"
    _stand_in_sacctmgr(tmp_path, changed)
    preferring = parse_config({**raw, "slurm_accounts": {**raw["slurm_accounts"], "prefer": {"bea": "chem"}}})
    SlurmAccounts(preferring.slurm_accounts, commands, sacctmgr=sacctmgr)()
    assert {(g.name, g.weight, g.parent) for g in cluster.store.groups()} == {
        ("physics", 40, ""), ("chem", 10, "physics"), ("optics", 2, "chem")}
    assert commands.group("physics").ceiling_bps == 50_000_000
    assert _placed(cluster) == {"ann": "physics", "bea": "chem", "cy": "", "dan": "chem", "eve": "optics", "fay": ""}


def test_sacctmgr_failing_changes_nothing(tmp_path):
    raw = {**COORDINATOR_CONFIG, "policy": {"sharing": "work-conserving"}, "slurm_accounts": {"accounts": ["physics"]}}
    config = parse_config(raw)
    cluster = Cluster(config, StateStore(str(tmp_path / "state.sqlite"), seed_users=config.users))
    script = tmp_path / "sacctmgr"
    script.write_text("#!/bin/sh\necho 'sacctmgr: error: Problem talking to the database: Connection refused' >&2\n"
                      "exit 1\n")
    script.chmod(0o755)
    generation = cluster.generation()
    with pytest.raises(Unavailable, match="sacctmgr exited 1 .*Connection refused.*not refreshed"):
        SlurmAccounts(config.slurm_accounts, cluster.group_commands, sacctmgr=str(script))()
    assert cluster.generation() == generation and cluster.store.groups() == []


def test_a_config_slurm_accounts_cannot_apply_is_refused_in_one_line():
    shared = {**COORDINATOR_CONFIG, "policy": {"sharing": "work-conserving"}}
    for raw, refused in (
            ({**shared, "nss_groups": {"groups": {"physics": 1}}, "slurm_accounts": {"accounts": ["physics"]}},
             "slurm_accounts.accounts: got 'physics'; allowed: a group nss_groups does not keep already"),
            ({**shared, "slurm_accounts": {"accounts": ["physics"], "cluster": "x;reboot"}},
             "slurm_accounts.cluster: got 'x;reboot'"),
            ({**COORDINATOR_CONFIG, "slurm_accounts": {"accounts": ["physics"]}},
             "slurm_accounts: got '(set)'; allowed: only with policy.sharing work-conserving"),
            ({**COORDINATOR_CONFIG, "nss_groups": {"groups": {"physics": 1}}},
             "nss_groups: got '(set)'; allowed: only with policy.sharing work-conserving")):
        with pytest.raises(InvalidSetting) as e:
            parse_config(raw)
        assert refused in str(e.value) and "\n" not in str(e.value)
