"""The event loops and the stores every test runs against, in one place.

``tests/conftest.py`` builds its ``anyio_backend`` and ``store`` fixtures from these; tests
that cannot take a fixture (hypothesis properties) import them by name.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from nodestep import FilesystemStateStore, InMemoryStateStore, SQLiteStateStore
from nodestep.store import StateStore
from postgres_server import postgres_store

BACKENDS = ["asyncio", "trio"]
"""The event loops nodestep runs on; every async test runs on each."""

STORES: dict[str, Callable[[Path], StateStore]] = {
    "memory": lambda tmp: InMemoryStateStore(),
    "filesystem": lambda tmp: FilesystemStateStore(tmp / "history.jsonl"),
    "sqlite": lambda tmp: SQLiteStateStore(tmp / "history.db"),
    "postgres": postgres_store,  # skips without a server (see tests/postgres_server.py)
}
"""The built-in stores, by name: a new back end joins every store test with one entry here."""
