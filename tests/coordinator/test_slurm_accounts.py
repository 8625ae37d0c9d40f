"""Groups from Slurm's accounts: sacctmgr's parsable associations parsed, copied into a coordinator's
tree (accounts as groups weighted by their fair-share, users placed), refreshed as Slurm changes; one
source per subtree (vnodectl cannot change these groups or their members); a user in two accounts
refused unless preferred.

The source runs against a real Slurm accounting store: Debian 12's slurmdbd 22.05 on a MariaDB 10.11
of its own (testbed/slurmdbd.py; one for the module, ~4 s to start and ~5 s to fill), the accounts
and users made with real `sacctmgr add/modify/delete`, and the coordinator's own `sacctmgr show
associations` reading them, in the test's process and in a coordinator process on its period. The
unit tests below them take text: a real sample captured from that store
(tests/coordinator/data/sacctmgr-assoc.txt) and corner cases real output cannot easily produce."""

import logging
import os
import re

import pytest

from tests.conftest import COORDINATOR_CONFIG, unique_name, write_coordinator_config
from testbed.ports import free_port
from testbed.processes import start_coordinator, stop_process
from testbed.slurmdbd import DEBIAN_PACKAGES, LocalSlurmdbd, missing_programs
from vnode_sync.coordinator.cluster import Cluster
from vnode_sync.coordinator.config import parse_config
from vnode_sync.coordinator.state.groups import GroupRecord
from vnode_sync.coordinator.commands.slurm_accounts import SlurmAccounts, copied_accounts, parse_associations
from vnode_sync.coordinator.state.store import StateStore
from vnode_sync.errors import InvalidArgument, InvalidSetting, Unavailable

# Captured from the `slurmdbd` fixture's store, made by SLURM_TREE, with cluster "linux":
#   sacctmgr --parsable2 --noheader show associations format=cluster,account,user,parentname,share
ASSOCIATIONS = os.path.join(os.path.dirname(__file__), "data", "sacctmgr-assoc.txt")
USERS = ("ann", "bea", "cy", "dan", "eve", "fay")
SLURM_TREE = (
    ("add", "account", "physics", "fairshare=40"),
    ("add", "account", "theory", "parent=physics", "fairshare=3"),
    ("add", "account", "chem", "fairshare=20"),
    ("add", "account", "bio", "fairshare=parent"),
    ("add", "user", "ann", "account=physics"),
    ("add", "user", "bea", "account=physics,chem"),
    ("add", "user", "cy", "account=theory"),
    ("add", "user", "dan", "account=chem", "fairshare=parent"),
    ("add", "user", "eve", "account=bio"),
)


def _why_no_slurmdbd() -> str | None:
    if os.geteuid() != 0:
        return "needs root: the Slurm testbed's daemons run as root (testbed/slurm.py, testbed/slurmdbd.py)"
    missing = missing_programs()
    if missing:
        return (f"no Slurm accounting store here (missing {', '.join(missing)}): apt-get install "
                f"{' '.join(DEBIAN_PACKAGES)} (scripts/setup.d/slurm.sh)")
    return None


@pytest.fixture(scope="module")
def slurmdbd():
    """A real slurmdbd with SLURM_TREE's accounts and users in it."""
    why = _why_no_slurmdbd()
    if why:
        pytest.skip(why)
    with LocalSlurmdbd(unique_name("slurmdbd"), cluster="linux") as dbd:
        for change in SLURM_TREE:
            dbd.sacctmgr_ok(*change)
        yield dbd


def _placed(cluster) -> dict[str, str]:
    return {u.name: u.group for u in cluster.store.users()}


def _tree(cluster) -> set[tuple[str, int, str]]:
    return {(g.name, g.weight, g.parent) for g in cluster.store.groups()}


@pytest.mark.slow
def test_slurm_accounts_reach_the_tree_follow_slurm_and_stay_slurm_s(slurmdbd, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("SLURM_CONF", slurmdbd.conf)     # as a site's /etc/slurm/slurm.conf would
    raw = {**COORDINATOR_CONFIG, "policy": {"sharing": "work-conserving"},
           "users": [{"name": n, "uid": 64_900 + i, "priority": 4} for i, n in enumerate(USERS)],
           "slurm_accounts": {"accounts": ["physics", "chem"], "cluster": slurmdbd.cluster}}
    config = parse_config(raw)
    cluster = Cluster(config, StateStore(str(tmp_path / "state.sqlite"), seed_users=config.users))
    source = SlurmAccounts(config.slurm_accounts, cluster.group_commands)
    with caplog.at_level(logging.WARNING, logger="vnode_sync.coordinator.commands.slurm_accounts"):
        source()
    assert _tree(cluster) == {("physics", 40, ""), ("theory", 3, "physics"), ("chem", 20, "")}
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
    for change in (("delete", "user", "cy"), ("delete", "account", "theory"),
                   ("modify", "account", "chem", "set", "fairshare=10", "parent=physics"),
                   ("add", "account", "optics", "parent=chem", "fairshare=2"),
                   ("add", "user", "eve", "account=optics")):
        slurmdbd.sacctmgr_ok(*change)
    preferring = parse_config({**raw, "slurm_accounts": {**raw["slurm_accounts"], "prefer": {"bea": "chem"}}})
    SlurmAccounts(preferring.slurm_accounts, commands)()
    assert _tree(cluster) == {("physics", 40, ""), ("chem", 10, "physics"), ("optics", 2, "chem")}
    assert commands.group("physics").ceiling_bps == 50_000_000
    assert _placed(cluster) == {"ann": "physics", "bea": "chem", "cy": "", "dan": "chem", "eve": "optics", "fay": ""}


@pytest.mark.slow
def test_a_coordinator_process_refreshes_slurm_s_accounts_on_its_period(slurmdbd, tmp_path, monkeypatch):
    """`slurm_accounts:` in a real coordinator process: a fair-share changed with sacctmgr reaches the group
    within refresh_seconds, without a restart or a command."""
    import grpc

    from vnode_sync.wire import vnode_pb2 as pb
    from vnode_sync.wire import vnode_pb2_grpc as pb_grpc

    slurmdbd.sacctmgr_ok("add", "account", "geo", "fairshare=5")     # this test's own, whatever ran before
    monkeypatch.setenv("SLURM_CONF", slurmdbd.conf)     # inherited by the coordinator process
    config = write_coordinator_config(tmp_path, policy={"sharing": "work-conserving"},
                                      slurm_accounts={"accounts": ["geo"], "refresh_seconds": 1})
    process, port = start_coordinator(config, tmp_path / "coordinator.log")
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            admin = pb_grpc.AdminStub(channel)

            def weight_of_geo() -> int | None:
                groups = admin.ListGroups(pb.ListGroupsRequest(), timeout=10).groups
                return next((g.weight for g in groups if g.name == "geo"), None)

            slurmdbd.wait_for(lambda: weight_of_geo() == 5, 10, "group geo at Slurm's fair-share 5")
            slurmdbd.sacctmgr_ok("modify", "account", "geo", "set", "fairshare=7")
            slurmdbd.wait_for(lambda: weight_of_geo() == 7, 10, "group geo at Slurm's new fair-share 7")
    finally:
        stop_process(process)
        slurmdbd.sacctmgr_ok("delete", "account", "geo")


@pytest.mark.slow
def test_slurmdbd_not_answering_changes_nothing(slurmdbd, tmp_path, monkeypatch):
    conf = tmp_path / "slurm.conf"     # the store's slurm.conf, pointing at a port nobody listens on
    conf.write_text(re.sub(r"AccountingStoragePort=\d+", f"AccountingStoragePort={free_port()}",
                           open(slurmdbd.conf).read()))
    monkeypatch.setenv("SLURM_CONF", str(conf))
    raw = {**COORDINATOR_CONFIG, "policy": {"sharing": "work-conserving"}, "slurm_accounts": {"accounts": ["physics"]}}
    config = parse_config(raw)
    cluster = Cluster(config, StateStore(str(tmp_path / "state.sqlite"), seed_users=config.users))
    generation = cluster.generation()
    with pytest.raises(Unavailable) as refused:
        SlurmAccounts(config.slurm_accounts, cluster.group_commands)()
    assert re.fullmatch(r"sacctmgr exited 1 \(.*Connection refused.*\); accounts from Slurm not refreshed",
                        str(refused.value)), str(refused.value)
    assert cluster.generation() == generation and cluster.store.groups() == []


def test_sacctmgr_associations_are_parsed_into_accounts_and_users():
    """The real sample (no slurmdbd needed): account lines, user lines (one per account), Share as printed."""
    found = parse_associations(open(ASSOCIATIONS).read())
    assert found.parent == {"root": "", "physics": "root", "theory": "physics", "chem": "root", "bio": "root"}
    assert found.share["physics"] == "40" and found.share["bio"] == "parent"
    assert found.accounts_of == {"root": {"root"}, "ann": {"physics"}, "bea": {"physics", "chem"}, "cy": {"theory"},
                                 "dan": {"chem"}, "eve": {"bio"}}
    # A user's association per partition (not made in the store) lists it once per partition: one account still.
    assert parse_associations("c|a||root|1\nc|a|u||1\nc|a|u||1\n").accounts_of == {"u": {"a"}}


@pytest.mark.parametrize("text, refused", [
    ("linux|physics||root\n", "sacctmgr line 1: 4 fields"),
    ("linux|physics||root|1\nother|chem||root|1\n", "clusters linux, other: name one in slurm_accounts.cluster"),
])
def test_output_not_as_asked_is_refused_in_one_line(text, refused):
    """Text, not a real store: a sacctmgr printing other fields, or two clusters' lines, is not made on purpose."""
    with pytest.raises(Unavailable, match=refused):
        parse_associations(text)


def test_accounts_the_tree_cannot_hold_are_left_out_with_their_subtrees():
    """Text, not a real store: Slurm lower-cases account names and has no loops, and seven levels, shares of
    0 and above 10,000 and an NSS-kept name are corner cases cheaper written than made through sacctmgr."""
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
