"""``open_store``: a store chosen by a URL, as a configuration file or an environment gives it.

==============================  =========================================================
``memory:``                     ``InMemoryStateStore()``
``file:///var/app/h.jsonl``     ``FilesystemStateStore("/var/app/h.jsonl")``
``file:h.jsonl``                the same, relative to the working directory
``sqlite:///var/app/h.db``      ``SQLiteStateStore("/var/app/h.db")`` (``sqlite:h.db``: relative)
``postgresql://u@host/db``      ``PostgresStateStore("postgresql://u@host/db")`` (also
                                ``postgres://``); needs ``pip install 'nodestep[postgres]'``
==============================  =========================================================

A path is the URL's path, percent-decoded: ``sqlite:///tmp/a.db`` is ``/tmp/a.db``, as
``file:///tmp/a.db`` is; SQLAlchemy's ``sqlite:////tmp/a.db`` names the same file.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

from nodestep._errors import GraphConfigError
from nodestep.store._contract import StateStore

__all__ = ["STORE_SCHEMES", "open_store"]


def _memory(url: str, path: str, options: dict[str, Any]) -> StateStore:
    from nodestep.store._memory import InMemoryStateStore

    if path:
        raise GraphConfigError(
            f"Store URL {url!r}: a memory store has no path; write 'memory:' alone."
        )
    return InMemoryStateStore(**options)


def _file(url: str, path: str, options: dict[str, Any]) -> StateStore:
    from nodestep.store._file.store import FilesystemStateStore

    return FilesystemStateStore(path, **options)


def _sqlite(url: str, path: str, options: dict[str, Any]) -> StateStore:
    from nodestep.store._sql.sqlite import SQLiteStateStore

    return SQLiteStateStore(path, **options)


def _postgres(url: str, path: str, options: dict[str, Any]) -> StateStore:
    from nodestep.store._sql.postgres import PostgresStateStore

    try:
        return PostgresStateStore(url, **options)
    except ImportError as e:
        raise GraphConfigError(
            f"Store URL {url.split('@')[-1]!r} names a PostgreSQL store, which needs psycopg 3 "
            f"({e.name} is not installed): pip install 'nodestep[postgres]'"
        ) from e


STORE_SCHEMES: dict[str, Callable[[str, str, dict[str, Any]], StateStore]] = {
    "memory": _memory,
    "file": _file,
    "sqlite": _sqlite,
    "postgresql": _postgres,
    "postgres": _postgres,
}
"""The URL schemes ``open_store`` knows, and how each opens its store."""


def open_store(url: str, **options: Any) -> StateStore:
    """Open the store a URL names (see the table in ``nodestep.store._urls``).

    Args:
        url: ``memory:``, ``file:///path.jsonl``, ``sqlite:///path.db`` or
            ``postgresql://user@host/db`` (any libpq URL).
        **options: Keyword arguments for the store's class, e.g. ``fsync=True`` for a
            file store or ``schema="app"`` for a PostgreSQL one.

    Returns:
        The store, open; close it with ``await store.aclose()``.

    Raises:
        GraphConfigError: The scheme is unknown (the message lists the known ones), a path
            is missing, or the store's extra is not installed (the message names it).
    """
    if not isinstance(url, str):
        raise GraphConfigError(
            f"open_store takes a URL string such as 'sqlite:///app.db', got "
            f"{type(url).__name__} {url!r}"
        )
    scheme, colon, _ = url.partition(":")
    opener = STORE_SCHEMES.get(scheme.lower()) if colon else None
    if opener is None:
        known = ", ".join(f"'{s}:'" for s in STORE_SCHEMES)
        shown = f"'{scheme}:'" if colon else "(none)"
        raise GraphConfigError(
            f"Store URL {url!r} has an unknown scheme {shown}; "
            f"nodestep knows {known}, e.g. 'sqlite:///var/app/history.db'."
        )
    path = ""
    if opener is not _postgres:
        parts = urlsplit(url)
        if parts.netloc not in ("", "localhost"):
            raise GraphConfigError(
                f"Store URL {url!r} names host {parts.netloc!r}; a {scheme} store is a local "
                f"file: write '{scheme}:///absolute/path' or '{scheme}:relative/path'."
            )
        path = unquote(parts.path)
        if path.startswith("//"):  # SQLAlchemy's four slashes: the same absolute path
            path = "/" + path.lstrip("/")
        if not path and opener is not _memory:
            raise GraphConfigError(
                f"Store URL {url!r} has no path; write e.g. '{scheme}:///var/app/history"
                f"{'.db' if scheme == 'sqlite' else '.jsonl'}'."
            )
    return opener(url, path, options)
