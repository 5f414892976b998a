"""``PostgresStateStore``'s connections find its tables under any schema name, and keep the
server options the dsn gives. The store set its schema as an unquoted ``search_path``: the
server folded ``Orders`` to ``orders`` (the store then said its tables had no version and to
upgrade nodestep) and refused ``my app`` (every connection failed until the pool timed out);
and that setting replaced the dsn's own ``options``, such as a ``statement_timeout``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from nodestep import PostgresStateStore
from postgres_server import require_postgres
from store_helpers import poll_graph

pytestmark = pytest.mark.anyio


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@pytest.fixture
def schemas() -> Iterator[list[str]]:
    """Schema names a test makes; dropped after it (the names need quoting to drop)."""
    import psycopg

    made: list[str] = []
    yield made
    with psycopg.connect(require_postgres(), autocommit=True) as conn:
        for name in made:
            conn.execute(f"DROP SCHEMA IF EXISTS {_quoted(name)} CASCADE".encode())


NAMES = {
    "capitals": "Orders",
    "space": "my app",
    "quote": 'say "hi"',
    "tab": "a\tb",
    "backslash": "back\\slash",
    "comma": "a,b",
}


@pytest.mark.parametrize("kind", list(NAMES))
async def test_a_schema_of_any_name_keeps_the_tables_under_that_exact_name(
    schemas: list[str], kind: str
) -> None:
    import psycopg

    name = f"{NAMES[kind]}_{uuid.uuid4().hex[:8]}"
    schemas.append(name)
    dsn = require_postgres()
    store = PostgresStateStore(dsn, schema=name, timeout=5)
    try:
        await poll_graph(store).ainvoke({"votes": ["yes"]}, thread_id="poll-1")
    finally:
        await store.aclose()
    again = PostgresStateStore(dsn, schema=name, timeout=5)
    try:
        assert (await poll_graph(again).load("poll-1"))["votes"] == ["yes"]
    finally:
        await again.aclose()
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM information_schema.tables "
            "WHERE table_schema = %s AND table_name = 'nodestep_events'",
            (name,),
        ).fetchone()
    assert row == (1,)


def _settings(store: PostgresStateStore) -> tuple[str, str]:
    with store._connected().connection() as conn:  # the connections the store's calls use
        timeout = conn.execute("SHOW statement_timeout").fetchone()
        path = conn.execute("SHOW search_path").fetchone()
    assert timeout is not None and path is not None
    return timeout[0], path[0]


async def test_the_dsns_own_server_options_are_kept(schemas: list[str]) -> None:
    name = f"t_{uuid.uuid4().hex[:16]}"
    schemas.append(name)
    separator = "&" if "?" in require_postgres() else "?"
    # The dsn's own search_path too: the store's schema goes after it, and wins.
    options = "-c%20statement_timeout%3D12345%20-c%20search_path%3Dpublic"
    store = PostgresStateStore(f"{require_postgres()}{separator}options={options}", schema=name)
    try:
        assert _settings(store) == ("12345ms", f'"{name}"')
    finally:
        await store.aclose()


async def test_pgoptions_is_kept_when_the_dsn_gives_no_options(
    schemas: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"t_{uuid.uuid4().hex[:16]}"
    schemas.append(name)
    monkeypatch.setenv("PGOPTIONS", "-c statement_timeout=4321")
    store = PostgresStateStore(require_postgres(), schema=name)
    try:
        assert _settings(store) == ("4321ms", f'"{name}"')
    finally:
        await store.aclose()
