"""The ZooKeeper state backend, against a real three-server ensemble on loopback: it keeps what the
SQLite store keeps, the same way (each behaviour is checked on both), and every change is a
conditional transaction: concurrent writers lose nothing, the generation only grows, and a
writer fenced on an election znode it no longer holds changes nothing."""

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from kazoo.client import KazooClient

from testbed.zookeeper_ensemble import WHY_NO_ZOOKEEPER, ZooKeeperEnsemble
from tests.conftest import unique_name
from vnode_sync.coordinator.state.store import StateStore, Store, StoreUnusable, JobRecord
from vnode_sync.coordinator.state.zookeeper_store import LostLeadership, ZooKeeperStore
from vnode_sync.errors import InvalidArgument, NotFound, Unavailable

pytestmark = pytest.mark.skipif(WHY_NO_ZOOKEEPER is not None, reason=WHY_NO_ZOOKEEPER or "")


@pytest.fixture
def client(ensemble):
    started = KazooClient(hosts=ensemble.hosts, timeout=10)
    started.start(timeout=20)
    yield started
    started.stop()
    started.close()


@pytest.fixture
def root():
    return f"/vnode-sync-test/{uuid.uuid4().hex}"


@pytest.fixture(params=["sqlite", "zookeeper"])
def store(request, tmp_path):
    if request.param == "sqlite":
        made = StateStore(str(tmp_path / "s.sqlite"))
    else:
        made = ZooKeeperStore(request.getfixturevalue("client"), request.getfixturevalue("root"))
    yield made
    made.close()


# ---- the same behaviours as the SQLite store's -------------------------------------------------

def test_both_stores_offer_the_seam_the_coordinator_uses(store):
    assert isinstance(store, Store)


def test_every_change_bumps_the_generation_and_no_op_changes_do_not(store):
    g0 = store.generation()
    store.add_user("alice", 1001, 4, False)
    g1, old = store.set_priority("alice", 8)
    assert g1 > g0 and old == 4
    assert store.set_priority("alice", 8)[0] == g1
    assert store.set_reservation("alice", 5_000)[1] == 0 and store.set_limit("alice", 9_000)[1] == 0
    assert store.set_active("alice", True) == (g1 + 3, False)
    assert store.user("alice").reservation_bps == 5_000 and store.user("alice").limit_bps == 9_000


def test_unknown_users_and_duplicates_change_nothing(store):
    store.add_user("alice", 1001, 4, False)
    g = store.generation()
    with pytest.raises(NotFound):
        store.set_priority("mallory", 5)
    with pytest.raises(InvalidArgument):
        store.add_user("alice", 1002, 5, True)
    with pytest.raises(NotFound):
        store.remove_user("mallory")
    assert store.generation() == g and store.user("alice").uid == 1001
    assert store.holder_of_uid(1001, "bob") == "alice" and store.holder_of_uid(1001, "alice") is None


def test_jobs_are_reference_counted_and_idempotent(store):
    store.start_job("10", "c1", "bob", 1002, None, 10)
    g = store.start_job("10", "c1", "bob", 1002, None, 10)   # repeated prologue: no new generation
    assert store.generation() == g
    store.start_job("11/x.y", "c2", "bob", 1002, 30, 10, reservation_bps=7, limit_bps=90)
    bob = store.user("bob")
    assert (bob.running_jobs, bob.effective_priority, bob.effective_reservation) == (2, 30, 7)
    assert bob.effective_limit == 0, "one job asked for no ceiling: none holds"
    assert store.jobs_of("bob") == [("10", "c1"), ("11/x.y", "c2")]
    # What jobs as VNodes read (job_vnodes.py): each job's own request, as its hook sent it.
    assert store.running_jobs() == [JobRecord("10", "c1", "bob", None), JobRecord("11/x.y", "c2", "bob", 30, 7, 90)]
    assert store.running_jobs(of={("bob", "11/x.y"), ("alice", "10"), ("bob", "12")}) == [
        JobRecord("11/x.y", "c2", "bob", 30, 7, 90)], "only those named, each of its own user"
    with pytest.raises(InvalidArgument):
        store.start_job("10", "c1", "carol", 1003, None, 10)
    store.end_job("11/x.y", "c2")
    assert store.user("bob").active and store.user("bob").effective_priority == 10
    store.end_job("10", "c1")
    assert store.end_job("10", "c1")[1] is None   # repeated epilogue
    assert not store.user("bob").active


def test_jobs_not_confirmed_in_time_expire_and_reconcile_drops_unlisted(store):
    store.start_job("10", "c1", "bob", 1002, None, 10)
    store.start_job("11", "c1", "bob", 1002, None, 10)
    store.start_job("12", "c2", "bob", 1002, None, 10)
    assert store.confirm_running_jobs("c1", {"10"}) == ["11"]
    assert store.expire_jobs(older_than=0) == []
    assert store.expire_jobs(older_than=2**40) == [("10", "c1"), ("12", "c2")]
    assert not store.user("bob").active


def test_removing_a_user_removes_its_jobs(store):
    store.start_job("10", "c1", "bob", 1002, 20, 10)
    g = store.remove_user("bob")
    assert store.users() == [] and store.jobs_of("bob") == [] and store.generation() == g
    store.add_user("bob", 1002, 5, False)
    assert store.user("bob").running_jobs == 0


def test_storage_nodes_are_seeded_once_then_changed_whole(store):
    assert store.storage_nodes() is None, "a new store: the config file's nodes are still to be seeded"
    g = store.generation()
    assert store.seed_storage_nodes({"dn1": '{"id": "dn1"}', "dn.2": '{"id": "dn.2"}'})
    assert not store.seed_storage_nodes({"dn9": '{"id": "dn9"}'}), "seeded once in the store's life"
    assert store.storage_nodes() == {"dn1": '{"id": "dn1"}', "dn.2": '{"id": "dn.2"}'}
    assert store.generation() == g, "seeding is no change of the desired state"
    with pytest.raises(InvalidArgument, match="exists already"):
        store.put_storage_node("dn1", '{"id": "dn1", "x": 1}', create=True)
    with pytest.raises(NotFound):
        store.put_storage_node("dn3", '{"id": "dn3"}', create=False)
    with pytest.raises(NotFound):
        store.remove_storage_node("dn3")
    assert store.generation() == g
    assert store.put_storage_node("dn1", '{"id": "dn1", "x": 1}', create=False) == (g + 1, '{"id": "dn1"}')
    assert store.put_storage_node("dn1", '{"id": "dn1", "x": 1}', create=False)[0] == g + 1, "unchanged: no bump"
    assert store.put_storage_node("dn3", '{"id": "dn3"}', create=True) == (g + 2, None)
    assert store.remove_storage_node("dn.2") == (g + 3, '{"id": "dn.2"}')
    assert store.storage_nodes() == {"dn1": '{"id": "dn1", "x": 1}', "dn3": '{"id": "dn3"}'}


# ---- ZooKeeper only -----------------------------------------------------------------------------

def test_the_state_is_kept_for_the_next_coordinator_and_the_generation_goes_on(client, root, ensemble):
    first = ZooKeeperStore(client, root)
    assert first.created
    first.add_user("alice", 1001, 4, True)
    generation = first.set_priority("alice", 9)[0]
    other = KazooClient(hosts=ensemble.hosts)
    other.start(timeout=20)
    try:
        second = ZooKeeperStore(other, root, create=False)
        assert not second.created and second.store_id() == first.store_id()
        assert second.user("alice").priority == 9 and second.generation() == generation
        assert second.touch() == generation + 1
        assert first.generation() == generation + 1, "a reader sees another's change at once"
    finally:
        other.stop()
        other.close()


def test_a_missing_store_is_refused_without_create(client, root):
    with pytest.raises(StoreUnusable, match="first coordinator"):
        ZooKeeperStore(client, root, create=False)
    assert client.exists(root) is None


def test_a_half_made_store_is_refused(client, root):
    client.ensure_path(f"{root}/users")
    client.create(f"{root}/generation", b"3")
    with pytest.raises(StoreUnusable, match="lacks"):
        ZooKeeperStore(client, root)


def test_two_first_starts_make_one_store(ensemble, root):
    clients = [KazooClient(hosts=ensemble.hosts) for _ in range(4)]
    for c in clients:
        c.start(timeout=20)
    try:
        stores: list[ZooKeeperStore] = []
        threads = [threading.Thread(target=lambda c=c: stores.append(ZooKeeperStore(c, root))) for c in clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sum(s.created for s in stores) == 1
        assert len({s.store_id() for s in stores}) == 1 and {s.generation() for s in stores} == {1}
    finally:
        for c in clients:
            c.stop()
            c.close()


def test_concurrent_writers_lose_no_change_and_share_one_growing_generation(ensemble, root):
    """Two coordinators' stores on one root: each change is planned on the state it read and taken
    only if that state is still the latest (the generation znode's version); else planned again."""
    clients = [KazooClient(hosts=ensemble.hosts) for _ in range(2)]
    for c in clients:
        c.start(timeout=20)
    try:
        stores = [ZooKeeperStore(c, root) for c in clients]
        for i in range(2):
            stores[0].add_user(f"u{i}", 2000 + i, 1, False)
        seen: list[list[int]] = [[], []]

        def writer(i: int) -> None:
            for priority in range(2, 42):
                seen[i].append(stores[i].set_priority(f"u{i}", priority)[0])
                seen[i].append(stores[i].set_reservation(f"u{1 - i}", priority)[0])

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for one in seen:
            assert one == sorted(one), "each writer sees the generation grow"
        changed = [g for one in seen for g in one]
        assert len(set(changed)) == len(changed) == 160, "no two changes share a generation"
        assert stores[0].generation() == 3 + 160 and stores[1].generation() == stores[0].generation()
        assert [(u.priority, u.reservation_bps) for u in stores[1].users()] == [(41, 41), (41, 41)]
    finally:
        for c in clients:
            c.stop()
            c.close()


def test_a_writer_fenced_on_an_election_znode_it_lost_changes_nothing(ensemble, client, root):
    leader = KazooClient(hosts=ensemble.hosts)
    leader.start(timeout=20)
    election = f"{root}-election"
    lease = leader.create(f"{election}/lease", b"a", ephemeral=True, makepath=True)
    fenced = ZooKeeperStore(leader, root, fence=lease)
    fenced.add_user("alice", 1001, 4, False)
    generation = fenced.generation()
    client.delete(lease)   # as when the leader's session expires
    try:
        with pytest.raises(LostLeadership):
            fenced.set_priority("alice", 9)
        reader = ZooKeeperStore(client, root, create=False)
        assert reader.user("alice").priority == 4 and reader.generation() == generation
    finally:
        leader.stop()
        leader.close()


def test_with_a_digest_identity_no_other_client_can_read_or_change_the_policy(ensemble, client, tmp_path):
    """docs/ha.md: the coordinators' znodes carry an ACL for their digest user alone."""
    from kazoo.exceptions import NoAuthError

    from vnode_sync.coordinator.config import ZooKeeperSettings
    from vnode_sync.coordinator.ha.leadership import connect

    password = tmp_path / "zookeeper.password"
    password.write_text("s3cret\n")
    root = f"/vnode-sync-acl-{uuid.uuid4().hex}/site"
    settings = ZooKeeperSettings(hosts=ensemble.hosts, root=root, advertise="127.0.0.1:1",
                                 digest_user="vnode-sync", digest_password_file=str(password))
    coordinator = connect(settings)
    try:
        store = ZooKeeperStore(coordinator, root)
        store.add_user("alice", 1001, 4, False)
        for change in (lambda: client.set(f"{root}/users/alice", b'{"priority": 100}'),
                       lambda: client.get(f"{root}/users/alice"),
                       lambda: client.delete(f"{root}/generation"),
                       lambda: client.create(f"{root}/users/mallory", b"{}")):
            with pytest.raises(NoAuthError):
                change()
        assert store.user("alice").priority == 4
    finally:
        coordinator.stop()
        coordinator.close()


def test_the_coordinator_reaches_an_ensemble_that_requires_tls_and_client_certificates(tmp_path):
    """docs/ha.md: zookeeper.tls; the servers' secure port requires a client certificate from their CA
    (a client without one, or with one from another CA, is refused)."""
    from vnode_sync.coordinator.config import ZooKeeperSettings
    from vnode_sync.coordinator.ha.leadership import connect
    from vnode_sync.security.tls import TlsFiles

    with ZooKeeperEnsemble(unique_name("zktls"), tls=True) as secured:
        tls = TlsFiles(ca=secured.tls.ca, cert=secured.tls.client_cert, key=secured.tls.client_key)
        settings = ZooKeeperSettings(hosts=secured.secure_hosts, advertise="127.0.0.1:1", tls=tls,
                                     session_timeout_seconds=2)
        coordinator = connect(settings)
        try:
            store = ZooKeeperStore(coordinator, f"/vnode-sync-test/{uuid.uuid4().hex}")
            store.add_user("alice", 1001, 4, False)
            assert store.user("alice").priority == 4
        finally:
            coordinator.stop()
            coordinator.close()
        foreign = tmp_path / "foreign"
        from vnode_sync.security import certs
        certs.create_ca(str(foreign))
        stranger = certs.issue(str(foreign), "node", "stranger")
        refused = (settings.model_copy(update={"tls": None}),
                   settings.model_copy(update={"tls": TlsFiles(ca=secured.tls.ca, cert=stranger.cert,
                                                               key=stranger.key)}))

        def refusal(settings: ZooKeeperSettings) -> str:
            with pytest.raises(Unavailable, match="not reachable") as refused_with:
                connect(settings).close()
            return str(refused_with.value)
        # Each refusal takes connect's whole start timeout (kazoo retries a refused handshake): both at once.
        with ThreadPoolExecutor(max_workers=len(refused)) as pool:
            assert all(pool.map(refusal, refused))


# A refused login ends kazoo's connection thread with an exception it does not handle.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_on_an_ensemble_that_requires_sasl_only_the_coordinators_sasl_user_can_read_or_change_the_policy(tmp_path):
    """A wrong password is refused with a one-line error once the login was tried LOGIN_ATTEMPTS times."""
    from kazoo.exceptions import NoAuthError

    from vnode_sync.coordinator.config import ZooKeeperSettings
    from vnode_sync.coordinator.ha.leadership import connect

    password = tmp_path / "sasl.password"
    password.write_text("s3cret\n")
    with ZooKeeperEnsemble(unique_name("zksasl"), sasl_users={"vnode-sync": "s3cret", "mallory": "m"}) as secured:
        settings = ZooKeeperSettings(hosts=secured.hosts, advertise="127.0.0.1:1", sasl_user="vnode-sync",
                                     sasl_password_file=str(password), session_timeout_seconds=2)
        coordinator = connect(settings)
        other = KazooClient(hosts=secured.hosts, sasl_options={"mechanism": "DIGEST-MD5", "username": "mallory",
                                                               "password": "m"})
        other.start(timeout=20)
        try:
            root = f"/vnode-sync-sasl-{uuid.uuid4().hex}"
            store = ZooKeeperStore(coordinator, root)
            store.add_user("alice", 1001, 4, False)
            for change in (lambda: other.set(f"{root}/users/alice", b'{"priority": 100}'),
                           lambda: other.get(f"{root}/users/alice"),
                           lambda: other.create(f"{root}/users/mallory", b"{}")):
                with pytest.raises(NoAuthError):
                    change()
            assert store.user("alice").priority == 4
        finally:
            for c in (coordinator, other):
                c.stop()
                c.close()
        wrong = tmp_path / "wrong.password"
        wrong.write_text("guessed\n")
        with pytest.raises(Unavailable, match="ended the session at login 3 times"):
            connect(settings.model_copy(update={"sasl_password_file": str(wrong)})).close()


def test_a_new_store_holds_the_seed_users_from_its_first_transaction(client, root):
    from vnode_sync.coordinator.config import SeedUser

    seeds = [SeedUser(name="alice", uid=1001, priority=4, active=True), SeedUser(name="bob", uid=1002)]
    made = ZooKeeperStore(client, root, seed_users=seeds)
    assert made.created and made.generation() == 3
    assert [(u.name, u.priority, u.active) for u in made.users()] == [("alice", 4, True), ("bob", 10, False)]
    again = ZooKeeperStore(client, root, seed_users=[SeedUser(name="carol", uid=1003)])
    assert not again.created and [u.name for u in again.users()] == ["alice", "bob"], "never seeded twice"
