"""The PostgreSQL server the tests of ``PostgresStateStore`` run against, if any.

Set ``NODESTEP_TEST_POSTGRES_DSN`` to a throwaway server's dsn to run them; ``.ci/run`` starts
one with ``scripts/pg_test_server.sh`` and sets it, and sets ``NODESTEP_REQUIRE_POSTGRES=1``
so that a missing server fails the tests instead of skipping them. Each store gets a schema
of its own, dropped when the store is closed.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from nodestep import PostgresStateStore

ROOT = Path(__file__).resolve().parents[1]
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


def server_command(action: str, directory: Path) -> str:
    """Run ``scripts/pg_test_server.sh ACTION DIRECTORY`` (``start``, ``stop``, ``crash``,
    ``restart``) and return what it printed; a failure fails the test with its stderr."""
    done = subprocess.run(
        [str(ROOT / "scripts" / "pg_test_server.sh"), action, str(directory)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@contextmanager
def own_server(prefix: str = "nodestep-pg") -> Iterator[tuple[str, Path]]:
    """Start a PostgreSQL server of the caller's own; yield its dsn and directory; stop it.

    For tests that crash or restart the server. It runs only where the PostgreSQL tests do
    (skipped without a test server, failed in CI).
    """
    require_postgres()
    # Not under tmp_path: as root, the server runs as `postgres`, which must reach it.
    directory = Path(tempfile.gettempdir()) / f"{prefix}-{uuid.uuid4().hex[:12]}"
    dsn = server_command("start", directory).split("'")[1]
    try:
        yield dsn, directory
    finally:
        server_command("stop", directory)
