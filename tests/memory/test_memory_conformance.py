"""Run the memory store conformance suite against every built-in memory store."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from memory_backends import OPENERS, opened

import nodestep.testing
from nodestep.memory import FilesystemMemoryStore, MemoryStore
from nodestep.testing import MemoryStoreConformance


class TestBuiltInMemoryStores(MemoryStoreConformance):
    """Each store of ``OPENERS``, on each event loop of ``anyio_backend``."""

    @pytest.fixture(params=list(OPENERS))
    def open_memory_store(
        self, request: pytest.FixtureRequest, tmp_path: Path
    ) -> Iterator[Callable[..., MemoryStore]]:
        if request.param == "memory":
            self.persistent = False
        with opened(request.param, tmp_path) as open_store:
            yield open_store


class TestFileMemoryWithFsync(MemoryStoreConformance):
    """The file store flushing each write to the disk."""

    @pytest.fixture
    def open_memory_store(self, tmp_path: Path) -> Iterator[Callable[..., MemoryStore]]:
        stores: list[MemoryStore] = []

        def open_store(**options: object) -> MemoryStore:
            stores.append(FilesystemMemoryStore(tmp_path / "m", fsync=True, **options))  # type: ignore[arg-type]
            return stores[-1]

        yield open_store


def test_the_suite_and_the_fake_embedder_are_exported_from_nodestep_testing() -> None:
    assert "MemoryStoreConformance" in dir(nodestep.testing)
    assert nodestep.testing.MemoryStoreConformance.__module__ == "nodestep.testing"
    assert nodestep.testing.FakeEmbeddings.__module__ == "nodestep.testing"
