"""Fixtures of the engine tests: a store of each kind, and closing the file stores opened."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from engine_helpers import opened, run

from nodestep import FilesystemStateStore, InMemoryStateStore, StateStore


@pytest.fixture(params=["memory", "filesystem"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
    """The store a test runs against: once in memory, once in a file."""
    if request.param == "memory":
        store: StateStore = InMemoryStateStore()
    else:
        store = FilesystemStateStore(tmp_path / "history.jsonl")
    yield store
    run(store.aclose())


@pytest.fixture(autouse=True)
def close_opened_stores() -> Iterator[None]:
    """Close the file stores a test opened besides its fixture's (each holds a descriptor)."""
    yield
    while opened:
        run(opened.pop().aclose())
