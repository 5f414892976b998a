"""Run ``_sql`` operations on a psycopg connection: the PostgreSQL store's driver."""

from __future__ import annotations

import re
from typing import Any

from nodestep.store import _sql

__all__ = ["Collision", "drive", "safe"]


class Collision(Exception):
    """The server refused a row whose key another writer stored first."""


def drive(conn: Any, op: _sql.Op, *, in_transaction: bool) -> Any:
    """Run ``op``'s statements on a psycopg connection and return its result."""
    rows: Any = None  # a generator's first send must be None
    try:
        while True:
            stmt = op.send(rows)
            if isinstance(stmt, _sql.Stmt):
                cur = conn.execute(_params(stmt.sql), stmt.params)
                rows = cur.fetchall() if cur.description is not None else []
            elif isinstance(stmt, _sql.Many):
                with conn.cursor() as cur:
                    cur.executemany(_params(stmt.sql), stmt.rows)
                rows = []
            else:
                if in_transaction and stmt.tables:  # the appends take no advisory lock
                    conn.execute(
                        "LOCK TABLE nodestep_events, nodestep_branches IN SHARE ROW EXCLUSIVE MODE"
                    )
                elif in_transaction:  # outside one, the lock would end with its statement
                    conn.execute(
                        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (stmt.key,)
                    )
                rows = []
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
