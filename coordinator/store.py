"""The coordinator's durable state in SQLite: users, jobs, the generation counter.

Every change runs in one transaction and bumps the generation in the same
transaction, so a crash leaves either the old state or the new one, never half.
"""

import os
import sqlite3
import threading
import time
from dataclasses import dataclass

from vnode_sync.errors import InvalidArgument, NotFound

SCHEMA = """
CREATE TABLE IF NOT EXISTS users (
    name TEXT PRIMARY KEY,
    uid INTEGER NOT NULL,
    priority INTEGER NOT NULL CHECK (priority BETWEEN 1 AND 100),
    active INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT NOT NULL,
    node TEXT NOT NULL,
    user TEXT NOT NULL REFERENCES users(name) ON DELETE CASCADE,
    priority INTEGER,            -- NULL: the user's own priority applies
    started_at REAL NOT NULL,
    confirmed_at REAL NOT NULL,
    PRIMARY KEY (job_id, node)
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta (key, value) VALUES ('generation', 1);
"""


@dataclass(frozen=True)
class UserRecord:
    name: str
    uid: int
    priority: int                 # set by the admin
    active_flag: bool             # set by vnodectl activate/deactivate
    running_jobs: int
    job_priority: int | None      # highest explicit priority among running jobs
    has_default_priority_job: bool  # a running job that uses the user's own priority

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


class StateStore:
    def __init__(self, path: str):
        if path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA foreign_keys = ON")
        self._db.execute("PRAGMA journal_mode = WAL")
        self._lock = threading.RLock()
        with self._lock:
            self._db.executescript(SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _transaction(self):
        store = self

        class _Tx:
            def __enter__(self):
                store._lock.acquire()
                store._db.execute("BEGIN IMMEDIATE")
                return store._db

            def __exit__(self, exc_type, exc, tb):
                try:
                    store._db.execute("ROLLBACK" if exc_type else "COMMIT")
                finally:
                    store._lock.release()
                return False

        return _Tx()

    @staticmethod
    def _bump(db) -> int:
        db.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
        return db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0]

    def generation(self) -> int:
        with self._lock:
            return self._db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0]

    # ---- users -------------------------------------------------------------

    def users(self) -> list[UserRecord]:
        with self._lock:
            rows = self._db.execute("""
                SELECT u.name, u.uid, u.priority, u.active,
                       COUNT(j.job_id), MAX(j.priority), SUM(j.job_id IS NOT NULL AND j.priority IS NULL)
                FROM users u LEFT JOIN jobs j ON j.user = u.name
                GROUP BY u.name ORDER BY u.name""").fetchall()
        return [UserRecord(n, uid, p, bool(a), jobs, jp, bool(default_jobs))
                for n, uid, p, a, jobs, jp, default_jobs in rows]

    def user(self, name: str) -> UserRecord:
        for record in self.users():
            if record.name == name:
                return record
        raise NotFound(f"unknown user {name!r}")

    def add_user(self, name: str, uid: int, priority: int, active: bool) -> int:
        with self._transaction() as db:
            if db.execute("SELECT 1 FROM users WHERE name = ?", (name,)).fetchone():
                raise InvalidArgument(f"user {name!r} exists already; use set-priority to change it")
            db.execute("INSERT INTO users (name, uid, priority, active) VALUES (?, ?, ?, ?)",
                       (name, uid, priority, int(active)))
            return self._bump(db)

    def seed_user(self, name: str, uid: int, priority: int, active: bool) -> bool:
        """Create a user from the config file unless it exists (the database wins)."""
        with self._transaction() as db:
            if db.execute("SELECT 1 FROM users WHERE name = ?", (name,)).fetchone():
                return False
            db.execute("INSERT INTO users (name, uid, priority, active) VALUES (?, ?, ?, ?)",
                       (name, uid, priority, int(active)))
            self._bump(db)
            return True

    def _update_user(self, name: str, column: str, value) -> tuple[int, object]:
        with self._transaction() as db:
            row = db.execute(f"SELECT {column} FROM users WHERE name = ?", (name,)).fetchone()
            if row is None:
                raise NotFound(f"unknown user {name!r}")
            if row[0] == value:
                return self.generation(), row[0]
            db.execute(f"UPDATE users SET {column} = ? WHERE name = ?", (value, name))
            return self._bump(db), row[0]

    def set_priority(self, name: str, priority: int) -> tuple[int, int]:
        """Returns (generation, old priority)."""
        return self._update_user(name, "priority", priority)

    def set_active(self, name: str, active: bool) -> tuple[int, bool]:
        generation, old = self._update_user(name, "active", int(active))
        return generation, bool(old)

    def remove_user(self, name: str) -> int:
        with self._transaction() as db:
            if db.execute("DELETE FROM users WHERE name = ?", (name,)).rowcount == 0:
                raise NotFound(f"unknown user {name!r}")
            return self._bump(db)

    # ---- jobs --------------------------------------------------------------

    def start_job(self, job_id: str, node: str, user: str, uid: int, priority: int | None,
                  new_user_priority: int) -> int:
        """Record a running job (idempotent per job and node); creates the user if unknown."""
        now = time.time()
        with self._transaction() as db:
            if not db.execute("SELECT 1 FROM users WHERE name = ?", (user,)).fetchone():
                db.execute("INSERT INTO users (name, uid, priority, active) VALUES (?, ?, ?, 0)",
                           (user, uid, new_user_priority))
            existing = db.execute("SELECT user, priority FROM jobs WHERE job_id = ? AND node = ?",
                                  (job_id, node)).fetchone()
            if existing is not None:
                if existing[0] != user:
                    raise InvalidArgument(f"job {job_id!r} on {node!r} belongs to {existing[0]!r}, not {user!r}")
                db.execute("UPDATE jobs SET confirmed_at = ? WHERE job_id = ? AND node = ?", (now, job_id, node))
                if existing[1] == priority:
                    return self.generation()
                db.execute("UPDATE jobs SET priority = ? WHERE job_id = ? AND node = ?", (priority, job_id, node))
            else:
                db.execute("INSERT INTO jobs VALUES (?, ?, ?, ?, ?, ?)", (job_id, node, user, priority, now, now))
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

    def touch(self) -> int:
        """Bump the generation without a state change (e.g. a node registered)."""
        with self._transaction() as db:
            return self._bump(db)
