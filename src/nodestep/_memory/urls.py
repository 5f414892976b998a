"""``open_memory``: a memory store chosen by a URL, as ``open_store`` chooses a state store.

==============================  =====================================================
``memory:``                     ``InMemoryMemoryStore()``
``file:///var/app/m.jsonl``     ``FilesystemMemoryStore("/var/app/m.jsonl")``
``sqlite:///var/app/m.db``      ``SQLiteMemoryStore("/var/app/m.db")``
``postgresql://u@host/db``      ``PostgresMemoryStore(...)`` (also ``postgres://``)
==============================  =====================================================

``file:`` and ``sqlite:`` take a relative path too (``sqlite:m.db``). A local URL takes
no query parameters: the store's options are keyword arguments, and a parameter is
refused by name rather than dropped.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

from nodestep._display.store_options import unknown_store_option
from nodestep._errors import GraphConfigError
from nodestep._memory.contract import MemoryStore

__all__ = ["MEMORY_SCHEMES", "open_memory"]


def _memory(path: str, options: dict[str, Any]) -> MemoryStore:
    from nodestep._memory.in_memory import InMemoryMemoryStore

    return InMemoryMemoryStore(**options)


def _file(path: str, options: dict[str, Any]) -> MemoryStore:
    from nodestep._memory.filesystem import FilesystemMemoryStore

    return FilesystemMemoryStore(path, **options)


def _sqlite(path: str, options: dict[str, Any]) -> MemoryStore:
    from nodestep._memory.sqlite import SQLiteMemoryStore

    return SQLiteMemoryStore(path, **options)


def _postgres(url: str, options: dict[str, Any]) -> MemoryStore:
    from nodestep._memory.postgres import PostgresMemoryStore

    return PostgresMemoryStore(url, **options)


def _store_class(opener: Any) -> tuple[str, type[MemoryStore]]:
    """Return the kind of store ``opener`` makes, as a message names it, and its class."""
    from nodestep._memory.filesystem import FilesystemMemoryStore
    from nodestep._memory.in_memory import InMemoryMemoryStore
    from nodestep._memory.postgres import PostgresMemoryStore  # imports without psycopg
    from nodestep._memory.sqlite import SQLiteMemoryStore

    classes: dict[Any, tuple[str, type[MemoryStore]]] = {
        _memory: ("an in-memory store", InMemoryMemoryStore),
        _file: ("a file store", FilesystemMemoryStore),
        _sqlite: ("a SQLite store", SQLiteMemoryStore),
        _postgres: ("a PostgreSQL store", PostgresMemoryStore),
    }
    return classes[opener]


def _keywords(cls: type[MemoryStore]) -> list[str]:
    """Return the keyword options of ``cls``: its own, and ``MemoryStore``'s it passes on."""
    names = set()
    for each in (cls, MemoryStore):
        parameters = inspect.signature(each).parameters.values()
        names |= {p.name for p in parameters if p.kind is p.KEYWORD_ONLY}
    return sorted(names)


def _check_options(url: str, opener: Any, options: dict[str, Any]) -> None:
    """Refuse an option the store's class does not take, before anything is opened.

    Raises:
        TypeError: An unknown option (as Python's own for a keyword argument), named with
            the options the store takes.
    """
    store = _store_class(opener)
    taken = _keywords(store[1])
    name = next((name for name in options if name not in taken), None)
    if name is None:
        return
    # A PostgreSQL URL may hold a password: only its scheme is shown.
    shown = f"'{url.partition(':')[0]}://...'" if opener is _postgres else repr(url)
    url_gives = "dsn" if opener is _postgres else "path"
    raise unknown_store_option(f"open_memory({shown})", name, store, taken, url_gives)


MEMORY_SCHEMES: dict[str, Callable[[str, dict[str, Any]], MemoryStore]] = {
    "memory": _memory,
    "file": _file,
    "sqlite": _sqlite,
    "postgresql": _postgres,
    "postgres": _postgres,
}
"""The URL schemes ``open_memory`` knows, and how each opens its store."""


def open_memory(url: str, **options: Any) -> MemoryStore:
    """Open the memory store a URL names (the table in ``nodestep.memory``'s docs).

    Args:
        url: ``memory:``, ``file:///path.jsonl``, ``sqlite:///path.db`` or
            ``postgresql://user@host/db``.
        **options: Keyword arguments for the store's class, e.g. ``ttl=3600`` or
            ``embeddings=...``.

    Returns:
        The store; close it with ``await store.aclose()`` (or ``store.close()``).

    Raises:
        GraphConfigError: Not a URL, an unknown scheme (the message lists the known
            ones), a local URL with a host, a query or no path, or a missing extra.
        TypeError: An option the store does not take (the message lists those it takes).
    """
    if not isinstance(url, str):
        raise GraphConfigError(
            f"open_memory takes a URL string such as 'sqlite:///memory.db', got "
            f"{type(url).__name__} {url!r}"
        )
    scheme, colon, _ = url.partition(":")
    opener = MEMORY_SCHEMES.get(scheme.lower()) if colon else None
    if opener is None:
        known = ", ".join(f"'{s}:'" for s in MEMORY_SCHEMES)
        raise GraphConfigError(
            f"Memory store URL {url!r} has an unknown scheme "
            f"{repr(scheme + ':') if colon else '(none)'}; nodestep knows {known}, e.g. "
            f"'sqlite:///var/app/memory.db'."
        )
    _check_options(url, opener, options)
    if opener is _postgres:
        return opener(url, options)
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise GraphConfigError(
            f"Memory store URL {url!r} names host {parts.netloc!r}; a {scheme} store is "
            f"local: write '{scheme}:///absolute/path' or '{scheme}:relative/path'."
        )
    if parts.query or parts.fragment:
        raise GraphConfigError(
            f"Memory store URL {url!r} has a query or fragment; a {scheme} URL takes none, "
            f"and nodestep never drops one silently: pass options as keyword arguments, "
            f"e.g. open_memory(url, ttl=3600)."
        )
    path = unquote(parts.path)
    if path.startswith("//"):
        path = "/" + path.lstrip("/")
    if opener is _memory and path:
        raise GraphConfigError(f"Memory store URL {url!r}: 'memory:' has no path.")
    if opener is not _memory and not path:
        raise GraphConfigError(
            f"Memory store URL {url!r} has no path; write e.g. '{scheme}:///var/app/memory"
            f"{'.db' if opener is _sqlite else '.jsonl'}'."
        )
    return opener(path, options)
