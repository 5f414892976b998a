"""``open_store``: a store chosen by URL, and the errors of a URL it cannot open."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from nodestep import (
    FilesystemStateStore,
    GraphConfigError,
    InMemoryStateStore,
    PostgresStateStore,
    SQLiteStateStore,
    open_store,
)
from postgres_server import require_postgres


def test_memory_url_opens_a_memory_store() -> None:
    assert isinstance(open_store("memory:"), InMemoryStateStore)


def test_file_and_sqlite_urls_open_their_absolute_or_relative_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(f"file://{tmp_path}/a%20b.jsonl")
    assert isinstance(store, FilesystemStateStore) and store.path == tmp_path / "a b.jsonl"
    anyio.run(store.aclose)
    assert str(tmp_path).startswith("/")  # so the URLs below have four slashes, as SQLAlchemy's
    db = open_store(f"sqlite:///{tmp_path}/h.db", synchronous="NORMAL")
    assert isinstance(db, SQLiteStateStore) and db.path == tmp_path / "h.db"
    assert db.synchronous == "NORMAL"
    anyio.run(db.aclose)
    three = open_store(f"sqlite://{tmp_path}/h.db")
    assert isinstance(three, SQLiteStateStore) and three.path == tmp_path / "h.db"
    anyio.run(three.aclose)
    monkeypatch.chdir(tmp_path)
    rel = open_store("sqlite:rel.db")
    assert isinstance(rel, SQLiteStateStore) and rel.path == tmp_path / "rel.db"
    anyio.run(rel.aclose)


def test_an_unknown_scheme_lists_the_known_ones() -> None:
    with pytest.raises(GraphConfigError, match=r"unknown scheme 'redis:'.*'memory:', 'file:'"):
        open_store("redis://localhost/0")
    with pytest.raises(GraphConfigError, match=r"unknown scheme \(none\).*'sqlite:'"):
        open_store("history.db")


def test_a_url_without_its_path_or_with_a_host_is_refused() -> None:
    with pytest.raises(GraphConfigError, match=r"has no path; write e.g. 'sqlite:///var"):
        open_store("sqlite://")
    with pytest.raises(GraphConfigError, match=r"names host 'server'.*a local file"):
        open_store("file://server/share/h.jsonl")
    with pytest.raises(GraphConfigError, match="a memory store has no path"):
        open_store("memory:/tmp/x")
    with pytest.raises(GraphConfigError, match="takes a URL string"):
        open_store(Path("h.db"))  # type: ignore[arg-type]


def test_a_postgres_url_without_psycopg_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # None: `import psycopg` fails
    with pytest.raises(GraphConfigError, match=r"pip install 'nodestep\[postgres\]'") as info:
        open_store("postgresql://app:secret@db.example/app")
    assert "secret" not in str(info.value)


def test_a_postgres_url_opens_a_postgres_store() -> None:
    dsn = require_postgres()
    store = open_store(dsn.replace("postgresql:", "postgres:", 1), schema="urls_test")
    assert isinstance(store, PostgresStateStore) and store.schema == "urls_test"
    anyio.run(store.aclose)
