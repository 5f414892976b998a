"""Thread management (list, delete, prune) of the SQL stores, held to the shared contract.

``threads_contract.ThreadConformance`` is the contract's conformance suite (see its
docstring); the SQLite store runs it always, the PostgreSQL store when a server is set.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from threads_contract import ThreadConformance

from nodestep import SQLiteStateStore, StateStore
from postgres_server import postgres_store

pytestmark = pytest.mark.anyio


class TestSQLiteThreads(ThreadConformance):
    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[StateStore]:
        store = SQLiteStateStore(tmp_path / "threads.db")
        yield store
        await store.aclose()


class TestPostgresThreads(ThreadConformance):
    @pytest.fixture
    async def store(self) -> AsyncIterator[StateStore]:
        store = postgres_store()
        yield store
        await store.aclose()
