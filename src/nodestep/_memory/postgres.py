"""``PostgresMemoryStore``: memory items in a PostgreSQL database, shared by any machines.

Needs psycopg 3: ``pip install 'nodestep[postgres]'``. A store keeps one connection per
process (opened on first use, anew after a fork), in autocommit: each write is one
statement (``sql.UPSERT``), atomic on the server. The async methods run it in a worker
thread so the event loop never waits on the network.

A connection the server dropped (a restart, a failover, an idle timeout) is replaced, and
the statement sent once more, on the first call that finds it dead. Each statement gives
the same rows when it runs twice, so a second run is safe; only a ``delete`` whose first
run deleted the item before the connection died reports ``False``. Semantic search ranks in Python
(``embeddings``): no pgvector extension is needed, and none is used.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import anyio.to_thread

from nodestep._errors import GraphConfigError, StateStoreError
from nodestep._memory import sql
from nodestep._memory.contract import MemoryStore
from nodestep._memory.items import Row, join_namespace, split_namespace

__all__ = ["PostgresMemoryStore"]

T = TypeVar("T")
_SCHEMA = """
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {table} (
    ns TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL, updated DOUBLE PRECISION NOT NULL,
    ttl DOUBLE PRECISION, expires DOUBLE PRECISION, vectors TEXT, PRIMARY KEY (ns, key)
);
CREATE INDEX IF NOT EXISTS nodestep_memory_expires ON {table} (expires)
    WHERE expires IS NOT NULL;
"""
# Any number for pg_advisory_xact_lock, the same in every process: two processes creating
# the table at once would otherwise race in the catalog.
_CREATE_LOCK = 0x6E6F6465_6D656D


class PostgresMemoryStore(MemoryStore):
    """Keep memory items in a PostgreSQL database.

    Args:
        dsn: The database (a libpq connection string), e.g. ``"postgresql://u@host/app"``.
        schema: The PostgreSQL schema of the table (created if missing).
        **options: ``MemoryStore``'s options (``ttl``, ``refresh_ttl``, ``embeddings``,
            ``index_fields``, ``clock``).

    Raises:
        GraphConfigError: psycopg is not installed (the message names the extra), or
            ``schema`` is not a plain SQL name.
    """

    def __init__(self, dsn: str, *, schema: str = "public", **options: Any) -> None:
        super().__init__(**options)
        try:
            import psycopg
        except ImportError as e:
            raise GraphConfigError(
                f"A PostgreSQL memory store needs psycopg 3 ({e.name} is not installed): "
                f"pip install 'nodestep[postgres]'"
            ) from e
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", schema):
            raise GraphConfigError(
                f"schema={schema!r} is not a plain SQL name; use letters, digits and '_'."
            )
        self._psycopg = psycopg
        self.dsn = dsn
        self.schema = schema
        self._table = f"{schema}.nodestep_memory"
        self._lock = threading.Lock()
        self._conn: Any = None
        self._pid = 0

    def __repr__(self) -> str:
        return f"PostgresMemoryStore({_safe(self.dsn)!r}, schema={self.schema!r})"

    async def _call(self, fn: Callable[[], T]) -> T:
        return await anyio.to_thread.run_sync(fn)

    def _connect(self) -> Any:
        conn = self._psycopg.connect(self.dsn, autocommit=True)
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_CREATE_LOCK,))
                conn.execute(_SCHEMA.format(schema=self.schema, table=self._table))
        except BaseException:
            conn.close()
            raise
        self._conn, self._pid = conn, os.getpid()
        return conn

    def _run(self, statement: str, args: Sequence[Any], rows: bool) -> Any:
        text = statement.format(table=self._table).replace("?", "%s")
        with self._lock:
            try:
                try:
                    return self._execute(text, args, rows)
                except self._psycopg.OperationalError:
                    if self._conn is None or not self._conn.broken:
                        raise
                    self._conn = None  # dropped by the server: once more, on a new one
                return self._execute(text, args, rows)
            except self._psycopg.Error as e:
                if self._conn is not None and self._conn.broken:
                    self._conn = None  # the next call connects anew
                raise StateStoreError(
                    f"The PostgreSQL memory store {_safe(self.dsn)} (schema {self.schema!r}) "
                    f"failed: {e}. Check that the server is up and the role may use the "
                    f"schema.",
                    path=_safe(self.dsn),
                ) from e

    def _execute(self, text: str, args: Sequence[Any], rows: bool) -> Any:
        conn = self._conn
        if conn is None or conn.closed or self._pid != os.getpid():
            conn = self._connect()  # a connection must not cross a fork
        cursor = conn.execute(text, args)
        return cursor.fetchall() if rows else cursor.rowcount

    def _read(self, namespace: tuple[str, ...], key: str) -> Row | None:
        if _holds_nul(*namespace, key):  # a lookup's (see items.py): no row holds a NUL
            return None
        found = self._run(sql.READ, (join_namespace(namespace), key), True)
        return sql.row_of(found[0]) if found else None

    def _upsert(self, row: Row) -> None:
        self._run(sql.UPSERT, sql.params(row), False)

    def _remove(self, namespace: tuple[str, ...], key: str) -> bool:
        if _holds_nul(*namespace, key):
            return False
        return bool(self._run(sql.DELETE, (join_namespace(namespace), key), False) > 0)

    def _rows(self, prefix: tuple[str, ...]) -> list[Row]:
        if not prefix:
            return [sql.row_of(r) for r in self._run(sql.ROWS, (), True)]
        if _holds_nul(*prefix):
            return []
        args = (join_namespace(prefix), sql.prefix_pattern(prefix))
        return [sql.row_of(r) for r in self._run(sql.ROWS_UNDER, args, True)]

    def _touch(self, namespace: tuple[str, ...], key: str, expires_at: float) -> None:
        self._run(sql.TOUCH, (expires_at, join_namespace(namespace), key), False)

    def _sweep(self, now: float) -> int:
        return int(self._run(sql.EXPIRED, (now,), False))

    def _namespaces(self, now: float) -> set[tuple[str, ...]]:
        return {split_namespace(ns) for (ns,) in self._run(sql.NAMESPACES, (now,), True)}

    def _close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None


def _holds_nul(*texts: str) -> bool:
    """Whether a name looked up holds a NUL, which PostgreSQL text cannot (nor its rows)."""
    return any("\x00" in text for text in texts)


def _safe(dsn: str) -> str:
    """Return ``dsn`` without its password."""
    return re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", dsn)
