"""The coordinator's durable state in SQLite: users, groups, jobs, the generation counter. `Store` names
what the rest of the coordinator uses of it, which zookeeper_store.py keeps in ZooKeeper alike.

Every change runs in one transaction and bumps the generation in the same
transaction, so a crash leaves either the old state or the new one, never half.
"""

import fcntl
import logging
import os
import secrets
import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from vnode_sync.coordinator.state.groups import GroupRecord, check_member, check_new, check_parent, check_removable
from vnode_sync.durable import replace_durably
from vnode_sync.errors import InvalidArgument, NotFound, Unavailable, VNodeSyncError

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS users (
    name TEXT PRIMARY KEY,
    uid INTEGER NOT NULL,
    priority INTEGER NOT NULL CHECK (priority BETWEEN 1 AND 100),
    active INTEGER NOT NULL DEFAULT 0,
    reservation_bps INTEGER NOT NULL DEFAULT 0,   -- work-conserving floor, bytes/s per node
    limit_bps INTEGER NOT NULL DEFAULT 0,         -- work-conserving ceiling; 0 = none
    group_name TEXT NOT NULL DEFAULT ''           -- its group (groups.py); '' = under the root
);
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT NOT NULL,
    node TEXT NOT NULL,
    user TEXT NOT NULL REFERENCES users(name) ON DELETE CASCADE,
    priority INTEGER,            -- NULL: the user's own priority applies
    started_at REAL NOT NULL,
    confirmed_at REAL NOT NULL,
    reservation_bps INTEGER NOT NULL DEFAULT 0,   -- a job's own floor for its user
    limit_bps INTEGER NOT NULL DEFAULT 0,         -- a job's own ceiling for its user; 0 = none
    PRIMARY KEY (job_id, node)
);
-- Each storage node as the admin declared it, one JSON document (coordinator.config.StorageNodeConfig)
-- per node. Seeded once from the config file (meta 'nodes_seeded'); from then on changed only by the
-- node commands.
CREATE TABLE IF NOT EXISTS storage_nodes (node_id TEXT PRIMARY KEY, spec TEXT NOT NULL);
-- Every read of users sums up their jobs: without an index SQLite builds one of every job on each
-- read (16 ms at 3,300 jobs, and a StartJob read users three times). It covers what the sums read.
CREATE INDEX IF NOT EXISTS jobs_by_user ON jobs (user, priority, reservation_bps, limit_bps, job_id);
-- The tree of weights (groups.py): users' groups, groups under groups.
CREATE TABLE IF NOT EXISTS groups (
    name TEXT PRIMARY KEY,
    weight INTEGER NOT NULL CHECK (weight >= 1),
    parent TEXT NOT NULL DEFAULT '',            -- '': under the root
    floor_bps INTEGER NOT NULL DEFAULT 0,
    ceiling_bps INTEGER NOT NULL DEFAULT 0      -- 0: none
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta (key, value) VALUES ('generation', 1);
"""
TABLES = ("users", "jobs", "storage_nodes", "groups", "meta")


# A new store is made under this suffix and renamed to the state path once whole (see StateStore).
UNFINISHED_SUFFIX = ".creating"


class StoreUnusable(VNodeSyncError):
    """The state file is locked by another coordinator, empty, damaged or unreadable."""


def restore_hint(path: str) -> str:
    return (f"restore a backup with `vnode-coordinator --config CONFIG restore BACKUP` or, to start over "
            f"on purpose, `vnode-coordinator --config CONFIG init` (state file {path})")


@dataclass(frozen=True)
class UserRecord:
    name: str
    uid: int
    priority: int                 # set by the admin
    active_flag: bool             # set by vnodectl activate/deactivate
    running_jobs: int
    job_priority: int | None      # highest explicit priority among running jobs
    has_default_priority_job: bool  # a running job that uses the user's own priority
    reservation_bps: int = 0      # set by the admin (work-conserving policy); 0 = none
    limit_bps: int = 0            # 0 = none
    job_reservation_bps: int = 0  # highest reservation among running jobs
    job_limit_bps: int = 0        # while every running job asks for a ceiling, the highest of them; else 0
    group: str = ""               # the group it sits in (groups.py); "" = under the root

    @property
    def effective_reservation(self) -> int:
        return max(self.reservation_bps, self.job_reservation_bps if self.running_jobs else 0)

    @property
    def effective_limit(self) -> int:
        """The admin's ceiling, lowered by the jobs' own (0 = none). One VNode serves all of a user's jobs,
        so a job's ceiling cannot hold back another job that asked for none, and of several the highest holds."""
        limits = [v for v in (self.limit_bps, self.job_limit_bps if self.running_jobs else 0) if v]
        return min(limits, default=0)

    @property
    def active(self) -> bool:
        return self.active_flag or self.running_jobs > 0

    @property
    def effective_priority(self) -> int:
        """While jobs run, the highest priority any of them has; else the admin's value."""
        if not self.running_jobs:
            return self.priority
        candidates = [p for p in (self.job_priority,) if p is not None]
        if self.has_default_priority_job:
            candidates.append(self.priority)
        return max(candidates)


@dataclass(frozen=True)
class JobRecord:
    """One running job on one compute node, as its hook asked (the batch request syntax)."""

    job_id: str
    node: str
    user: str
    priority: int | None          # None: the job asked for none (its user's own priority applies)
    reservation_bps: int = 0      # 0 = none
    limit_bps: int = 0            # 0 = none


def _user_record(row) -> UserRecord:
    n, uid, p, a, jobs, jp, default_jobs, res, lim, job_res, job_lim, group = row
    return UserRecord(n, uid, p, bool(a), jobs, jp, bool(default_jobs), res, lim, job_res, job_lim, group)


@runtime_checkable
class Store(Protocol):
    """The coordinator's durable state as the rest of the coordinator uses it (the state-storage seam):
    `StateStore` keeps it in SQLite, `zookeeper_store.ZooKeeperStore` in ZooKeeper, for several
    coordinators of which one leads. Every change is whole or absent and returns the generation after
    it; a change that changes nothing keeps the generation."""

    path: str       # named in messages and logs
    created: bool   # this open made the store (and seeded its users)

    @property
    def rows_written(self) -> int:
        """Rows (znodes) this store has inserted, changed or deleted since it was opened."""

    def store_id(self) -> int: ...
    def generation(self) -> int: ...
    def users(self) -> list[UserRecord]: ...
    def user(self, name: str) -> UserRecord: ...
    def holder_of_uid(self, uid: int, other_than: str) -> str | None: ...
    def jobs_of(self, user: str) -> list[tuple[str, str]]: ...
    def running_jobs(self, of: Collection[tuple[str, str]] | None = None) -> list[JobRecord]: ...
    def add_user(self, name: str, uid: int, priority: int, active: bool) -> int: ...
    def set_priority(self, name: str, priority: int) -> tuple[int, int]: ...
    def set_reservation(self, name: str, bps: int) -> tuple[int, int]: ...
    def set_limit(self, name: str, bps: int) -> tuple[int, int]: ...
    def set_active(self, name: str, active: bool) -> tuple[int, bool]: ...
    def remove_user(self, name: str) -> int: ...
    def groups(self) -> list[GroupRecord]: ...
    def add_group(self, record: GroupRecord) -> int: ...
    def set_group(self, record: GroupRecord) -> tuple[int, GroupRecord]: ...
    def move_user(self, name: str, group: str) -> tuple[int, str]: ...
    def remove_group(self, name: str) -> tuple[int, GroupRecord]: ...

    def start_job(self, job_id: str, node: str, user: str, uid: int, priority: int | None,
                  new_user_priority: int, reservation_bps: int = 0, limit_bps: int = 0) -> int: ...

    def end_job(self, job_id: str, node: str) -> tuple[int, str | None]: ...
    def confirm_running_jobs(self, node: str, running: set[str]) -> list[str]: ...
    def expire_jobs(self, older_than: float) -> list[tuple[str, str]]: ...
    def storage_nodes(self) -> dict[str, str] | None: ...
    def seed_storage_nodes(self, specs: dict[str, str]) -> bool: ...
    def put_storage_node(self, node_id: str, spec: str, create: bool) -> tuple[int, str | None]: ...
    def remove_storage_node(self, node_id: str) -> tuple[int, str]: ...
    def touch(self) -> int: ...
    def close(self) -> None: ...


class UserSettings(ABC):
    """A user's settings (priority, reservation, limit, active flag), changed the same way in both
    stores: one field each, through the store's own `_update_user`."""

    @abstractmethod
    def _update_user(self, name: str, column: str, value) -> tuple[int, object]:
        """Set one field of user `name` in one change; returns (generation, old value). NotFound for an
        unknown user; an unchanged value changes nothing and keeps the generation."""

    def set_priority(self, name: str, priority: int) -> tuple[int, int]:
        """Returns (generation, old priority)."""
        return self._update_user(name, "priority", priority)

    def set_reservation(self, name: str, bps: int) -> tuple[int, int]:
        """Returns (generation, old reservation)."""
        return self._update_user(name, "reservation_bps", bps)

    def set_limit(self, name: str, bps: int) -> tuple[int, int]:
        """Returns (generation, old limit)."""
        return self._update_user(name, "limit_bps", bps)

    def set_active(self, name: str, active: bool) -> tuple[int, bool]:
        """Returns (generation, old flag). SQLite keeps the flag as 0 or 1 (a bool binds as one), ZooKeeper
        as JSON true or false."""
        generation, old = self._update_user(name, "active", bool(active))
        return generation, bool(old)


def lock_state_file(path: str):
    """An exclusive lock on `path`.lock held for the life of the returned file: one coordinator per state."""
    lock_path = path + ".lock"
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise StoreUnusable(f"state file {path} is in use by another coordinator (pid {holder}, lock "
                            f"{lock_path}); stop it first") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def store_failure(path: str, error: Exception) -> Unavailable:
    """A store that cannot write (disk full, I/O error, read-only) fails the call, changes nothing."""
    return Unavailable(f"state store {path} cannot record the change ({error}); nothing was changed")


class UserSeed(Protocol):
    """A user of the config file, made when a new store is made (coordinator.config.SeedUser)."""

    name: str
    uid: int
    priority: int
    active: bool


def _columns(db: sqlite3.Connection) -> dict[str, list[str]]:
    """Each vnode-sync table's columns, in order."""
    return {table: [row[1] for row in db.execute(f"PRAGMA table_info({table})")] for table in TABLES}


def _schema_columns() -> dict[str, list[str]]:
    db = sqlite3.connect(":memory:")
    try:
        db.executescript(SCHEMA)
        return _columns(db)
    finally:
        db.close()


COLUMNS = _schema_columns()   # a store of other columns is another version's: refused, never altered


def _build(db: sqlite3.Connection, seed_users: Iterable[UserSeed]) -> list[UserSeed]:
    """Schema, identity and the seed users in one transaction; returns the users seeded."""
    db.executescript("BEGIN IMMEDIATE;" + SCHEMA)
    db.execute("INSERT INTO meta (key, value) VALUES ('store_id', ?)", (secrets.randbits(62) | 1,))
    seeded = list(seed_users)
    db.executemany("INSERT INTO users (name, uid, priority, active) VALUES (?, ?, ?, ?)",
                   [(seed.name, seed.uid, seed.priority, int(seed.active)) for seed in seeded])
    # One generation per seeded user, as when they were seeded one by one.
    db.execute("UPDATE meta SET value = value + ? WHERE key = 'generation'", (len(seeded),))
    db.execute("COMMIT")
    return seeded


def _remove(*paths: str) -> bool:
    removed = False
    for path in paths:
        try:
            os.remove(path)
            removed = True
        except FileNotFoundError:
            pass
    return removed


class StateStore(UserSettings):
    """`create`: make a new store if the file does not exist (never over an existing one), with
    `seed_users` in it.

    A new store is made whole (schema, identity, seed users: one transaction) in `<path>.creating`,
    fsynced, and only then renamed to `path`: the state file's presence is its completion mark. A
    `.creating` file is a first start that did not finish (killed, power lost) and is made again;
    a state file that is empty, damaged or lacks a part was complete once, and is refused.
    """

    def __init__(self, path: str, create: bool = True, seed_users: Iterable[UserSeed] = ()):
        self.path = path
        self.created = False
        self._lock_fd = None
        self._lock = threading.RLock()
        try:
            if path == ":memory:":
                self._db = self._connect(path)
                self._log_seeded(_build(self._db, seed_users))
                self.created = True
                return
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            self._lock_fd = lock_state_file(path)
            unfinished = path + UNFINISHED_SUFFIX
            if _remove(unfinished, unfinished + "-journal", unfinished + "-wal", unfinished + "-shm"):
                log.warning("removed %s: a first start that did not finish; making the store again", unfinished)
            exists = os.path.exists(path)
            if exists and os.path.getsize(path) == 0:
                raise StoreUnusable(f"state file {path} is empty; {restore_hint(path)}")
            if not exists and not create:
                raise StoreUnusable(f"state file {path} does not exist; {restore_hint(path)}")
            if not exists:
                self._make(unfinished, seed_users)
                self.created = True
            self._db = self._connect(path)
            self._check()
        except sqlite3.Error as e:
            self._give_up()
            raise StoreUnusable(f"state file {path} is damaged or unreadable ({e}); {restore_hint(path)}") from e
        except BaseException:
            self._give_up()
            raise

    @staticmethod
    def _connect(path: str) -> sqlite3.Connection:
        db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA foreign_keys = ON")
        return db

    def _make(self, unfinished: str, seed_users: Iterable[UserSeed]) -> None:
        # A journal left by a store that is gone must not be replayed into the new one.
        _remove(self.path + "-wal", self.path + "-shm")
        try:
            db = sqlite3.connect(unfinished, isolation_level=None)
            try:
                # The unfinished file is thrown away after a crash: no journal on disk, one fsync at the end.
                db.execute("PRAGMA journal_mode = MEMORY")
                db.execute("PRAGMA synchronous = OFF")
                seeded = _build(db, seed_users)
                db.execute("PRAGMA journal_mode = WAL")
            finally:
                db.close()
            replace_durably(unfinished, self.path)
        except (sqlite3.Error, OSError) as e:
            _remove(unfinished, unfinished + "-journal", unfinished + "-wal", unfinished + "-shm")
            raise StoreUnusable(f"cannot make a new state file {self.path} ({e}); nothing was left in its place") \
                from e
        self._log_seeded(seeded)

    @staticmethod
    def _log_seeded(seeded: list[UserSeed]) -> None:
        for seed in seeded:
            log.info("user %s created from config (priority %d)", seed.name, seed.priority)

    def _check(self) -> None:
        """An existing store must be whole: integrity, tables, a generation and an identity."""
        result = self._db.execute("PRAGMA quick_check").fetchone()[0]
        if result != "ok":
            raise StoreUnusable(f"state file {self.path} is damaged ({result}); {restore_hint(self.path)}")
        tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables:
            raise StoreUnusable(f"state file {self.path} has no vnode-sync tables (empty); {restore_hint(self.path)}")
        if not set(TABLES) <= tables:
            raise StoreUnusable(f"state file {self.path} lacks tables {sorted(set(TABLES) - tables)}; "
                                f"{restore_hint(self.path)}")
        columns = _columns(self._db)
        for table, wanted in COLUMNS.items():
            if columns[table] != wanted:
                raise StoreUnusable(f"state file {self.path}: table {table} has columns {columns[table]}, this "
                                    f"coordinator's has {wanted}; {restore_hint(self.path)}")
        meta = dict(self._db.execute("SELECT key, value FROM meta").fetchall())
        for key in ("generation", "store_id"):
            if key not in meta:
                raise StoreUnusable(f"state file {self.path} has no {key}; {restore_hint(self.path)}")
        self._db.execute("PRAGMA journal_mode = WAL")

    def store_id(self) -> int:
        """This store's identity, made at initialise: a restored or re-made store is told apart."""
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()
        return row[0] if row else 0

    def backup(self, target: str) -> None:
        """A consistent copy of the store (SQLite online backup) at `target`."""
        with self._lock:
            dest = sqlite3.connect(target)
            try:
                self._db.backup(dest)
            finally:
                dest.close()

    def _give_up(self) -> None:
        """A start that failed keeps nothing open: not its connection, which would hold the state file
        (and its WAL) until the garbage collector found it, nor its lock."""
        db = getattr(self, "_db", None)
        if db is not None:
            db.close()
        self._unlock()

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def close(self) -> None:
        with self._lock:
            self._db.close()
        self._unlock()

    def _transaction(self):
        store = self

        class _Tx:
            def __enter__(self):
                store._lock.acquire()
                try:
                    store._db.execute("BEGIN IMMEDIATE")
                except sqlite3.Error as e:
                    store._lock.release()
                    raise store_failure(store.path, e) from e
                return store._db

            def __exit__(self, exc_type, exc, tb):
                try:
                    if exc_type:
                        if store._db.in_transaction:
                            store._db.execute("ROLLBACK")
                    else:
                        store._db.execute("COMMIT")
                except sqlite3.Error as e:
                    if store._db.in_transaction:
                        store._db.execute("ROLLBACK")
                    raise store_failure(store.path, e) from e
                finally:
                    store._lock.release()
                if exc_type is not None and issubclass(exc_type, sqlite3.Error):
                    raise store_failure(store.path, exc) from exc
                return False

        return _Tx()

    @staticmethod
    def _bump(db) -> int:
        db.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
        return db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0]

    @property
    def rows_written(self) -> int:
        """Rows this store has inserted, changed or deleted since it was opened (SQLite total_changes)."""
        with self._lock:
            return self._db.total_changes

    def generation(self) -> int:
        with self._lock:
            return self._db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0]

    # ---- users -------------------------------------------------------------

    _USERS = """
        SELECT u.name, u.uid, u.priority, u.active,
               COUNT(j.job_id), MAX(j.priority), SUM(j.job_id IS NOT NULL AND j.priority IS NULL),
               u.reservation_bps, u.limit_bps, COALESCE(MAX(j.reservation_bps), 0),
               CASE WHEN SUM(j.limit_bps = 0) = 0 THEN COALESCE(MAX(j.limit_bps), 0) ELSE 0 END,
               u.group_name
        FROM users u LEFT JOIN jobs j ON j.user = u.name {where}
        GROUP BY u.name ORDER BY u.name"""

    def users(self) -> list[UserRecord]:
        with self._lock:
            rows = self._db.execute(self._USERS.format(where="")).fetchall()
        return [_user_record(row) for row in rows]

    def user(self, name: str) -> UserRecord:
        with self._lock:
            row = self._db.execute(self._USERS.format(where="WHERE u.name = ?"), (name,)).fetchone()
        if row is None:
            raise NotFound(f"unknown user {name!r}")
        return _user_record(row)

    def holder_of_uid(self, uid: int, other_than: str) -> str | None:
        """The user other than `other_than` that holds `uid`, if any."""
        with self._lock:
            row = self._db.execute("SELECT name FROM users WHERE uid = ? AND name != ? LIMIT 1",
                                   (uid, other_than)).fetchone()
        return row[0] if row else None

    def add_user(self, name: str, uid: int, priority: int, active: bool) -> int:
        with self._transaction() as db:
            if db.execute("SELECT 1 FROM users WHERE name = ?", (name,)).fetchone():
                raise InvalidArgument(f"user {name!r} exists already; use set-priority to change it")
            db.execute("INSERT INTO users (name, uid, priority, active) VALUES (?, ?, ?, ?)",
                       (name, uid, priority, int(active)))
            return self._bump(db)

    def _update_user(self, name: str, column: str, value) -> tuple[int, object]:
        with self._transaction() as db:
            row = db.execute(f"SELECT {column} FROM users WHERE name = ?", (name,)).fetchone()
            if row is None:
                raise NotFound(f"unknown user {name!r}")
            if row[0] == value:
                return self.generation(), row[0]
            db.execute(f"UPDATE users SET {column} = ? WHERE name = ?", (value, name))
            return self._bump(db), row[0]

    def remove_user(self, name: str) -> int:
        with self._transaction() as db:
            if db.execute("DELETE FROM users WHERE name = ?", (name,)).rowcount == 0:
                raise NotFound(f"unknown user {name!r}")
            return self._bump(db)

    # ---- groups ------------------------------------------------------------
    # Each change reads the groups and checks the rules (groups.py) inside its own transaction.

    @staticmethod
    def _groups_in(db) -> dict[str, GroupRecord]:
        return {row[0]: GroupRecord(*row) for row in
                db.execute("SELECT name, weight, parent, floor_bps, ceiling_bps FROM groups ORDER BY name")}

    def groups(self) -> list[GroupRecord]:
        with self._lock:
            return list(self._groups_in(self._db).values())

    def add_group(self, record: GroupRecord) -> int:
        with self._transaction() as db:
            check_new(self._groups_in(db), record)
            db.execute("INSERT INTO groups (name, weight, parent, floor_bps, ceiling_bps) VALUES (?, ?, ?, ?, ?)",
                       (record.name, record.weight, record.parent, record.floor_bps, record.ceiling_bps))
            return self._bump(db)

    def set_group(self, record: GroupRecord) -> tuple[int, GroupRecord]:
        """Replace the group's settings (the caller fills in those not changed); returns (generation, old)."""
        with self._transaction() as db:
            groups = self._groups_in(db)
            old = groups.get(record.name)
            if old is None:
                raise NotFound(f"unknown group {record.name!r}")
            if old == record:
                return self.generation(), old
            if record.parent != old.parent:
                check_parent(groups, record.name, record.parent)
            db.execute("UPDATE groups SET weight = ?, parent = ?, floor_bps = ?, ceiling_bps = ? WHERE name = ?",
                       (record.weight, record.parent, record.floor_bps, record.ceiling_bps, record.name))
            return self._bump(db), old

    def move_user(self, name: str, group: str) -> tuple[int, str]:
        """Put user `name` in `group` ("": under the root); returns (generation, old group)."""
        with self._transaction() as db:
            row = db.execute("SELECT group_name FROM users WHERE name = ?", (name,)).fetchone()
            if row is None:
                raise NotFound(f"unknown user {name!r}")
            check_member(self._groups_in(db), group)
            if row[0] == group:
                return self.generation(), row[0]
            db.execute("UPDATE users SET group_name = ? WHERE name = ?", (group, name))
            return self._bump(db), row[0]

    def remove_group(self, name: str) -> tuple[int, GroupRecord]:
        """Only an empty group (no users, no groups under it); returns (generation, the removed group)."""
        with self._transaction() as db:
            groups = self._groups_in(db)
            users_in = dict(db.execute("SELECT name, group_name FROM users WHERE group_name = ?", (name,)).fetchall())
            check_removable(groups, users_in, name)
            db.execute("DELETE FROM groups WHERE name = ?", (name,))
            return self._bump(db), groups[name]

    # ---- jobs --------------------------------------------------------------

    def start_job(self, job_id: str, node: str, user: str, uid: int, priority: int | None,
                  new_user_priority: int, reservation_bps: int = 0, limit_bps: int = 0) -> int:
        """Record a running job (idempotent per job and node); creates the user if unknown."""
        now = time.time()
        with self._transaction() as db:
            if not db.execute("SELECT 1 FROM users WHERE name = ?", (user,)).fetchone():
                db.execute("INSERT INTO users (name, uid, priority, active) VALUES (?, ?, ?, 0)",
                           (user, uid, new_user_priority))
            existing = db.execute("SELECT user, priority, reservation_bps, limit_bps FROM jobs "
                                  "WHERE job_id = ? AND node = ?", (job_id, node)).fetchone()
            if existing is not None:
                if existing[0] != user:
                    raise InvalidArgument(f"job {job_id!r} on {node!r} belongs to {existing[0]!r}, not {user!r}")
                db.execute("UPDATE jobs SET confirmed_at = ? WHERE job_id = ? AND node = ?", (now, job_id, node))
                if tuple(existing[1:]) == (priority, reservation_bps, limit_bps):
                    return self.generation()
                db.execute("UPDATE jobs SET priority = ?, reservation_bps = ?, limit_bps = ? WHERE job_id = ? AND node = ?",
                           (priority, reservation_bps, limit_bps, job_id, node))
            else:
                db.execute("INSERT INTO jobs (job_id, node, user, priority, started_at, confirmed_at, reservation_bps, "
                           "limit_bps) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                           (job_id, node, user, priority, now, now, reservation_bps, limit_bps))
            return self._bump(db)

    def end_job(self, job_id: str, node: str) -> tuple[int, str | None]:
        """Forget a job on a node (all nodes if node is empty); ending twice is not an error."""
        with self._transaction() as db:
            where, args = ("job_id = ?", (job_id,)) if not node else ("job_id = ? AND node = ?", (job_id, node))
            row = db.execute(f"SELECT user FROM jobs WHERE {where}", args).fetchone()
            if row is None:
                return self.generation(), None
            db.execute(f"DELETE FROM jobs WHERE {where}", args)
            return self._bump(db), row[0]

    def confirm_running_jobs(self, node: str, running: set[str]) -> list[str]:
        """Reconcile one node's jobs with the batch system's list; returns the job ids dropped."""
        now = time.time()
        with self._transaction() as db:
            rows = db.execute("SELECT job_id FROM jobs WHERE node = ? OR ? = ''", (node, node)).fetchall()
            dropped = [j for (j,) in rows if j not in running]
            for job_id in running:
                db.execute("UPDATE jobs SET confirmed_at = ? WHERE job_id = ?", (now, job_id))
            for job_id in dropped:
                db.execute("DELETE FROM jobs WHERE job_id = ? AND (node = ? OR ? = '')", (job_id, node, node))
            if dropped:
                self._bump(db)
            return dropped

    def expire_jobs(self, older_than: float) -> list[tuple[str, str]]:
        with self._transaction() as db:
            rows = db.execute("SELECT job_id, node FROM jobs WHERE confirmed_at < ?", (older_than,)).fetchall()
            if rows:
                db.execute("DELETE FROM jobs WHERE confirmed_at < ?", (older_than,))
                self._bump(db)
            return rows

    def jobs_of(self, user: str) -> list[tuple[str, str]]:
        with self._lock:
            return self._db.execute("SELECT job_id, node FROM jobs WHERE user = ? ORDER BY job_id, node",
                                    (user,)).fetchall()

    def running_jobs(self, of: Collection[tuple[str, str]] | None = None) -> list[JobRecord]:
        """Every running job on every node, by job id and node; `of`: only those of these (user, job id),
        each found by the primary key (the cost of a snapshot grows with them, not with every job)."""
        select = "SELECT job_id, node, user, priority, reservation_bps, limit_bps FROM jobs"
        with self._lock:
            if of is None:
                rows = self._db.execute(f"{select} ORDER BY job_id, node").fetchall()
            else:
                rows = [row for user, job_id in sorted(of, key=lambda key: (key[1], key[0]))
                        for row in self._db.execute(f"{select} WHERE job_id = ? AND user = ? ORDER BY node",
                                                    (job_id, user))]
        return [JobRecord(*row) for row in rows]

    # ---- storage nodes -----------------------------------------------------

    def storage_nodes(self) -> dict[str, str] | None:
        """node id -> its spec (JSON); None until the nodes were first seeded."""
        with self._lock:
            if self._db.execute("SELECT 1 FROM meta WHERE key = 'nodes_seeded'").fetchone() is None:
                return None
            return dict(self._db.execute("SELECT node_id, spec FROM storage_nodes ORDER BY rowid").fetchall())

    def seed_storage_nodes(self, specs: dict[str, str]) -> bool:
        """The config file's nodes, once in the store's life (with the mark, in one transaction); False
        if they were seeded before: the store's nodes win from then on."""
        with self._transaction() as db:
            if db.execute("SELECT 1 FROM meta WHERE key = 'nodes_seeded'").fetchone() is not None:
                return False
            db.executemany("INSERT INTO storage_nodes (node_id, spec) VALUES (?, ?)", list(specs.items()))
            db.execute("INSERT INTO meta (key, value) VALUES ('nodes_seeded', 1)")
            return True

    def put_storage_node(self, node_id: str, spec: str, create: bool) -> tuple[int, str | None]:
        """Add (`create`) or replace a node's spec; returns (generation, old spec or None)."""
        with self._transaction() as db:
            row = db.execute("SELECT spec FROM storage_nodes WHERE node_id = ?", (node_id,)).fetchone()
            old = row[0] if row else None
            if create and old is not None:
                raise InvalidArgument(f"storage node {node_id!r} exists already; use `vnodectl nodes set` to change it")
            if not create and old is None:
                raise NotFound(f"unknown storage node {node_id!r}")
            if old == spec:
                return self.generation(), old
            if old is None:
                db.execute("INSERT INTO storage_nodes (node_id, spec) VALUES (?, ?)", (node_id, spec))
            else:   # in place: the nodes keep their order
                db.execute("UPDATE storage_nodes SET spec = ? WHERE node_id = ?", (spec, node_id))
            return self._bump(db), old

    def remove_storage_node(self, node_id: str) -> tuple[int, str]:
        """Returns (generation, the removed spec)."""
        with self._transaction() as db:
            row = db.execute("SELECT spec FROM storage_nodes WHERE node_id = ?", (node_id,)).fetchone()
            if row is None:
                raise NotFound(f"unknown storage node {node_id!r}")
            db.execute("DELETE FROM storage_nodes WHERE node_id = ?", (node_id,))
            return self._bump(db), row[0]

    def touch(self) -> int:
        """Bump the generation without a state change (e.g. a node registered)."""
        with self._transaction() as db:
            return self._bump(db)
