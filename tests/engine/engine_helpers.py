"""Helpers shared by the engine tests that use stores (imported by name: tests have no package)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from nodestep import FilesystemStateStore, StateStore

T = TypeVar("T")
Record = dict[str, Any]

opened: list[StateStore] = []


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def open_file(path: Path) -> FilesystemStateStore:
    """Open a file store that the ``close_opened_stores`` fixture closes after the test."""
    store = FilesystemStateStore(path)
    opened.append(store)
    return store


def reopened(store: StateStore) -> StateStore:
    """The same history through a new store object, as another process would see it."""
    if isinstance(store, FilesystemStateStore):
        return open_file(store.path)
    return store


def records(store: StateStore, thread_id: str, branch_id: str = "main") -> list[Record]:
    return run(store.read(thread_id, branch_id))
