"""``SQLiteStateStore``: history in an SQLite database, shared by the processes of one machine.

The standard library's ``sqlite3``, in WAL mode: readers never wait for the writer, and each
append is one ``BEGIN IMMEDIATE`` transaction, which takes the database's write lock before
it reads the branch's last sequence, so no other process can append between that check and
the insert. (A plain ``BEGIN`` takes the lock only at the first write: two processes that
both read first would then fail with "database is locked" instead of waiting their turn.)
The operations are ``_sql``'s, which the PostgreSQL store shares.

Opening reads nothing of the history: one query reads the schema version (the tables are
created, and WAL mode set, when there is none), whatever the history's size.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nodestep._errors import StateStoreError
from nodestep.store import _checks, _sql, _sql_leases, _sql_threads
from nodestep.store._contract import BranchRecord, Lease, Record, StateStore
from nodestep.store._threads import ThreadPage, ThreadStatus

__all__ = ["SQLiteStateStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS nodestep_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS nodestep_events (
    thread TEXT NOT NULL, branch TEXT NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL,
    kind TEXT NOT NULL, request TEXT, line BLOB NOT NULL, ts REAL NOT NULL, status TEXT,
    PRIMARY KEY (thread, branch, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS nodestep_event_ids ON nodestep_events (thread, id);
CREATE INDEX IF NOT EXISTS nodestep_checkpoints ON nodestep_events (thread, branch, seq)
    WHERE kind = 'checkpoint';
CREATE INDEX IF NOT EXISTS nodestep_requests ON nodestep_events (thread, branch, request)
    WHERE request IS NOT NULL;
CREATE INDEX IF NOT EXISTS nodestep_statuses ON nodestep_events (thread, branch, seq)
    WHERE status IS NOT NULL;
CREATE TABLE IF NOT EXISTS nodestep_branches (
    n INTEGER PRIMARY KEY AUTOINCREMENT, thread TEXT NOT NULL, branch TEXT NOT NULL,
    parent TEXT NOT NULL, from_event TEXT NOT NULL, from_seq INTEGER NOT NULL,
    ts REAL NOT NULL, UNIQUE (thread, branch)
);
CREATE TABLE IF NOT EXISTS nodestep_leases (
    thread TEXT NOT NULL, branch TEXT NOT NULL, id TEXT NOT NULL, holder TEXT NOT NULL,
    expires REAL NOT NULL, ttl REAL NOT NULL, pid INTEGER NOT NULL, host TEXT NOT NULL,
    pid_ns INTEGER NOT NULL, PRIMARY KEY (thread, branch)
);
"""


class SQLiteStateStore(StateStore):
    """Keep every thread's history in an SQLite database file.

    Safe for many processes and threads of one machine at once (not on a network file
    system, where SQLite's locks do not hold). Each append is one transaction: all of its
    records or none, even if the process is killed in the middle of it. Records are kept
    as the same JSON lines, with the same checksums, as ``FilesystemStateStore`` writes.

    Args:
        path: The database file; created, with its directory, if missing.
        synchronous: SQLite's ``synchronous`` setting. ``"NORMAL"`` (the default, as the
            file store's default writes without fsync): an append that returned survives
            a crash or ``kill -9`` of the process, and the database is never damaged, but a
            power cut may lose the last appends. ``"FULL"`` syncs the log to disk at each
            commit, so an append that returned survives a power cut too; it costs a disk
            flush per append (``FilesystemStateStore(fsync=True)`` is its like).
        timeout: Seconds a write waits for another process's write transaction.

    Raises:
        StateStoreError: The file cannot be opened as a database, or holds tables of a
            newer nodestep.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, synchronous: str = "NORMAL", timeout: float = 30.0
    ) -> None:
        if synchronous.upper() not in ("FULL", "NORMAL", "EXTRA", "OFF"):
            raise ValueError(
                f"synchronous={synchronous!r} is not an SQLite synchronous setting; "
                f"use 'NORMAL' (the default) or 'FULL'"
            )
        self.path = Path(os.path.abspath(path))
        self.synchronous = synchronous.upper()
        self.timeout = timeout
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        self._connect()

    def __repr__(self) -> str:
        return f"SQLiteStateStore({str(self.path)!r})"

    def _connect(self) -> sqlite3.Connection:
        try:
            if not self.path.parent.is_dir():  # a stat, where mkdir would cost an error
                self.path.parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: no implicit transactions; each write says BEGIN IMMEDIATE.
            conn = sqlite3.connect(
                self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False
            )
        except (OSError, sqlite3.Error) as e:
            raise self._error("open", e) from e
        try:
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            row = _schema_version(conn)
            if row is None:  # a new database: WAL and the tables, once
                conn.execute("PRAGMA journal_mode=WAL")
                # Each statement is idempotent: two processes may create them at once.
                conn.executescript(_SCHEMA)
                conn.execute(
                    "INSERT OR IGNORE INTO nodestep_meta VALUES ('schema', ?)",
                    (str(_sql.SCHEMA_VERSION),),
                )
                row = _schema_version(conn)
        except sqlite3.Error as e:
            conn.close()
            raise self._error("open", e) from e
        if row is not None and int(row[0]) > _sql.SCHEMA_VERSION:
            conn.close()
            raise StateStoreError(
                f"{self.path}: its tables are of schema version {row[0]}, written by a newer "
                f"nodestep; this one reads version {_sql.SCHEMA_VERSION}. Upgrade nodestep.",
                path=str(self.path),
            )
        self._conn, self._pid = conn, os.getpid()
        return conn

    def _error(self, action: str, error: Exception) -> StateStoreError:
        return StateStoreError(
            f"Cannot {action} the SQLite history {self.path}: {error}. Check that the path is "
            f"an SQLite database nodestep may read and write, on a local disk.",
            path=str(self.path),
        )

    def _run(self, op: _sql.Op, *, write: bool = False) -> Any:
        """Run an operation; a write in one ``BEGIN IMMEDIATE`` transaction."""
        with self._lock:
            conn = self._conn
            if conn is None or self._pid != os.getpid():
                # A connection must not cross a fork: the child opens its own.
                conn = self._connect()
            try:
                if write:
                    conn.execute("BEGIN IMMEDIATE")
                try:
                    result = _drive(conn, op)
                except BaseException:
                    if write:
                        conn.execute("ROLLBACK")
                    raise
                if write:
                    conn.execute("COMMIT")
                return result
            except sqlite3.Error as e:
                raise self._error("write to" if write else "read", e) from e

    # -- the StateStore methods ---------------------------------------------------------

    async def append(
        self, thread_id: str, branch_id: str, records: Sequence[Record], *, after: int
    ) -> None:
        """Append ``records`` to a branch, atomically, if its last sequence is still ``after``.

        Raises:
            ThreadConflictError: The branch's last sequence is not ``after``; nothing stored.
            StateStoreError: A record is not a valid event of this branch, or the database
                cannot be written; nothing stored.
        """
        lines = _checks.encode_events(thread_id, branch_id, records, after + 1, path=None)
        self._run(_sql.append(thread_id, branch_id, records, lines, after), write=True)

    async def append_leased(self, lease: Lease, records: Sequence[Record], *, after: int) -> Lease:
        """Append as the lease's holder: the lease is checked in the append's transaction.

        Raises:
            ThreadBusyError: the lease was lost; nothing stored.
            ThreadConflictError: the branch's last sequence is not ``after``; nothing stored.
        """
        t, b = lease.thread_id, lease.branch_id
        lines = _checks.encode_events(t, b, records, after + 1)
        found: Lease = self._run(_sql.append(t, b, records, lines, after, lease), write=True)
        return found

    async def read(
        self, thread_id: str, branch_id: str, *, start: int = 1, stop: int | None = None
    ) -> list[Record]:
        """Return the branch's records with ``start <= seq <= stop`` (``None``: to the end)."""
        lines = self._run(_sql.read(thread_id, branch_id, start, stop))
        return _sql.decode(lines, str(self.path), thread_id, branch_id)

    async def read_tail(
        self, thread_id: str, branch_id: str, *, at: int | None = None
    ) -> list[Record]:
        """Return the records from the last checkpoint at or before ``at`` through ``at``."""
        lines = self._run(_sql.read_tail(thread_id, branch_id, at))
        return _sql.decode(lines, str(self.path), thread_id, branch_id)

    async def last_sequence(self, thread_id: str, branch_id: str) -> int:
        """Return the sequence number of the branch's last record, or 0 if it has none."""
        found: int = self._run(_sql.last_sequence(thread_id, branch_id))
        return found

    async def last_checkpoint(
        self, thread_id: str, branch_id: str, *, at_or_before: int | None = None
    ) -> int | None:
        """Return the sequence number of the branch's last ``checkpoint`` record."""
        found: int | None = self._run(_sql.last_checkpoint(thread_id, branch_id, at_or_before))
        return found

    async def locate(self, thread_id: str, event_id: str) -> tuple[str, int] | None:
        """Return ``(branch_id, seq)`` of the record with id ``event_id`` in the thread."""
        found: tuple[str, int] | None = self._run(_sql.locate(thread_id, event_id))
        return found

    async def create_branch(self, branch: BranchRecord, first: Sequence[Record]) -> bool:
        """Create a branch and append its first records, atomically.

        Returns:
            ``False``, storing nothing, when the thread already has a branch with that id.

        Raises:
            StateStoreError: The branch record or a first record is invalid; nothing stored.
        """
        lines = _checks.encode_branch(branch, first)[1:]
        made: bool = self._run(_sql.create_branch(branch, first, lines), write=True)
        return made

    async def list_branches(self, thread_id: str) -> list[BranchRecord]:
        """Return the thread's forked branches, oldest first."""
        found: list[BranchRecord] = self._run(_sql.list_branches(thread_id))
        return found

    async def find_request(self, thread_id: str, branch_id: str, key: str) -> int | None:
        """Return the ``seq`` of the branch's ``run_started`` record with request key ``key``."""
        found: int | None = self._run(_sql.find_request(thread_id, branch_id, key))
        return found

    async def acquire_lease(
        self, thread_id: str, branch_id: str, holder: str, *, ttl: float
    ) -> Lease:
        """Take the branch for ``holder`` for ``ttl`` seconds, for every process of the database.

        Raises:
            ThreadBusyError: another holder's lease has not expired; nothing changed.
        """
        lease: Lease = self._run(_sql_leases.acquire(thread_id, branch_id, holder, ttl), write=True)
        return lease

    async def renew_lease(self, lease: Lease) -> Lease:
        """Extend ``lease`` by its ttl from now, and return the renewed lease.

        Raises:
            ThreadBusyError: the lease is not the branch's current one any more (``lost``).
        """
        renewed: Lease = self._run(_sql.renew(lease), write=True)
        return renewed

    async def release_lease(self, lease: Lease) -> None:
        """Give the branch back, if ``lease`` still holds it; else do nothing."""
        self._run(_sql_leases.release(lease), write=True)

    # -- thread management (the rules: nodestep.store.threads) ---------------------------

    async def list_threads(
        self,
        *,
        status: ThreadStatus | Sequence[ThreadStatus] | None = None,
        active_after: float | None = None,
        active_before: float | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ThreadPage:
        """Return one page of the store's threads, most recent activity first.

        Raises:
            GraphConfigError: An argument is out of range, or ``cursor`` is not a cursor.
        """
        op = _sql_threads.list_threads(status, active_after, active_before, limit, cursor)
        page: ThreadPage = self._run(op)
        return page

    async def delete_thread(self, thread_id: str) -> bool:
        """Delete every record and branch of a thread; return ``False`` if it had none."""
        deleted: bool = self._run(_sql_threads.delete_thread(thread_id), write=True)
        return deleted

    async def prune(
        self,
        thread_id: str | None = None,
        *,
        keep_last: int | None = None,
        older_than: float | None = None,
    ) -> int:
        """Drop old records of a thread (or of every thread); return how many were dropped.

        Each branch keeps its records from a checkpoint on, so it still loads (see
        ``nodestep.store.threads.prune_cut``).

        Raises:
            GraphConfigError: Neither rule is given, or one is out of range.
        """
        op = _sql_threads.prune(thread_id, keep_last, older_than)
        dropped: int = self._run(op, write=True)
        return dropped

    async def aclose(self) -> None:
        """Close the database connection; a later call opens it again."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None


def _schema_version(conn: sqlite3.Connection) -> tuple[str] | None:
    """Return the database's schema version row, or None when it has no nodestep tables."""
    try:
        row: tuple[str] | None = conn.execute(
            "SELECT value FROM nodestep_meta WHERE key = 'schema'"
        ).fetchone()
    except sqlite3.OperationalError as e:
        if "no such table" not in str(e):
            raise
        return None
    return row


def _drive(conn: sqlite3.Connection, op: _sql.Op) -> Any:
    """Run ``op``'s statements on ``conn`` and return its result."""
    rows: Any = None  # a generator's first send must be None
    try:
        while True:
            stmt = op.send(rows)
            if isinstance(stmt, _sql.Stmt):
                rows = conn.execute(stmt.sql, stmt.params).fetchall()
            elif isinstance(stmt, _sql.Many):
                conn.executemany(stmt.sql, stmt.rows)
                rows = []
            else:
                rows = []  # Lock: BEGIN IMMEDIATE already holds the database
    except StopIteration as done:
        return done.value
