"""Run ``_sql`` operations on a psycopg connection: the PostgreSQL store's driver."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from nodestep._errors import StateStoreError
from nodestep.store import _sql

__all__ = [
    "Collision",
    "check_version",
    "drive",
    "drive_async",
    "errors",
    "running_loop",
    "safe",
]


class Collision(Exception):
    """The server refused a row whose key another writer stored first."""


@contextmanager
def errors(psycopg: Any, where: str) -> Iterator[None]:
    """Turn psycopg's errors into a ``Collision`` (a key stored first) or ``StateStoreError``."""
    try:
        yield
    except psycopg.errors.UniqueViolation:
        raise Collision() from None
    except psycopg.Error as e:
        raise StateStoreError(
            f"PostgreSQL history {where}: {type(e).__name__}: {e}. Check that the server runs "
            f"and the role may read and write the nodestep tables; nothing of a refused write "
            f"was stored."
        ) from e


def _translate(stmt: _sql.Stmt | _sql.Many | _sql.Lock, in_transaction: bool) -> Any:
    """Return ``(sql, params, many)`` for a statement of an operation, or None to skip it."""
    if isinstance(stmt, _sql.Stmt):
        return _params(stmt.sql), stmt.params, False
    if isinstance(stmt, _sql.Many):
        return _params(stmt.sql), stmt.rows, True
    if not in_transaction:  # outside one, a lock would end with its statement
        return None
    if stmt.tables:  # the appends, one statement each, take no advisory lock
        return _LOCK_TABLES, (), False
    return "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (stmt.key,), False


_LOCK_TABLES = "LOCK TABLE nodestep_events, nodestep_branches IN SHARE ROW EXCLUSIVE MODE"


def drive(conn: Any, op: _sql.Op, *, in_transaction: bool) -> Any:
    """Run ``op``'s statements on a psycopg connection and return its result."""
    rows: Any = None  # a generator's first send must be None
    try:
        while True:
            found = _translate(op.send(rows), in_transaction)
            rows = []
            if found is not None and found[2]:
                with conn.cursor() as cur:
                    cur.executemany(found[0], found[1])
            elif found is not None:
                cur = conn.execute(found[0], found[1])
                rows = cur.fetchall() if cur.description is not None else []
    except StopIteration as done:
        return done.value


async def drive_async(conn: Any, op: _sql.Op, *, in_transaction: bool) -> Any:
    """``drive`` on a psycopg ``AsyncConnection``."""
    rows: Any = None
    try:
        while True:
            found = _translate(op.send(rows), in_transaction)
            rows = []
            if found is not None and found[2]:
                async with conn.cursor() as cur:
                    await cur.executemany(found[0], found[1])
            elif found is not None:
                cur = await conn.execute(found[0], found[1])
                rows = await cur.fetchall() if cur.description is not None else []
    except StopIteration as done:
        return done.value


_converted: dict[str, str] = {}


def _params(sql: str) -> str:
    """Return ``sql`` with psycopg's ``%s`` placeholders for ``_sql``'s ``?``."""
    found = _converted.get(sql)
    if found is None:
        if len(_converted) > 4096:  # appends of many sizes: keep the cache bounded
            _converted.clear()
        found = _converted[sql] = sql.replace("?", "%s")
    return found


def safe(dsn: str) -> str:
    """Return ``dsn`` without its password, to name it in messages."""
    dsn = re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", dsn)
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", dsn)


def running_loop() -> object:
    """Return the running asyncio event loop, or None (no loop, or trio)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def check_version(pool: Any, psycopg: Any, where: str) -> None:
    """Check that the tables a new pool reaches are of a schema version this nodestep reads.

    Raises:
        StateStoreError: the tables are missing or of a newer nodestep.
    """
    with pool.connection() as conn:
        try:
            row = conn.execute("SELECT value FROM nodestep_meta WHERE key = 'schema'").fetchone()
        except psycopg.errors.UndefinedTable:
            row = None  # no tables: said below
    if row is None or int(row[0]) > _sql.SCHEMA_VERSION:
        found = "no schema version" if row is None else f"schema version {row[0]}"
        raise StateStoreError(
            f"PostgreSQL history {where} has {found}; this nodestep reads version "
            f"{_sql.SCHEMA_VERSION}. Upgrade nodestep, or create the tables with "
            f"`python -m nodestep.store.postgres DSN`."
        )
