"""``open_memory``: a memory store chosen by URL, and the URLs it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodestep import GraphConfigError
from nodestep.memory import (
    FilesystemMemoryStore,
    InMemoryMemoryStore,
    PostgresMemoryStore,
    SQLiteMemoryStore,
    open_memory,
)
from postgres_server import require_postgres


def test_each_scheme_opens_its_store_with_the_options_given(tmp_path: Path) -> None:
    assert isinstance(open_memory("memory:", ttl=60), InMemoryMemoryStore)
    file = open_memory(f"file://{tmp_path}/m")
    assert isinstance(file, FilesystemMemoryStore) and file.path == tmp_path / "m"
    lite = open_memory(f"sqlite://{tmp_path}/m.db", ttl=5)
    assert isinstance(lite, SQLiteMemoryStore) and lite.ttl == 5.0
    lite.close()
    lite_four = open_memory(f"sqlite:///{tmp_path}/m.db")  # SQLAlchemy's four slashes
    assert isinstance(lite_four, SQLiteMemoryStore) and lite_four.path == tmp_path / "m.db"
    lite_four.close()


def test_a_relative_path_is_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_memory("sqlite:rel.db")
    assert isinstance(store, SQLiteMemoryStore) and store.path == tmp_path / "rel.db"
    store.close()


def test_a_postgres_url_opens_a_postgres_memory_store() -> None:
    store = open_memory(require_postgres(), schema="memory_url_test")
    assert isinstance(store, PostgresMemoryStore)
    assert "schema='memory_url_test'" in repr(store)
    store.close()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis://x", r"unknown scheme 'redis:'; nodestep knows 'memory:', 'file:'"),
        ("no-scheme", r"unknown scheme \(none\)"),
        ("sqlite://db.example.com/m.db", "names host 'db.example.com'"),
        ("sqlite:///m.db?mode=ro", "has a query or fragment"),
        ("file:", "has no path"),
        ("memory:/x", "'memory:' has no path"),
    ],
)
def test_bad_urls_are_refused_saying_what_to_write(url: str, message: str) -> None:
    with pytest.raises(GraphConfigError, match=message):
        open_memory(url)


def test_a_url_that_is_not_a_string_is_refused() -> None:
    with pytest.raises(GraphConfigError, match="takes a URL string"):
        open_memory(Path("m.db"))  # type: ignore[arg-type]


def test_a_bad_schema_or_ttl_is_refused() -> None:
    with pytest.raises(GraphConfigError, match="not a plain SQL name"):
        PostgresMemoryStore("postgresql://u@h/db", schema="a; drop")
    with pytest.raises(GraphConfigError, match="ttl= takes seconds"):
        InMemoryMemoryStore(ttl=0)
    with pytest.raises(GraphConfigError, match="embeddings= takes an Embeddings"):
        InMemoryMemoryStore(embeddings=lambda texts: [])  # type: ignore[arg-type]
