"""The statements the SQLite and PostgreSQL memory stores share, and their rows.

One table, ``nodestep_memory``: a row per item, keyed by its namespace (labels joined by
dots) and key. A write is one ``INSERT ... ON CONFLICT DO UPDATE`` statement, atomic on
both databases, which keeps the ``created`` time of a row it replaces unless that row had
expired. Statements are written with ``?``; ``postgres`` turns them into ``%s``.
"""

from __future__ import annotations

import json
from typing import Any

from nodestep._memory.items import Row, join_namespace, split_namespace

__all__ = [
    "DELETE",
    "EXPIRED",
    "NAMESPACES",
    "READ",
    "ROWS",
    "ROWS_UNDER",
    "TOUCH",
    "UPSERT",
    "params",
    "prefix_pattern",
    "row_of",
]

_COLUMNS = "ns, key, value, created, updated, ttl, expires, vectors"

UPSERT = f"""
INSERT INTO {{table}} ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (ns, key) DO UPDATE SET
    value = excluded.value,
    created = CASE WHEN {{table}}.expires IS NOT NULL AND {{table}}.expires <= excluded.updated
        THEN excluded.created ELSE {{table}}.created END,
    updated = excluded.updated, ttl = excluded.ttl, expires = excluded.expires,
    vectors = excluded.vectors
"""
READ = f"SELECT {_COLUMNS} FROM {{table}} WHERE ns = ? AND key = ?"
DELETE = "DELETE FROM {table} WHERE ns = ? AND key = ?"
ROWS = f"SELECT {_COLUMNS} FROM {{table}}"
ROWS_UNDER = f"SELECT {_COLUMNS} FROM {{table}} WHERE ns = ? OR ns LIKE ? ESCAPE '!'"
TOUCH = "UPDATE {table} SET expires = ? WHERE ns = ? AND key = ?"
EXPIRED = "DELETE FROM {table} WHERE expires IS NOT NULL AND expires <= ?"
NAMESPACES = "SELECT DISTINCT ns FROM {table} WHERE expires IS NULL OR expires > ?"


def params(row: Row) -> tuple[Any, ...]:
    """Return the parameters of ``UPSERT`` for ``row``."""
    return (
        join_namespace(row.namespace), row.key, json.dumps(row.value, sort_keys=True),
        row.created_at, row.updated_at, row.ttl, row.expires_at,
        json.dumps(row.vectors) if row.vectors else None,
    )  # fmt: skip


def prefix_pattern(prefix: tuple[str, ...]) -> str:
    """Return the ``LIKE`` pattern of the namespaces below ``prefix`` (``!`` escapes)."""
    text = join_namespace(prefix)
    escaped = text.replace("!", "!!").replace("%", "!%").replace("_", "!_")
    return escaped + ".%"


def row_of(values: Any) -> Row:
    """Return the ``Row`` of a selected row's columns."""
    ns, key, value, created, updated, ttl, expires, vectors = values
    return Row(
        split_namespace(ns), key, json.loads(value), created, updated, ttl, expires,
        json.loads(vectors) if vectors else [],
    )  # fmt: skip
