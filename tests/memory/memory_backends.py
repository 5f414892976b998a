"""The memory stores every memory test runs against, by name, and how to open each.

A back end joins the conformance suite, the state machine and the process tests with one
entry in ``OPENERS``: a function of a test's folder and the store's options that opens the
store on the same data each time it is called for that folder.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nodestep.memory import (
    FilesystemMemoryStore,
    InMemoryMemoryStore,
    MemoryStore,
    PostgresMemoryStore,
    SQLiteMemoryStore,
)
from postgres_server import require_postgres


def _postgres(tmp: Path, **options: Any) -> MemoryStore:
    # One schema per test folder: the same data for each open in a test, none shared.
    schema = "m_" + uuid.uuid5(uuid.NAMESPACE_URL, str(tmp)).hex[:16]
    return PostgresMemoryStore(require_postgres(), schema=schema, **options)


OPENERS: dict[str, Callable[..., MemoryStore]] = {
    "memory": lambda tmp, **o: InMemoryMemoryStore(**o),
    "filesystem": lambda tmp, **o: FilesystemMemoryStore(tmp / "memory.jsonl", **o),
    "sqlite": lambda tmp, **o: SQLiteMemoryStore(tmp / "memory.db", **o),
    "postgres": _postgres,
}
"""The built-in memory stores, by name."""

PERSISTENT = ["filesystem", "sqlite", "postgres"]
"""The stores whose items outlive the process: the restart and process tests use these."""


@contextmanager
def opened(kind: str, tmp: Path) -> Iterator[Callable[..., MemoryStore]]:
    """Yield a function opening ``kind``'s store on ``tmp``'s data; close them all after."""
    stores: list[MemoryStore] = []

    def open_store(**options: Any) -> MemoryStore:
        stores.append(OPENERS[kind](tmp, **options))
        return stores[-1]

    try:
        yield open_store
    finally:
        for store in stores:
            store.close()
        if kind == "postgres" and stores:
            drop_schema(stores[0])


def drop_schema(store: MemoryStore) -> None:
    """Drop the throwaway schema of a PostgreSQL memory store of the tests."""
    import psycopg

    assert isinstance(store, PostgresMemoryStore)
    with psycopg.connect(store.dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{store.schema}" CASCADE')
