"""Groups from the site's Unix groups through NSS: real users and groups made with useradd and
groupadd (removed after), read with the real getent, applied to a coordinator's tree; one source per
subtree (vnodectl does not move users in or out of NSS's groups); a user in two refused unless preferred."""

import contextlib
import os
import subprocess
import uuid

import pytest

from tests.conftest import COORDINATOR_CONFIG, served_coordinator
from testbed.unix_users import local_users
from vnode_sync.coordinator.config import parse_config
from vnode_sync.coordinator.commands.nss_groups import NssGroups, placement, read_members
from vnode_sync.errors import InvalidArgument

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="groupadd and useradd need root")


@contextlib.contextmanager
def unix_group(name: str, members: list[str]):
    subprocess.run(["groupadd", "--users", ",".join(members), name], check=True, capture_output=True)
    try:
        yield name
    finally:
        subprocess.run(["groupdel", name], capture_output=True)


def test_a_user_is_placed_in_the_one_group_nss_lists_it_in_or_the_preferred_one():
    members = {"physics": {"ann", "bea"}, "chem": {"bea", "cy"}}
    assert placement(members, ["ann", "bea", "cy", "dan"], {}) == (
        {"ann": "physics", "cy": "chem", "dan": ""},
        ["user bea is in NSS groups chem, physics: a user sits in one group; name one under nss_groups.prefer "
         "(left where it is)"])
    assert placement(members, ["bea"], {"bea": "chem"}) == ({"bea": "chem"}, [])


def test_names_given_to_getent_are_validated_first():
    with pytest.raises(InvalidArgument, match="invalid group name"):
        read_members(["-s evil"], [])
    with pytest.raises(InvalidArgument, match="invalid user name"):
        read_members(["physics"], ["x;rm"])


@needs_root
def test_groups_from_nss_reach_the_tree_and_stay_nss_s(tmp_path):
    tag = uuid.uuid4().hex[:5]
    physics, chem = f"vtnp{tag}", f"vtnc{tag}"
    with local_users("vtn", (4, 4, 4, 4), first_uid=64_871) as users, \
            unix_group(physics, [users[0].name, users[1].name]), unix_group(chem, [users[1].name, users[2].name]):
        ann, bea, cy, dan = (u.name for u in users)
        raw = {**COORDINATOR_CONFIG, "policy": {"sharing": "work-conserving"},
               "users": [{"name": u.name, "uid": u.uid, "priority": 4} for u in users],
               "nss_groups": {"groups": {physics: 2, chem: 1}}}
        with served_coordinator(raw, tmp_path) as (cluster, _, _):
            assert read_members([physics, chem], [ann, bea, cy, dan]) == {physics: {ann, bea}, chem: {bea, cy}}
            source = NssGroups(cluster.config.nss_groups, cluster.group_commands)
            source()
            assert {(g.name, g.weight) for g in cluster.store.groups()} == {(physics, 2), (chem, 1)}
            placed = {u.name: u.group for u in cluster.store.users()}
            assert placed == {ann: physics, bea: "", cy: chem, dan: ""}, "bea is in both: refused, left at the root"
            generation = cluster.generation()
            source()
            assert cluster.generation() == generation, "nothing changed in NSS: nothing changes"
            for refused in (lambda: cluster.group_commands.move_user(dan, physics, "admin"),
                            lambda: cluster.group_commands.move_user(ann, "", "admin"),
                            lambda: cluster.group_commands.remove_group(physics, "admin"),
                            lambda: cluster.group_commands.set_group(physics, "admin", weight=5)):
                with pytest.raises(InvalidArgument, match="kept by NSS"):
                    refused()
            assert cluster.generation() == generation
            preferring = parse_config({**raw, "nss_groups": {"groups": {physics: 2, chem: 1}, "prefer": {bea: chem}}})
            subprocess.run(["gpasswd", "--delete", ann, physics], check=True, capture_output=True)
            NssGroups(preferring.nss_groups, cluster.group_commands)()
            assert {u.name: u.group for u in cluster.store.users()} == {ann: "", bea: chem, cy: chem, dan: ""}
