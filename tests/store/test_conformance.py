"""Run the conformance suite against every built-in store, and check how the suite is shipped."""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlite_layouts import layout_of, sqlite_store

import nodestep
import nodestep.testing
from nodestep import FilesystemStateStore
from nodestep.store import StateStore
from nodestep.testing import StateStoreConformance


class TestBuiltInStores(StateStoreConformance):
    """The stores of ``STORES`` in tests/conftest.py, on the back ends of ``anyio_backend``."""

    @pytest.fixture
    def store(self, store: StateStore) -> StateStore:
        # The `store` this fixture asks for is the conftest one, one per entry of STORES.
        return store


class TestFileStoreWithFsync(StateStoreConformance):
    """The file store flushing each append to the disk; an async fixture, as a user's may be."""

    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[StateStore]:
        store = FilesystemStateStore(tmp_path / "sync.jsonl", fsync=True)
        yield store
        await store.aclose()


class TestSQLiteFileOfTheOlderLayout(StateStoreConformance):
    """A file an earlier nodestep made (events WITHOUT ROWID), kept as it is by this one."""

    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[StateStore]:
        store = sqlite_store(tmp_path / "older.db", "older")
        yield store
        await store.aclose()
        assert layout_of(tmp_path / "older.db")["nodestep_events"]  # never rebuilt


# -- how the suite is shipped ---------------------------------------------------------------


def test_the_suite_is_exported_from_nodestep_testing() -> None:
    from nodestep.testing import StateStoreConformance as exported

    assert exported is StateStoreConformance
    assert "StateStoreConformance" in dir(nodestep.testing)


def test_an_unknown_name_of_nodestep_testing_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match=r"module 'nodestep\.testing' has no attribute 'Nope'"):
        nodestep.testing.Nope  # noqa: B018


def test_nodestep_testing_imports_without_pytest_and_the_suite_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Import both modules again with pytest missing; every change is undone afterwards.
    original = nodestep.testing
    monkeypatch.setattr(nodestep, "testing", original)
    for name in ("nodestep.testing", "nodestep.testing._conformance"):
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pytest", None)  # None: `import pytest` fails

    testing = importlib.import_module("nodestep.testing")
    assert testing is not original  # imported again, not taken from sys.modules
    assert testing.sequential_ids()() == "00000000-0000-4000-8000-000000000001"
    assert testing.ticking_clock(step=2)() == 1_700_000_000.0
    with pytest.raises(
        ImportError, match=r"pytest is not installed: pip install 'nodestep\[test\]'"
    ):
        testing.StateStoreConformance  # noqa: B018
    with pytest.raises(ImportError, match=r"pip install 'nodestep\[test\]'") as info:
        importlib.import_module("nodestep.testing._conformance")
    assert info.value.name == "pytest"


@functools.cache
def _docs_dict_store() -> type[StateStore]:
    """The ``DictStateStore`` of docs/stores.md, built by running its block once."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    try:
        import test_docs
    finally:
        sys.path.pop(0)
    page = Path(test_docs.ROOT / "docs" / "stores.md")
    for block in test_docs.doc_blocks(page, page.read_text(encoding="utf-8")):
        if "class DictStateStore(StateStore)" in block.code:
            namespace: dict[str, object] = {"__name__": "docs_stores"}
            code = compile(block.code, str(page), "exec", dont_inherit=True)
            with contextlib.redirect_stdout(io.StringIO()):  # the block prints its example
                exec(code, namespace)
            store_class = namespace["DictStateStore"]
            assert isinstance(store_class, type) and issubclass(store_class, StateStore)
            return store_class
    raise AssertionError("docs/stores.md has no DictStateStore block")


class TestTheDocsStoreOfYourOwn(StateStoreConformance):
    """The store docs/stores.md shows passes the whole suite, as that page says."""

    @pytest.fixture
    def store(self) -> StateStore:
        return _docs_dict_store()()


class LosesItsLeaseAtOnce(nodestep.InMemoryStateStore):
    """A store whose lease is taken over before the first append (a ttl shorter than it)."""

    async def append_leased(self, lease: Any, records: Any, *, after: int) -> Any:
        raise lease.busy()


@pytest.mark.anyio
async def test_acquire_and_append_of_a_lease_lost_at_once_raises_and_says_nothing_moved() -> None:
    # A lost lease is a ThreadConflictError too; it must not read as "the branch moved on",
    # which would send the run on under a lease it does not hold.
    store = LosesItsLeaseAtOnce()
    with pytest.raises(nodestep.ThreadBusyError):
        await store.acquire_and_append("t1", "main", "run-a", [], ttl=30, after=0)
