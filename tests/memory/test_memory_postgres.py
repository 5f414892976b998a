"""The PostgreSQL memory store across a restart of its server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nodestep.memory import PostgresMemoryStore
from postgres_server import own_server, server_command

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, Path]]:
    with own_server("nodestep-memory-pg") as found:
        yield found


def test_items_survive_a_crash_of_the_server_and_the_next_call_reconnects(
    server: tuple[str, Path],
) -> None:
    dsn, directory = server
    store = PostgresMemoryStore(dsn, schema="restart")
    store.put_sync(("users", "ann"), "prefs", {"lang": "fr"})
    server_command("crash", directory)
    server_command("restart", directory)
    item = store.get_sync(("users", "ann"), "prefs")  # the old connection is dead
    assert item is not None and item.value == {"lang": "fr"}
    store.put_sync(("users", "ann"), "more", {"v": 1})
    assert [i.key for i in store.search_sync(("users",))] == ["more", "prefs"]
    store.close()
