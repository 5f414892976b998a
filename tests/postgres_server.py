"""The PostgreSQL server the tests of ``PostgresStateStore`` run against, if any.

Set ``NODESTEP_TEST_POSTGRES_DSN`` to a throwaway server's dsn to run them; ``.ci/run`` starts
one with ``scripts/pg_test_server.sh`` and sets it, and sets ``NODESTEP_REQUIRE_POSTGRES=1``
so that a missing server fails the tests instead of skipping them. Each store gets a schema
of its own, dropped when the store is closed.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from nodestep import PostgresStateStore

DSN = os.environ.get("NODESTEP_TEST_POSTGRES_DSN", "")
REQUIRED = os.environ.get("NODESTEP_REQUIRE_POSTGRES", "") == "1"
HOW = (
    "no PostgreSQL server: start one with "
    '`eval "$(scripts/pg_test_server.sh start /tmp/pg-nodestep)"` '
    "(it exports NODESTEP_TEST_POSTGRES_DSN), or set NODESTEP_TEST_POSTGRES_DSN to a "
    "throwaway database"
)


def require_postgres() -> str:
    """Return the test server's dsn; skip the test without one (fail it in CI)."""
    if not DSN:
        if REQUIRED:
            pytest.fail(f"NODESTEP_REQUIRE_POSTGRES=1 but {HOW}")
        pytest.skip(HOW)
    return DSN


class ThrowawayPostgresStore(PostgresStateStore):
    """A store in a new schema of the test server, dropped when the store is closed."""

    async def aclose(self) -> None:
        await super().aclose()
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')


def postgres_store(tmp: Path | None = None) -> PostgresStateStore:
    """Return a new, empty store on the test server, its tables made (skips without one).

    The tables and the pool are made now, so that tests which time a run's first steps (a
    lease's ttl, a cancellation) do not time their making too.
    """
    store = ThrowawayPostgresStore(require_postgres(), schema=f"t_{uuid.uuid4().hex[:16]}")
    store.open()
    return store


@contextmanager
def throwaway_database() -> Iterator[str]:
    """Make a new, empty database on the test server; yield its URL; drop it after."""
    import psycopg

    dsn = require_postgres()
    name = f"docs_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(urlsplit(dsn)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
