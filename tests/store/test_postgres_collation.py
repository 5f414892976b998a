"""A PostgreSQL database whose collation follows a language orders ids as every store does.

Text in ``ORDER BY`` and in comparisons follows the database's collation, which for
``en_US.utf8`` or ICU puts ``"a"`` before ``"B"``; the other stores compare code points.
The store compares ids by their bytes (``COLLATE "C"``), so that ``list_threads`` orders
threads of one activity time, and ``locate`` picks among the copies of a repeated event id,
as the memory store does. These tests make a database of such a collation on the test server.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from nodestep import InMemoryStateStore
from nodestep.store import StateStore
from nodestep.testing import checkpoint, event, events, fork
from postgres_server import ThrowawayPostgresStore, require_postgres

pytestmark = pytest.mark.anyio

# Thread ids whose order by a language (a, B, b-2, b1, é, f) is not their code points'.
NAMES = ["é", "a", "B", "f", "b-2", "b1"]


def _create_options(conn: Any) -> str | None:
    """The options of a database with a language's collation, or None if the server has none."""
    found = {row[0] for row in conn.execute("SELECT collname FROM pg_collation")}
    if "und-x-icu" in found:
        return "LOCALE_PROVIDER icu ICU_LOCALE 'und' LOCALE 'C.UTF-8'"
    if "en_US.utf8" in found:
        return "LC_COLLATE 'en_US.utf8' LC_CTYPE 'en_US.utf8'"
    return None


@pytest.fixture(scope="module")
def language_database() -> Iterator[str]:
    """A new database on the test server whose default collation is a language's."""
    import psycopg

    dsn = require_postgres()
    name = f"collation_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        options = _create_options(conn)
        if options is None:
            pytest.skip("the test server has neither ICU nor the en_US.utf8 locale")
        conn.execute(f"CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8' {options}")
    try:
        url = urlunsplit(urlsplit(dsn)._replace(path=f"/{name}"))
        with psycopg.connect(url) as conn:  # the case: this database orders "a" before "B"
            rows = conn.execute("SELECT x FROM (VALUES ('B'), ('a')) AS v(x) ORDER BY x")
            assert [x for (x,) in rows] == ["a", "B"]
        yield url
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(params=["postgres", "memory"])
async def store(
    request: pytest.FixtureRequest, language_database: str
) -> AsyncIterator[StateStore]:
    """The store in that database, and the memory store, the verified fake, beside it."""
    if request.param == "memory":
        yield InMemoryStateStore()
        return
    store = ThrowawayPostgresStore(language_database, schema=f"t_{uuid.uuid4().hex[:16]}")
    yield store
    await store.aclose()


async def _threads_at_one_time(store: StateStore) -> None:
    for name in NAMES:
        first = {**event(1, name, type="checkpoint"), "ts": 5.0}
        await store.append(name, "main", [first], after=0)


async def test_threads_of_one_activity_are_listed_in_code_point_order(store: StateStore) -> None:
    await _threads_at_one_time(store)
    page = await store.list_threads()
    assert [t.thread_id for t in page.threads] == ["B", "a", "b-2", "b1", "f", "é"]


async def test_paging_follows_code_point_order(store: StateStore) -> None:
    await _threads_at_one_time(store)
    seen, cursor = [], None
    while True:
        page = await store.list_threads(limit=2, cursor=cursor)
        seen += [t.thread_id for t in page.threads]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == ["B", "a", "b-2", "b1", "f", "é"]


async def test_a_repeated_id_at_one_seq_names_the_copy_on_the_first_branch_by_code_points(
    store: StateStore,
) -> None:
    main = events(1, 3)
    await store.append("t1", "main", main, after=0)
    for name in ("alt", "Zed"):  # "Zed" sorts first by code points, "alt" by a language
        first = {**checkpoint(3, branch=name, forked=True), "id": main[2]["id"]}
        assert await store.create_branch(fork("t1", name, main[1]), [first]) is True
    assert await store.locate("t1", main[2]["id"]) == ("Zed", 3)
