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


@pytest.mark.parametrize(
    ("url", "options", "expected"),
    [
        (
            "memory:",
            {"ttl_": 60},
            "open_memory('memory:') got the option ttl_=, which an in-memory store "
            "(InMemoryMemoryStore) does not take. It takes clock=, embeddings=, "
            "index_fields=, refresh_ttl=, ttl=. Did you mean ttl=?",
        ),
        (
            "sqlite:m.db",
            {"ttl": 60, "fsync": True},
            "open_memory('sqlite:m.db') got the option fsync=, which a SQLite store "
            "(SQLiteMemoryStore) does not take. It takes clock=, embeddings=, index_fields=, "
            "refresh_ttl=, synchronous=, timeout=, ttl=. Leave it out.",
        ),
        (
            "file:m.jsonl",
            {"path": "other.jsonl"},
            "open_memory('file:m.jsonl') got the option path=, which a file store "
            "(FilesystemMemoryStore) does not take. It takes clock=, embeddings=, fsync=, "
            "index_fields=, refresh_ttl=, ttl=. The URL gives the store its path: leave "
            "path= out.",
        ),
        (
            "postgresql://app:secret@db.example/app",
            {"schemas": "app"},
            "open_memory('postgresql://...') got the option schemas=, which a PostgreSQL "
            "store (PostgresMemoryStore) does not take. It takes clock=, embeddings=, "
            "index_fields=, refresh_ttl=, schema=, ttl=. Did you mean schema=?",
        ),
    ],
)
def test_an_option_the_store_does_not_take_is_named_with_those_it_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, options: dict, expected: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TypeError) as caught:
        open_memory(url, **options)
    assert str(caught.value) == expected
    assert list(tmp_path.iterdir()) == []  # nothing was created
