"""The PostgreSQL store's tables, and the command that creates them ahead of time.

``PostgresStateStore`` creates its tables on first use (``create_schema=True``, the default).
Where the application's database role may not create tables, an administrator creates them
once instead, with::

    python -m nodestep.store.postgres postgresql://admin@db/app [--schema NAME]

or prints the SQL to apply by hand with ``--print``. Both are idempotent.
"""

from __future__ import annotations

import argparse
from typing import Any

from nodestep.store._sql import SCHEMA_VERSION

__all__ = ["create_tables", "import_psycopg", "main", "schema_sql"]

_TABLES = """
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.nodestep_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.nodestep_events (
    thread TEXT NOT NULL, branch TEXT NOT NULL, seq BIGINT NOT NULL, id TEXT NOT NULL,
    kind TEXT NOT NULL, request TEXT, line BYTEA NOT NULL, ts DOUBLE PRECISION NOT NULL,
    status TEXT, PRIMARY KEY (thread, branch, seq)
);
CREATE INDEX IF NOT EXISTS nodestep_event_ids ON {s}.nodestep_events (thread, id);
CREATE INDEX IF NOT EXISTS nodestep_checkpoints ON {s}.nodestep_events (thread, branch, seq)
    WHERE kind = 'checkpoint';
CREATE INDEX IF NOT EXISTS nodestep_requests ON {s}.nodestep_events (thread, branch, request)
    WHERE request IS NOT NULL;
CREATE INDEX IF NOT EXISTS nodestep_statuses ON {s}.nodestep_events (thread, branch, seq)
    WHERE status IS NOT NULL;
CREATE TABLE IF NOT EXISTS {s}.nodestep_branches (
    n BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, thread TEXT NOT NULL,
    branch TEXT NOT NULL, parent TEXT NOT NULL, from_event TEXT NOT NULL,
    from_seq BIGINT NOT NULL, ts DOUBLE PRECISION NOT NULL, UNIQUE (thread, branch)
);
CREATE TABLE IF NOT EXISTS {s}.nodestep_leases (
    thread TEXT NOT NULL, branch TEXT NOT NULL, id TEXT NOT NULL, holder TEXT NOT NULL,
    expires DOUBLE PRECISION NOT NULL, ttl DOUBLE PRECISION NOT NULL, pid BIGINT NOT NULL,
    host TEXT NOT NULL, pid_ns BIGINT NOT NULL, PRIMARY KEY (thread, branch)
);
INSERT INTO {s}.nodestep_meta VALUES ('schema', '{version}') ON CONFLICT (key) DO NOTHING;
"""


def import_psycopg() -> Any:
    """Import psycopg (3) and its pool, or say which extra to install."""
    try:
        import psycopg
        import psycopg_pool  # noqa: F401 - checked here, used when a pool is made
    except ImportError as e:
        raise ImportError(
            f"PostgresStateStore needs psycopg 3 and psycopg_pool ({e.name} is missing): "
            f"pip install 'nodestep[postgres]'",
            name=e.name,
        ) from e
    return psycopg


def quote(name: str) -> str:
    """Return ``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def schema_sql(schema: str = "public", version: int = SCHEMA_VERSION) -> str:
    """Return the SQL that creates the store's tables in ``schema``; it is idempotent."""
    return _TABLES.format(s=quote(schema), version=version)


def create_tables(dsn: str, schema: str = "public") -> None:
    """Create the store's tables in ``schema`` of the database at ``dsn``, if missing.

    Takes an advisory lock first, so stores that start at once do not race to create
    them (PostgreSQL's ``IF NOT EXISTS`` does not guard against that).

    Raises:
        ImportError: psycopg is not installed: ``pip install 'nodestep[postgres]'``.
        psycopg.Error: the server refused (e.g. the role may not create tables).
    """
    psycopg = import_psycopg()
    with psycopg.connect(dsn) as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('nodestep schema', 0))")
        conn.execute(schema_sql(schema, SCHEMA_VERSION).encode())


def main(argv: list[str] | None = None) -> int:
    """Run the command line: create the tables, or print their SQL."""
    parser = argparse.ArgumentParser(
        prog="python -m nodestep.store.postgres",
        description="Create the tables of nodestep's PostgresStateStore ahead of time.",
    )
    parser.add_argument("dsn", nargs="?", help="the database, e.g. postgresql://user@host/db")
    parser.add_argument("--schema", default="public", help="the schema (default: public)")
    parser.add_argument("--print", action="store_true", help="print the SQL, run nothing")
    args = parser.parse_args(argv)
    if args.print:
        print(schema_sql(args.schema).strip())
        return 0
    if not args.dsn:
        parser.error("give the database's dsn, or --print to see the SQL")
    create_tables(args.dsn, args.schema)
    print(f"nodestep tables are ready in schema {args.schema!r}")
    return 0
