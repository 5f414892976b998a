"""``SQLiteStateStore``: history in an SQLite database, shared by the processes of one machine.

The standard library's ``sqlite3``, in WAL mode: readers never wait for the writer, and each
append is one ``BEGIN IMMEDIATE`` transaction, which takes the database's write lock before
it reads the branch's last sequence, so no other process can append between that check and
the insert. (A plain ``BEGIN`` takes the lock only at the first write: two processes that
both read first would then fail with "database is locked" instead of waiting their turn.)
The operations are ``ops``', and the methods ``SQLStateStore``'s, which the PostgreSQL
store shares.

Opening reads nothing of the history: one query reads the schema version (the tables are
created, and WAL mode set, when there is none), whatever the history's size. The log is
copied into the database file by ``checkpoints``, in a thread, not by the commits.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nodestep._errors import StateStoreError
from nodestep.store._sql import locked_ops, ops
from nodestep.store._sql.checkpoints import FAR, Checkpointer
from nodestep.store._sql.store import READS, SQLStateStore

__all__ = ["SQLiteStateStore"]

# The layout of a new file. The events are a rowid table: its rows, about 800 bytes in an
# agent's turn, are appended at the right end of its tree, which only the key's index
# (small entries) reaches in the middle. As a WITHOUT ROWID table, whose inner pages hold
# whole rows, the tree was about four entries wide and six deep, and an insert in a
# thread's range split pages up the tree: a W10 turn made 53.6 page writes (``pwrite``)
# then and 41.6 now, about 12% of its time (docs/performance.md). A lease row is small
# and found by its key alone, so its table is WITHOUT ROWID: one tree, not a table and its
# key's index. Files made before keep the layout they were made with: the statements are
# the same for both, so nodestep reads and writes either, and an older nodestep this one's.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS nodestep_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS nodestep_events (
    thread TEXT NOT NULL, branch TEXT NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL,
    kind TEXT NOT NULL, request TEXT, line BLOB NOT NULL, ts REAL NOT NULL, status TEXT,
    PRIMARY KEY (thread, branch, seq)
);
CREATE INDEX IF NOT EXISTS nodestep_event_ids ON nodestep_events (thread, id);
CREATE INDEX IF NOT EXISTS nodestep_checkpoints ON nodestep_events (thread, branch, seq)
    WHERE kind = 'checkpoint';
CREATE INDEX IF NOT EXISTS nodestep_requests ON nodestep_events (thread, branch, request)
    WHERE request IS NOT NULL;
CREATE TABLE IF NOT EXISTS nodestep_branches (
    n INTEGER PRIMARY KEY AUTOINCREMENT, thread TEXT NOT NULL, branch TEXT NOT NULL,
    parent TEXT NOT NULL, from_event TEXT NOT NULL, from_seq INTEGER NOT NULL,
    ts REAL NOT NULL, UNIQUE (thread, branch)
);
CREATE TABLE IF NOT EXISTS nodestep_leases (
    thread TEXT NOT NULL, branch TEXT NOT NULL, id TEXT NOT NULL, holder TEXT NOT NULL,
    expires REAL NOT NULL, ttl REAL NOT NULL, pid INTEGER NOT NULL, host TEXT NOT NULL,
    pid_ns INTEGER NOT NULL, PRIMARY KEY (thread, branch)
) WITHOUT ROWID;
"""


class SQLiteStateStore(SQLStateStore):
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
            power cut may lose the last appends. ``"FULL"`` (or ``"EXTRA"``) syncs the log
            to disk, so what a call stored survives a power cut too, as
            ``FilesystemStateStore(fsync=True)`` does: every append is flushed before it
            returns, except a run's records before its last, which its last append flushes
            with it (one flush a run, not one a superstep); a power cut can lose a running
            call's records after the last flush, never one of a call that returned.
        timeout: Seconds a write waits for another process's write transaction.
        check: Check the database when it opens (``check_integrity()``), and refuse a
            damaged one. Off by default: opening then reads the whole file, which
            costs time in proportion to its size (35 ms for 100,000 events, a 32 MB
            file, in the page cache; more from the disk), against 0.4 ms for an open
            without it, while a damaged page is still found when a read meets it: every
            read checks each record's checksum and that the records it returns are
            numbered without gaps.

    Raises:
        StateStoreError: The file cannot be opened as a database, holds tables of a
            newer nodestep, or (with ``check=True``) is damaged.
    """

    _locked_writes = True  # every write is one BEGIN IMMEDIATE transaction (``_run``)

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: str = "NORMAL",
        timeout: float = 30.0,
        check: bool = False,
    ) -> None:
        if synchronous.upper() not in ("FULL", "NORMAL", "EXTRA", "OFF"):
            raise ValueError(
                f"synchronous={synchronous!r} is not an SQLite synchronous setting; "
                f"use 'NORMAL' (the default) or 'FULL'"
            )
        self.path = Path(os.path.abspath(path))
        super().__init__(str(self.path))
        self.synchronous = synchronous.upper()
        # What a write that need not be flushed commits under (NORMAL leaves OFF as it is).
        self._unflushed = "OFF" if self.synchronous == "OFF" else "NORMAL"
        self._flushes = self._unflushed != self.synchronous
        self._mode = self.synchronous  # the open connection's setting
        self.timeout = timeout
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._cursor: sqlite3.Cursor | None = None  # the connection's one cursor (``_run``)
        self._pid = 0
        self._checkpoints = Checkpointer(self.path, self.synchronous)
        _stores.add(self)
        self._connect()
        if check:
            problems = self.check_integrity()
            if problems:
                raise StateStoreError(
                    f"The SQLite history {self.path} is damaged: {'; '.join(problems)}. "
                    f"Restore it from a backup, or copy its threads that still read to a new "
                    f"store (export_thread); sqlite3's .recover command may save more.",
                    path=str(self.path),
                )

    def __repr__(self) -> str:
        return f"SQLiteStateStore({str(self.path)!r})"

    def _display_facts(self) -> tuple[str, str, int | None]:
        return "SQLiteStateStore", str(self.path), None

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
            self._mode = self.synchronous
            # The log is checkpointed by self._checkpoints, off the commits' path.
            conn.execute(f"PRAGMA wal_autocheckpoint={FAR}")
            row = _schema_version(conn)
            if row is None:  # a new database: WAL and the tables, once
                conn.execute("PRAGMA journal_mode=WAL")
                # Each statement is idempotent: two processes may create them at once.
                conn.executescript(_SCHEMA)
                conn.execute(
                    "INSERT OR IGNORE INTO nodestep_meta VALUES ('schema', ?)",
                    (str(ops.SCHEMA_VERSION),),
                )
                row = _schema_version(conn)
            else:
                _drop_old_index(conn)
        except sqlite3.Error as e:
            conn.close()
            raise self._error("open", e) from e
        version = None if row is None else ops.version_of(row[0])
        if row is not None and version is None:
            conn.close()
            raise StateStoreError(ops.damaged_version(str(self.path), row[0]), path=str(self.path))
        if version is not None and version > ops.SCHEMA_VERSION:
            conn.close()
            raise StateStoreError(
                f"{self.path}: its tables are of schema version {version}, written by a newer "
                f"nodestep; this one reads version {ops.SCHEMA_VERSION}. Upgrade nodestep.",
                path=str(self.path),
            )
        self._conn, self._cursor, self._pid = conn, conn.cursor(), os.getpid()
        return conn

    def _error(self, action: str, error: Exception) -> StateStoreError:
        if getattr(error, "sqlite_errorname", "").startswith("SQLITE_CORRUPT"):
            return StateStoreError(
                f"Cannot {action} the SQLite history {self.path}: {error}; the file is "
                f"damaged. Its check_integrity() says where. Restore it from a backup, or copy "
                f"its threads that still read to a new store (export_thread).",
                path=str(self.path),
            )
        return StateStoreError(
            f"Cannot {action} the SQLite history {self.path}: {error}. Check that the path is "
            f"an SQLite database nodestep may read and write, on a local disk.",
            path=str(self.path),
        )

    async def _run(self, op: ops.Op, access: int = READS, *, flush: bool = True) -> Any:
        """Run an operation in the caller's thread; a write in one ``BEGIN IMMEDIATE``."""
        return self._call(access != READS, flush, locked_ops.drive, op)

    async def _run_locked(self, call: Callable[..., Any], *args: Any, flush: bool) -> Any:
        """Return ``call(cursor, *args)``, run in one ``BEGIN IMMEDIATE`` transaction."""
        return self._call(True, flush, call, *args)

    def _call(self, write: bool, flush: bool, call: Callable[..., Any], *args: Any) -> Any:
        """Return ``call(cursor, *args)`` in the caller's thread; a write in one ``BEGIN
        IMMEDIATE`` transaction.

        One cursor for every statement of the connection: ``Connection.execute`` makes (and
        registers, and frees) a cursor a statement, 15 a turn of W10's agent.

        A write with ``flush=False`` commits under ``synchronous=NORMAL`` whatever the
        store's setting: under ``FULL`` its log frames then reach the disk with the next
        flushed commit (a flush of the log file covers every frame written before it).
        """
        with self._lock:
            cursor = self._cursor
            if cursor is None:
                # None in a forked child too (``_forget_after_fork``, run by os.fork): a
                # connection must not cross a fork, and the child opens its own. No
                # os.getpid() here: a system call (about 1 us) in every call of the store.
                self._connect()
                assert self._cursor is not None
                cursor = self._cursor
            try:
                if write:
                    mode = self.synchronous if flush else self._unflushed
                    if mode != self._mode:  # per connection, set between transactions
                        cursor.execute(f"PRAGMA synchronous={mode}")
                        self._mode = mode
                    cursor.execute("BEGIN IMMEDIATE")
                try:
                    result = call(cursor, *args)
                except BaseException:
                    if write:
                        cursor.execute("ROLLBACK")
                    raise
                if write:
                    cursor.execute("COMMIT")
                    self._checkpoints.wrote()
                return result
            except sqlite3.Error as e:
                raise self._error("write to" if write else "read", e) from e

    def check_integrity(self, *, full: bool = False) -> list[str]:
        """Check the database file and the numbering of its records; return the problems.

        Runs SQLite's ``PRAGMA quick_check`` (``integrity_check`` with ``full=True``, which
        also compares every index with its table and takes about five times as long), then
        counts each branch's records against its first and last sequence numbers, which a
        page that lost rows without SQLite noticing fails. Reads the whole file: it takes
        time in proportion to its size (see ``check``).

        Args:
            full: Run ``integrity_check`` instead of ``quick_check``.

        Returns:
            What is wrong, one line each; ``[]`` when the database is sound.

        Raises:
            StateStoreError: The file cannot be read as a database at all.
        """
        pragma = "integrity_check" if full else "quick_check"
        problems: list[str] = []
        with self._lock:
            conn = self._conn if self._conn is not None else self._connect()
            try:
                for (text,) in conn.execute(f"PRAGMA {pragma}").fetchall():
                    # SQLite heads its report with the database's name: not a problem.
                    lines = text.split("\n")
                    problems += [t for t in lines if t != "ok" and not t.startswith("***")]
                # NOT INDEXED: the rows themselves are counted, not the key's index, which
                # still lists a row its table's page lost (a rowid table has both).
                gaps = conn.execute(
                    "SELECT thread, branch, min(seq), max(seq), count(*) FROM nodestep_events "
                    "NOT INDEXED GROUP BY thread, branch "
                    "HAVING max(seq) - min(seq) + 1 != count(*)"
                ).fetchall()
            except sqlite3.DatabaseError as e:
                return [*problems, f"the records cannot be read: {e}"]
        for thread, branch, first, last, count in gaps:
            problems.append(
                f"thread {thread!r}, branch {branch!r} holds {count} records numbered "
                f"{first} to {last}: {last - first + 1 - count} are missing"
            )
        return problems

    def _forget_after_fork(self) -> None:
        # In a forked child: the lock may be held by a parent thread the child does not
        # have, and the parent's connection must be neither used nor closed here (SQLite
        # forbids carrying a connection across a fork; closing may checkpoint or unlock).
        # It is kept, unused, for the child's life; the child's first call connects anew.
        self._lock = threading.Lock()
        inherited = self._checkpoints.connection
        self._checkpoints = Checkpointer(self.path, self.synchronous)
        _inherited.extend(c for c in (self._conn, inherited) if c is not None)
        self._conn = self._cursor = None

    async def aclose(self) -> None:
        """Close the store's connections, its checkpoints' too; a later call opens them again.

        A checkpoint in progress (see ``checkpoints``) is waited for first, up to
        ``timeout`` seconds: it takes milliseconds.
        """
        self._checkpoints.wait(self.timeout)
        self._checkpoints.close()  # first: the last connection to close removes the log
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = self._cursor = None


_stores: weakref.WeakSet[SQLiteStateStore] = weakref.WeakSet()
_inherited: list[sqlite3.Connection] = []  # a forked child's copies of its parent's
_held: list[threading.Lock] = []  # the stores' locks taken for a fork, by the forking thread


def _before_fork() -> None:
    # No call of another thread may be inside SQLite when the process forks: SQLite keeps
    # the locks and transactions of all of a process's connections to a file in one shared
    # record, which the child would inherit mid-change (its first call then waits on a
    # lock no one releases). Each store's lock is taken first, so the fork waits for the
    # calls in progress, as long as one may wait for the database (``timeout``).
    for store in list(_stores):
        for lock in (store._lock, store._checkpoints.lock):  # a checkpoint is a call too
            if lock.acquire(timeout=store.timeout):
                _held.append(lock)


def _after_fork_in_parent() -> None:
    while _held:
        _held.pop().release()


def _after_fork_in_child() -> None:
    _held.clear()
    for store in list(_stores):
        store._forget_after_fork()


os.register_at_fork(
    before=_before_fork,
    after_in_parent=_after_fork_in_parent,
    after_in_child=_after_fork_in_child,
)


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


def _drop_old_index(conn: sqlite3.Connection) -> None:
    """Drop the index of statuses that files of an earlier nodestep have, once.

    The thread listing reads a thread's status from its main branch's last row now (see
    ``ops.LAST_STATUS``), and the index cost every append a page of the log. A file that
    cannot be written keeps it: it only costs time.
    """
    found = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'nodestep_statuses'"
    ).fetchone()
    if found is not None:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("DROP INDEX IF EXISTS nodestep_statuses")
