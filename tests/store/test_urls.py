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


@pytest.mark.parametrize("url", ["sqlite:%00evil.db", "file:///tmp/a%00b.jsonl", "sqlite:a%0Ab.db"])
def test_a_path_with_a_nul_or_control_character_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(GraphConfigError, match=r"a control character \(\\x[0-9a-f]{2}\)") as e:
        open_store(url)
    assert "percent-encoded" in str(e.value)


@pytest.mark.parametrize(
    ("url", "named", "known"),
    [
        ("sqlite:h.db?mode=ro", "'mode'", "synchronous=, timeout="),
        ("sqlite:h.db?cache=shared&mode=ro", "'cache', 'mode'", "synchronous="),
        ("file:h.jsonl?mode=ro", "'mode'", "fsync=, read_only="),
        ("memory:?x=1", "'x'", "(none)"),
    ],
)
def test_a_query_parameter_of_a_local_store_is_refused_naming_it_and_the_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, named: str, known: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(GraphConfigError) as caught:
        open_store(url)
    message = str(caught.value)
    assert f"has the query parameter {named}" in message or f"parameters {named}" in message
    assert known in message
    assert list(tmp_path.iterdir()) == []  # nothing was created


def test_mode_ro_on_a_file_url_names_read_only(tmp_path: Path) -> None:
    with pytest.raises(GraphConfigError, match=r"open_store\(url, read_only=True\)"):
        open_store(f"file://{tmp_path}/h.jsonl?mode=ro")


def test_a_fragment_is_refused_as_a_query_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(GraphConfigError, match="fragment '#part'"):
        open_store("sqlite:h.db#part")  # refused before anything is created


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("postgresql://app:pw-9z@db.example/app?mode=ro", "'mode'"),
        ("postgres://app:pw-9z@db.example/app?sslmode=require&colour=red", "'colour'"),
    ],
)
def test_a_postgres_url_with_a_parameter_libpq_does_not_know_is_refused_naming_it(
    url: str, named: str
) -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(GraphConfigError, match=f"query parameter {named}") as caught:
        open_store(url)
    assert "pw-9z" not in str(caught.value)
    assert "sslmode" in str(caught.value)  # the known ones: libpq's connection parameters


def test_a_postgres_url_libpq_cannot_parse_is_refused_without_its_password() -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(GraphConfigError, match="libpq cannot read") as caught:
        open_store("postgresql://app:pw%00x@db.example/app")
    assert "pw" not in str(caught.value).replace("postgresql", "")


@pytest.mark.parametrize(
    ("url", "options", "expected"),
    [
        (
            "memory:",
            {"fsync": True},
            "open_store('memory:') got the option fsync=, which a memory store "
            "(InMemoryStateStore) does not take. It takes no options. Leave it out.",
        ),
        (
            "file:h.jsonl",
            {"read_onyl": True},
            "open_store('file:h.jsonl') got the option read_onyl=, which a file store "
            "(FilesystemStateStore) does not take. It takes fsync=, read_only=. "
            "Did you mean read_only=?",
        ),
        (
            "sqlite:h.db",
            {"path": "other.db"},
            "open_store('sqlite:h.db') got the option path=, which a SQLite store "
            "(SQLiteStateStore) does not take. It takes check=, synchronous=, timeout=. The "
            "URL gives the store its path: leave path= out.",
        ),
        (
            "postgresql://app:secret@db.example/app",
            {"schema": "app", "schem": "app"},
            "open_store('postgresql://app:***@db.example/app') got the option schem=, which a "
            "PostgreSQL store (PostgresStateStore) does not take. It takes create_schema=, "
            "max_size=, min_size=, pipeline=, schema=, timeout=. Did you mean schema=?",
        ),
    ],
)
def test_an_option_the_store_does_not_take_is_named_with_those_it_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, options: dict, expected: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TypeError) as caught:
        open_store(url, **options)
    assert str(caught.value) == expected
    assert list(tmp_path.iterdir()) == []  # nothing was created
