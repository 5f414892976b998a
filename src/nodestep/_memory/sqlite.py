"""``SQLiteMemoryStore``: memory items in an SQLite database, shared by a machine's processes.

WAL mode, as the SQLite state store: readers never wait for the writer. Each write is one
statement (``sql.UPSERT``), atomic by itself, so a process killed mid-write leaves the old
row or the new one. The table may live in the same file as a state store's history.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from nodestep._errors import StateStoreError
from nodestep._memory import sql
from nodestep._memory.contract import MemoryStore
from nodestep._memory.items import Row, join_namespace, split_namespace

__all__ = ["SQLiteMemoryStore"]

T = TypeVar("T")
_TABLE = "nodestep_memory"
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {_TABLE} (
    ns TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, created REAL NOT NULL,
    updated REAL NOT NULL, ttl REAL, expires REAL, vectors TEXT, PRIMARY KEY (ns, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS {_TABLE}_expires ON {_TABLE} (expires) WHERE expires IS NOT NULL;
"""


class SQLiteMemoryStore(MemoryStore):
    """Keep memory items in an SQLite database file.

    Safe for many processes and threads of one machine at once (not on a network file
    system, where SQLite's locks do not hold).

    Args:
        path: The database file; created, with its directory, if missing. It may be the
            file of a ``SQLiteStateStore``: the items have a table of their own.
        synchronous: SQLite's ``synchronous`` setting: ``"NORMAL"`` (the default: a write
            that returned survives a crash of the process, not a power cut) or ``"FULL"``.
        timeout: Seconds a write waits for another process's write.
        **options: ``MemoryStore``'s options (``ttl``, ``refresh_ttl``, ``embeddings``,
            ``index_fields``, ``clock``).

    Raises:
        StateStoreError: The file cannot be opened as a database.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: str = "NORMAL",
        timeout: float = 30.0,
        **options: Any,
    ) -> None:
        super().__init__(**options)
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
        with self._lock:
            self._connect()

    def __repr__(self) -> str:
        return f"SQLiteMemoryStore({str(self.path)!r})"

    def _connect(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False
            )
        except (OSError, sqlite3.Error) as e:
            raise self._error("open", e) from e
        try:
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA)  # each statement idempotent: processes may race
        except sqlite3.Error as e:
            conn.close()
            raise self._error("open", e) from e
        self._conn, self._pid = conn, os.getpid()
        return conn

    def _error(self, action: str, error: Exception) -> StateStoreError:
        return StateStoreError(
            f"Cannot {action} the SQLite memory store {self.path}: {error}. Check that the "
            f"path is an SQLite database nodestep may read and write, on a local disk.",
            path=str(self.path),
        )

    def _run(self, fn: Callable[[sqlite3.Connection], T], action: str = "read") -> T:
        with self._lock:
            conn = self._conn
            if conn is None or self._pid != os.getpid():
                # A connection must not cross a fork: the child opens its own.
                conn = self._connect()
            try:
                return fn(conn)
            except sqlite3.Error as e:
                raise self._error(action, e) from e

    def _query(self, statement: str, args: Sequence[Any]) -> list[Any]:
        text = statement.format(table=_TABLE)
        return self._run(lambda c: c.execute(text, args).fetchall())

    def _change(self, statement: str, args: Sequence[Any]) -> int:
        text = statement.format(table=_TABLE)
        return self._run(lambda c: c.execute(text, args).rowcount, "write to")

    def _read(self, namespace: tuple[str, ...], key: str) -> Row | None:
        found = self._query(sql.READ, (join_namespace(namespace), key))
        return sql.row_of(found[0]) if found else None

    def _upsert(self, row: Row) -> None:
        self._change(sql.UPSERT, sql.params(row))

    def _remove(self, namespace: tuple[str, ...], key: str) -> bool:
        return self._change(sql.DELETE, (join_namespace(namespace), key)) > 0

    def _rows(self, prefix: tuple[str, ...]) -> list[Row]:
        if not prefix:
            return [sql.row_of(r) for r in self._query(sql.ROWS, ())]
        args = (join_namespace(prefix), sql.prefix_pattern(prefix))
        rows = [sql.row_of(r) for r in self._query(sql.ROWS_UNDER, args)]
        # SQLite's LIKE ignores the case of ASCII letters: ('users',) would also find the
        # items of ('Users', ...). Labels match exactly, so the rows are checked again.
        n = len(prefix)
        return [row for row in rows if row.namespace[:n] == prefix]

    def _touch(self, namespace: tuple[str, ...], key: str, expires_at: float) -> None:
        self._change(sql.TOUCH, (expires_at, join_namespace(namespace), key))

    def _sweep(self, now: float) -> int:
        return self._change(sql.EXPIRED, (now,))

    def _namespaces(self, now: float) -> set[tuple[str, ...]]:
        return {split_namespace(ns) for (ns,) in self._query(sql.NAMESPACES, (now,))}

    def _close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None
