"""The coordinator's durable state in ZooKeeper: what coordinator/state/store.py keeps in SQLite, for
several coordinators of which one leads.

Layout under `root`: `generation` (the counter, as text), `store_id`, `users/<name>`,
`jobs/<job id>@<node>`, `nodes/<node id>` and `groups/<name>` (JSON each; names percent-encoded;
`nodes` exists once the config file's storage nodes were seeded, `groups` once a group was added). Every change is one multi-op
transaction of writes conditional on the versions read (create fails on an existing znode,
set and delete name the version) that also writes the generation znode at the version read: any
two changes are ordered by that znode's version, so a change computed from a state someone else
changed meanwhile fails whole and is computed again from the new state. With a `fence` (the
leader's election znode) each transaction also checks that znode, so a coordinator that lost its
leadership (its session) cannot change the state, even if it has not noticed yet. The generation
only grows: it is only ever written by such a transaction, from the value read, plus one.

Reads come from a copy of the whole state, valid while the generation znode's version is the one
it was read at (one round trip checks that); a change this store made is applied to the copy.
"""

import json
import logging
import random
import secrets
import threading
import time
import urllib.parse
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from kazoo.client import KazooClient
from kazoo.exceptions import (BadVersionError, KazooException, NodeExistsError, NoNodeError, NotEmptyError,
                              RolledBackError, ZookeeperError)
from kazoo.handlers.threading import KazooTimeoutError

from vnode_sync.coordinator.state.groups import GroupRecord, check_member, check_new, check_parent, check_removable
from vnode_sync.coordinator.state.store import StoreUnusable, UserRecord, UserSettings, JobRecord
from vnode_sync.errors import InvalidArgument, NotFound, Unavailable

log = logging.getLogger(__name__)

# A call to ZooKeeper that has no answer by then fails (the store thread never hangs on it).
CALL_TIMEOUT_SECONDS = 10.0
# A change that keeps meeting other writers' changes gives up (normally only the leader writes),
# after waiting a random while of up to CHANGE_BACKOFF_SECONDS x attempts between attempts.
CHANGE_ATTEMPTS = 20
CHANGE_BACKOFF_SECONDS = 0.01

_NEW, _SET, _DELETE = "create", "set", "delete"


class LostLeadership(Unavailable):
    """The fence znode is gone or changed: this coordinator no longer leads and must not write."""


def _encode(name: str) -> str:
    """A user name or job id as one znode name ('/' and '.' can be in job ids; '.' and '..' are not znodes)."""
    return urllib.parse.quote(name, safe="").replace(".", "%2E")


def _decode(znode: str) -> str:
    return urllib.parse.unquote(znode)


def _job_key(job_id: str, node: str) -> str:
    return f"jobs/{_encode(job_id)}@{_encode(node)}"


@dataclass
class _State:
    """The whole state as read at one version of the generation znode."""

    version: int
    generation: int
    users: dict[str, tuple[dict, int]] = field(default_factory=dict)   # name -> (fields, znode version)
    jobs: dict[tuple[str, str], tuple[dict, int]] = field(default_factory=dict)   # (job, node) -> ...
    nodes: dict[str, tuple[dict, int]] | None = None   # storage node id -> (spec, version); None: not seeded
    groups: dict[str, tuple[dict, int]] | None = None  # group name -> (fields, version); None: none added yet
    records: list[UserRecord] | None = None   # made from users and jobs on the first read

    def user_records(self) -> list[UserRecord]:
        if self.records is None:
            by_user: dict[str, list[dict]] = {}
            for job, _ in self.jobs.values():
                by_user.setdefault(job["user"], []).append(job)
            self.records = [_user_record(name, fields, by_user.get(name, []))
                            for name, (fields, _) in sorted(self.users.items())]
        return self.records


def _user_record(name: str, fields: dict, jobs: list[dict]) -> UserRecord:
    """As the SQLite store's query sums a user's jobs up."""
    explicit = [j["priority"] for j in jobs if j["priority"] is not None]
    limits = [j["limit_bps"] for j in jobs]
    return UserRecord(name, fields["uid"], fields["priority"], fields["active"], len(jobs),
                      max(explicit, default=None), any(j["priority"] is None for j in jobs),
                      fields["reservation_bps"], fields["limit_bps"],
                      max((j["reservation_bps"] for j in jobs), default=0),
                      max(limits) if limits and 0 not in limits else 0, fields.get("group", ""))


@dataclass
class _Change:
    """The writes of one change, applied to a copy of the state only once ZooKeeper took them."""

    ops: list[tuple[str, str, dict | None, int]] = field(default_factory=list)   # (kind, key, fields, version)
    bump: bool = True   # a new generation (else the generation znode is written at the same value)

    def create(self, key: str, fields: dict) -> None:
        self.ops.append((_NEW, key, fields, -1))

    def set(self, key: str, fields: dict, version: int) -> None:
        self.ops.append((_SET, key, fields, version))

    def delete(self, key: str, version: int) -> None:
        self.ops.append((_DELETE, key, None, version))


def _user_fields(uid: int, priority: int, active: bool) -> dict:
    return {"uid": uid, "priority": priority, "active": bool(active), "reservation_bps": 0, "limit_bps": 0}


class ZooKeeperStore(UserSettings):
    """`create`: make the store under `root` if there is none (never over an existing one), with
    `seed_users` (objects with name, uid, priority, active) in it, in the same transaction.
    `fence`: a znode path (the leader's election node) every change checks is still there, unchanged."""

    def __init__(self, client: KazooClient, root: str, create: bool = True, fence: str | None = None,
                 seed_users: Iterable = ()):
        self.client = client
        self.root = root.rstrip("/") or "/"
        self.path = f"zookeeper:{self.root}"   # named in messages, as the SQLite store's file
        self.fence = fence
        self._fence_version: int | None = None
        self._lock = threading.RLock()
        self._state: _State | None = None
        self.rows_written = 0
        self.created = False
        try:
            if self.client.exists(self._path("generation")) is None:
                if not create:
                    raise StoreUnusable(f"no vnode-sync store in ZooKeeper under {self.root}; the first "
                                        f"coordinator started with this zookeeper section makes one")
                self.created = self._first_start(list(seed_users))
                if self.created:
                    for seed in seed_users:
                        log.info("user %s created from config (priority %d)", seed.name, seed.priority)
            self._check()
        except (KazooException, KazooTimeoutError) as e:
            raise StoreUnusable(f"ZooKeeper store {self.root} cannot be read ({type(e).__name__}: {e})") from e

    def _path(self, key: str) -> str:
        return f"{self.root}/{key}" if self.root != "/" else f"/{key}"

    def _first_start(self, seed_users: list) -> bool:
        """Every znode of a new store, the seed users too, in one transaction: a store is whole or
        absent. False if another coordinator made it first."""
        if self.root != "/":
            parent = self.root.rsplit("/", 1)[0]
            if parent:
                self.client.ensure_path(parent)
        transaction = self.client.transaction()
        if self.root != "/" and self.client.exists(self.root) is None:
            transaction.create(self.root, b"")
        # One generation per seeded user, as when they were seeded one by one.
        for key, value in (("users", b""), ("jobs", b""), ("store_id", b"%d" % (secrets.randbits(62) | 1)),
                           ("generation", b"%d" % (1 + len(seed_users)))):
            transaction.create(self._path(key), value)
        for seed in seed_users:
            transaction.create(self._path(f"users/{_encode(seed.name)}"),
                               json.dumps(_user_fields(seed.uid, seed.priority, seed.active), sort_keys=True).encode())
        results = transaction.commit()
        failure = next((r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)), None)
        if isinstance(failure, NodeExistsError):
            return False
        if failure is not None:
            raise failure
        return True

    def _check(self) -> None:
        for key in ("users", "jobs", "store_id", "generation"):
            if self.client.exists(self._path(key)) is None:
                raise StoreUnusable(f"ZooKeeper store {self.root} lacks {key}; it is not a whole vnode-sync store "
                                    f"(remove it on purpose, then start a coordinator to make a new one)")

    # ---- reading -------------------------------------------------------------

    def _call(self, started):
        """The result of a kazoo async call, or Unavailable within CALL_TIMEOUT_SECONDS."""
        try:
            return started.get(timeout=CALL_TIMEOUT_SECONDS)
        except KazooTimeoutError as e:
            raise Unavailable(f"state store {self.path}: no answer within {CALL_TIMEOUT_SECONDS:.0f} s") from e

    def _current(self) -> _State:
        """The state at the generation znode's current version (read anew only when it moved). A
        server answers reads from what it has applied, which may lag another client's committed
        write (measured: a long-lived reader missed a new leader's bump with both cores busy): a sync
        first makes every read see every change committed before it began."""
        with self._lock:
            try:
                self._call(self.client.sync_async(self._path("generation")))
                data, stat = self._call(self.client.get_async(self._path("generation")))
                if self._state is not None and self._state.version == stat.version:
                    return self._state
                self._state = self._read_all()
                return self._state
            except (ZookeeperError, KazooException) as e:
                self._state = None
                raise Unavailable(f"state store {self.path} cannot be read ({type(e).__name__})") from e

    def _read_all(self) -> _State:
        """Every user and job, consistent: read again if the generation moved meanwhile."""
        while True:
            data, stat = self._call(self.client.get_async(self._path("generation")))
            users = self._call(self.client.get_children_async(self._path("users")))
            jobs = self._call(self.client.get_children_async(self._path("jobs")))
            try:
                nodes = self._call(self.client.get_children_async(self._path("nodes")))
            except NoNodeError:
                nodes = None   # not seeded yet
            try:
                groups = self._call(self.client.get_children_async(self._path("groups")))
            except NoNodeError:
                groups = None   # no group added yet
            pending = [("users/" + u, self.client.get_async(self._path("users/" + u))) for u in users]
            pending += [("jobs/" + j, self.client.get_async(self._path("jobs/" + j))) for j in jobs]
            pending += [("nodes/" + n, self.client.get_async(self._path("nodes/" + n))) for n in nodes or ()]
            pending += [("groups/" + g, self.client.get_async(self._path("groups/" + g))) for g in groups or ()]
            state = _State(stat.version, int(data), nodes={} if nodes is not None else None,
                           groups={} if groups is not None else None)
            for key, started in pending:
                try:
                    raw, znode = self._call(started)
                except NoNodeError:
                    continue   # removed meanwhile: the generation moved too, read again below
                fields = json.loads(raw)
                if key.startswith("users/"):
                    state.users[_decode(key[6:])] = (fields, znode.version)
                elif key.startswith("nodes/"):
                    state.nodes[_decode(key[6:])] = (fields, znode.version)
                elif key.startswith("groups/"):
                    state.groups[_decode(key[7:])] = (fields, znode.version)
                else:
                    state.jobs[(fields["job_id"], fields["node"])] = (fields, znode.version)
            _, again = self._call(self.client.get_async(self._path("generation")))
            if again.version == stat.version:
                return state

    def store_id(self) -> int:
        data, _ = self._call(self.client.get_async(self._path("store_id")))
        return int(data)

    def generation(self) -> int:
        return self._current().generation

    def users(self) -> list[UserRecord]:
        return list(self._current().user_records())

    def user(self, name: str) -> UserRecord:
        record = next((u for u in self._current().user_records() if u.name == name), None)
        if record is None:
            raise NotFound(f"unknown user {name!r}")
        return record

    def holder_of_uid(self, uid: int, other_than: str) -> str | None:
        return next((name for name, (fields, _) in sorted(self._current().users.items())
                     if fields["uid"] == uid and name != other_than), None)

    def jobs_of(self, user: str) -> list[tuple[str, str]]:
        return sorted(key for key, (job, _) in self._current().jobs.items() if job["user"] == user)

    def running_jobs(self, of: Collection[tuple[str, str]] | None = None) -> list[JobRecord]:
        jobs = self._current().jobs.items()
        if of is not None:   # in memory: a pass over the jobs, but no sort of them all
            wanted = set(of)
            jobs = [item for item in jobs if (item[1][0]["user"], item[0][0]) in wanted]
        return [JobRecord(job_id, node, job["user"], job["priority"], job["reservation_bps"], job["limit_bps"])
                for (job_id, node), (job, _) in sorted(jobs)]

    # ---- changing --------------------------------------------------------------

    def _change(self, plan):
        """Run `plan(state) -> (change or None, result)` on the current state and commit its writes in
        one transaction conditional on the versions read; again on a newer state if someone else
        wrote meanwhile. Returns (generation after, result)."""
        with self._lock:
            for attempt in range(CHANGE_ATTEMPTS):
                if attempt:
                    time.sleep(random.uniform(0, CHANGE_BACKOFF_SECONDS * attempt))
                state = self._current()
                change, result = plan(state)
                if change is None:
                    return state.generation, result
                try:
                    return self._commit(state, change), result
                except BadVersionError:
                    continue   # another writer: plan again on its state
            raise Unavailable(f"state store {self.path}: the change met {CHANGE_ATTEMPTS} concurrent changes; "
                              "nothing was changed")

    def _commit(self, state: _State, change: _Change) -> int:
        generation = state.generation + 1 if change.bump else state.generation
        transaction = self.client.transaction()
        if self.fence is not None:
            transaction.check(self.fence, self._fenced_version())
        for kind, key, fields, version in change.ops:
            path, data = self._path(key), json.dumps(fields, sort_keys=True).encode() if fields else b""
            if kind == _NEW:
                transaction.create(path, data)
            elif kind == _SET:
                transaction.set_data(path, data, version=version)
            else:
                transaction.delete(path, version=version)
        transaction.set_data(self._path("generation"), b"%d" % generation, version=state.version)
        try:
            results = self._call(transaction.commit_async())
        except (ZookeeperError, KazooException) as e:
            # The outcome is unknown (the request may have been applied): read everything again.
            self._state = None
            raise Unavailable(f"state store {self.path}: the change's outcome is unknown ({type(e).__name__}); "
                              "check the state before repeating it") from e
        failures = [r for r in results if isinstance(r, Exception)]
        if failures:
            self._state = None
            cause = next((f for f in failures if not isinstance(f, RolledBackError)), failures[0])
            if self.fence is not None and results and isinstance(results[0], Exception) \
                    and not isinstance(results[0], RolledBackError):
                raise LostLeadership(f"this coordinator no longer leads (its election znode {self.fence} is gone); "
                                     "nothing was changed")
            if isinstance(cause, (BadVersionError, NoNodeError, NodeExistsError, NotEmptyError)):
                raise BadVersionError()
            raise Unavailable(f"state store {self.path} refused the change ({type(cause).__name__}); "
                              "nothing was changed")
        self._state = self._applied(state, change, generation)
        self.rows_written += len(change.ops)
        return generation

    def _fenced_version(self) -> int:
        if self._fence_version is None:
            stat = self._call(self.client.exists_async(self.fence))
            if stat is None:
                raise LostLeadership(f"this coordinator does not lead (no election znode {self.fence}); "
                                     "nothing was changed")
            self._fence_version = stat.version
        return self._fence_version

    @staticmethod
    def _applied(state: _State, change: _Change, generation: int) -> _State:
        after = _State(state.version + 1, generation, dict(state.users), dict(state.jobs),
                       dict(state.nodes) if state.nodes is not None else None,
                       dict(state.groups) if state.groups is not None else None)
        for kind, key, fields, version in change.ops:
            if key == "nodes":
                after.nodes = {}
                continue
            if key == "groups":
                after.groups = {}
                continue
            if key.startswith("users/"):
                table, item = after.users, _decode(key[6:])
            elif key.startswith("nodes/"):
                table, item = after.nodes, _decode(key[6:])
            elif key.startswith("groups/"):
                table, item = after.groups, _decode(key[7:])
            else:
                table = after.jobs
                job_part, node_part = key[5:].split("@")
                item = (_decode(job_part), _decode(node_part))
            if kind == _DELETE:
                del table[item]
            else:
                table[item] = (fields, version + 1)
        return after

    # ---- users -------------------------------------------------------------------

    def add_user(self, name: str, uid: int, priority: int, active: bool) -> int:
        def plan(state):
            if name in state.users:
                raise InvalidArgument(f"user {name!r} exists already; use set-priority to change it")
            change = _Change()
            change.create(f"users/{_encode(name)}", _user_fields(uid, priority, active))
            return change, None
        return self._change(plan)[0]

    def _update_user(self, name: str, column: str, value) -> tuple[int, object]:
        def plan(state):
            if name not in state.users:
                raise NotFound(f"unknown user {name!r}")
            fields, version = state.users[name]
            old = fields[column]
            if old == value:
                return None, old
            change = _Change()
            change.set(f"users/{_encode(name)}", {**fields, column: value}, version)
            return change, old
        return self._change(plan)

    def remove_user(self, name: str) -> int:
        """The user and its jobs, at once."""
        def plan(state):
            if name not in state.users:
                raise NotFound(f"unknown user {name!r}")
            change = _Change()
            for (job_id, node), (job, version) in state.jobs.items():
                if job["user"] == name:
                    change.delete(_job_key(job_id, node), version)
            change.delete(f"users/{_encode(name)}", state.users[name][1])
            return change, None
        return self._change(plan)[0]

    # ---- groups ------------------------------------------------------------------
    # Each change plans on the state read and checks the rules (groups.py) on it: a change computed
    # from a state someone else changed meanwhile fails whole and is planned again.

    @staticmethod
    def _groups_of(state: _State) -> dict[str, GroupRecord]:
        return {name: GroupRecord(name, **fields) for name, (fields, _) in sorted((state.groups or {}).items())}

    def groups(self) -> list[GroupRecord]:
        return list(self._groups_of(self._current()).values())

    def add_group(self, record: GroupRecord) -> int:
        def plan(state):
            check_new(self._groups_of(state), record)
            change = _Change()
            if state.groups is None:
                change.create("groups", {})
            change.create(f"groups/{_encode(record.name)}", record.fields())
            return change, None
        return self._change(plan)[0]

    def set_group(self, record: GroupRecord) -> tuple[int, GroupRecord]:
        def plan(state):
            groups = self._groups_of(state)
            old = groups.get(record.name)
            if old is None:
                raise NotFound(f"unknown group {record.name!r}")
            if old == record:
                return None, old
            if record.parent != old.parent:
                check_parent(groups, record.name, record.parent)
            change = _Change()
            change.set(f"groups/{_encode(record.name)}", record.fields(), state.groups[record.name][1])
            return change, old
        return self._change(plan)

    def move_user(self, name: str, group: str) -> tuple[int, str]:
        def plan(state):
            if name not in state.users:
                raise NotFound(f"unknown user {name!r}")
            check_member(self._groups_of(state), group)
            fields, version = state.users[name]
            old = fields.get("group", "")
            if old == group:
                return None, old
            change = _Change()
            change.set(f"users/{_encode(name)}", {**fields, "group": group}, version)
            return change, old
        return self._change(plan)

    def remove_group(self, name: str) -> tuple[int, GroupRecord]:
        def plan(state):
            groups = self._groups_of(state)
            check_removable(groups, {u: f.get("group", "") for u, (f, _) in state.users.items()}, name)
            change = _Change()
            change.delete(f"groups/{_encode(name)}", state.groups[name][1])
            return change, groups[name]
        return self._change(plan)

    # ---- jobs --------------------------------------------------------------------

    def start_job(self, job_id: str, node: str, user: str, uid: int, priority: int | None,
                  new_user_priority: int, reservation_bps: int = 0, limit_bps: int = 0) -> int:
        """Record a running job (idempotent per job and node); creates the user if unknown."""
        now = time.time()

        def plan(state):
            change = _Change()
            if user not in state.users:
                change.create(f"users/{_encode(user)}", _user_fields(uid, new_user_priority, False))
            existing = state.jobs.get((job_id, node))
            wanted = {"priority": priority, "reservation_bps": reservation_bps, "limit_bps": limit_bps}
            if existing is not None:
                job, version = existing
                if job["user"] != user:
                    raise InvalidArgument(f"job {job_id!r} on {node!r} belongs to {job['user']!r}, not {user!r}")
                same = all(job[k] == v for k, v in wanted.items())
                change.set(_job_key(job_id, node), {**job, **wanted, "confirmed_at": now}, version)
                change.bump = not same or user not in state.users
            else:
                change.create(_job_key(job_id, node), {"job_id": job_id, "node": node, "user": user,
                                                       "started_at": now, "confirmed_at": now, **wanted})
            return change, None
        return self._change(plan)[0]

    def end_job(self, job_id: str, node: str) -> tuple[int, str | None]:
        """Forget a job on a node (all nodes if node is empty); ending twice is not an error."""
        def plan(state):
            ended = [(key, entry) for key, entry in state.jobs.items() if key[0] == job_id and (not node or key[1] == node)]
            if not ended:
                return None, None
            change = _Change()
            for (jid, n), (_, version) in ended:
                change.delete(_job_key(jid, n), version)
            return change, ended[0][1][0]["user"]
        return self._change(plan)

    def confirm_running_jobs(self, node: str, running: set[str]) -> list[str]:
        """Reconcile one node's jobs with the batch system's list; returns the job ids dropped."""
        now = time.time()

        def plan(state):
            change = _Change()
            dropped = [key for key in state.jobs if (key[1] == node or not node) and key[0] not in running]
            for key, (job, version) in state.jobs.items():
                if key in dropped:
                    change.delete(_job_key(*key), version)
                elif key[0] in running:
                    change.set(_job_key(*key), {**job, "confirmed_at": now}, version)
            change.bump = bool(dropped)
            return (change if change.ops else None), sorted({key[0] for key in dropped})
        return self._change(plan)[1]

    def expire_jobs(self, older_than: float) -> list[tuple[str, str]]:
        def plan(state):
            expired = sorted(key for key, (job, _) in state.jobs.items() if job["confirmed_at"] < older_than)
            if not expired:
                return None, []
            change = _Change()
            for key in expired:
                change.delete(_job_key(*key), state.jobs[key][1])
            return change, expired
        return self._change(plan)[1]

    # ---- storage nodes -------------------------------------------------------------

    def storage_nodes(self) -> dict[str, str] | None:
        """node id -> its spec (JSON); None until the nodes were first seeded."""
        nodes = self._current().nodes
        if nodes is None:
            return None
        return {node_id: json.dumps(spec, sort_keys=True) for node_id, (spec, _) in sorted(nodes.items())}

    def seed_storage_nodes(self, specs: dict[str, str]) -> bool:
        """The config file's nodes, once in the store's life (`nodes` and its children in one
        transaction, no new generation); False if they were seeded before."""
        def plan(state):
            if state.nodes is not None:
                return None, False
            change = _Change(bump=False)
            change.create("nodes", {})
            for node_id, spec in specs.items():
                change.create(f"nodes/{_encode(node_id)}", json.loads(spec))
            return change, True
        return self._change(plan)[1]

    def put_storage_node(self, node_id: str, spec: str, create: bool) -> tuple[int, str | None]:
        """Add (`create`) or replace a node's spec; returns (generation, old spec or None)."""
        def plan(state):
            entry = (state.nodes or {}).get(node_id)
            old = json.dumps(entry[0], sort_keys=True) if entry else None
            if create and old is not None:
                raise InvalidArgument(f"storage node {node_id!r} exists already; use `vnodectl nodes set` to change it")
            if not create and old is None:
                raise NotFound(f"unknown storage node {node_id!r}")
            if old == json.dumps(json.loads(spec), sort_keys=True):
                return None, old
            change = _Change()
            if state.nodes is None:
                change.create("nodes", {})
            if entry is None:
                change.create(f"nodes/{_encode(node_id)}", json.loads(spec))
            else:
                change.set(f"nodes/{_encode(node_id)}", json.loads(spec), entry[1])
            return change, old
        return self._change(plan)

    def remove_storage_node(self, node_id: str) -> tuple[int, str]:
        """Returns (generation, the removed spec)."""
        def plan(state):
            entry = (state.nodes or {}).get(node_id)
            if entry is None:
                raise NotFound(f"unknown storage node {node_id!r}")
            change = _Change()
            change.delete(f"nodes/{_encode(node_id)}", entry[1])
            return change, json.dumps(entry[0], sort_keys=True)
        return self._change(plan)

    def touch(self) -> int:
        """Bump the generation without a state change (e.g. a new leader took over)."""
        return self._change(lambda state: (_Change(), None))[0]

    def close(self) -> None:
        """The client belongs to the caller (it also holds the election): nothing to release here."""
        with self._lock:
            self._state = None
