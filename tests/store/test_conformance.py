"""Run the conformance suite against every built-in store."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conformance import StateStoreConformance, run

from nodestep.store.base import StateStore
from nodestep.store.filesystem import FilesystemStateStore
from nodestep.store.memory import InMemoryStateStore

StoreFactory = Callable[[Path], StateStore]

# A new store joins the suite with one entry here.
FACTORIES: dict[str, StoreFactory] = {
    "memory": lambda _: InMemoryStateStore(),
    "filesystem": lambda tmp: FilesystemStateStore(tmp / "history.jsonl"),
    "filesystem-fsync": lambda tmp: FilesystemStateStore(tmp / "sync.jsonl", fsync=True),
}


class TestConformance(StateStoreConformance):
    @pytest.fixture(params=list(FACTORIES.values()), ids=list(FACTORIES))
    def store(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
        store = request.param(tmp_path)
        yield store
        run(store.aclose())
