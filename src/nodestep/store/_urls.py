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

One rule for query parameters, on every scheme: a parameter is honoured or refused, never
dropped. The local stores (``memory:``, ``file:``, ``sqlite:``) take none: their options
are keyword arguments (``open_store("file:h.jsonl", read_only=True)``), so a URL with
``?mode=ro`` is refused, naming the parameter and the store's keyword options. A
PostgreSQL URL's parameters are libpq's (``sslmode``, ``connect_timeout``, ...), checked by
libpq's own parser before the store is made; one libpq does not know is refused by name.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from nodestep._display.store_options import unknown_store_option
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
    from nodestep.store._sql.postgres import PostgresStateStore, safe

    try:
        store = PostgresStateStore(url, **options)
    except ImportError as e:
        raise GraphConfigError(
            f"Store URL {url.split('@')[-1]!r} names a PostgreSQL store, which needs psycopg 3 "
            f"({e.name} is not installed): pip install 'nodestep[postgres]'"
        ) from e
    problem = _libpq_problem(url)
    if problem:
        raise GraphConfigError(
            f"Store URL {safe(url)!r}: {problem}. A PostgreSQL URL's query parameters are "
            f"libpq's connection parameters (sslmode, connect_timeout, application_name, "
            f"options, target_session_attrs, ...); the store's own options are keyword "
            f"arguments: open_store(url, schema='app')."
        )
    return store


def _libpq_problem(url: str) -> str:
    """Return what libpq's parser refuses in ``url``, or ``""``; never the URL's text.

    libpq's message may quote a value (the password, say), so only a parameter's name
    is taken from it.
    """
    from psycopg import Error
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(url)
    except Error as error:
        named = re.search(r'(?:query parameter|connection option):? "(\w+)"', str(error))
        if named:
            return f"libpq does not know the query parameter {named.group(1)!r}"
        return "libpq cannot read the URL (a percent-encoded value it refuses, such as %00?)"
    return ""


def _query_problem(url: str, scheme: str, query: str, fragment: str, opener: Any) -> str:
    """Return why a local store's URL cannot carry ``query`` or ``fragment``, or ``""``."""
    if fragment:
        return f"has the fragment '#{fragment}', which names nothing in a store; remove it"
    if not query:
        return ""
    names = sorted({name for name, _ in parse_qsl(query, keep_blank_values=True)} or {query})
    shown = ", ".join(repr(n) for n in names)
    kind = "parameter" if len(names) == 1 else "parameters"
    keywords = ", ".join(f"{k}=" for k in _keywords(opener)) or "(none)"
    hint = ""
    if "mode" in names and "read_only=" in keywords:
        hint = " For a store that only reads: open_store(url, read_only=True)."
    return (
        f"has the query {kind} {shown}; a {scheme} URL takes no query parameters, and "
        f"nodestep never drops one silently. Pass the store's options as keyword arguments "
        f"instead; its options: {keywords}.{hint}"
    )


def _store_class(opener: Any) -> tuple[str, type[StateStore]]:
    """Return the kind of store ``opener`` makes, as a message names it, and its class."""
    from nodestep.store._file.store import FilesystemStateStore
    from nodestep.store._memory import InMemoryStateStore
    from nodestep.store._sql.postgres import PostgresStateStore  # imports without psycopg
    from nodestep.store._sql.sqlite import SQLiteStateStore

    classes: dict[Any, tuple[str, type[StateStore]]] = {
        _memory: ("a memory store", InMemoryStateStore),
        _file: ("a file store", FilesystemStateStore),
        _sqlite: ("a SQLite store", SQLiteStateStore),
        _postgres: ("a PostgreSQL store", PostgresStateStore),
    }
    return classes[opener]


def _keywords(opener: Any) -> list[str]:
    """Return the keyword options of the store ``opener`` makes."""
    parameters = inspect.signature(_store_class(opener)[1]).parameters.values()
    return sorted(p.name for p in parameters if p.kind is p.KEYWORD_ONLY)


def _check_options(url: str, opener: Any, options: dict[str, Any]) -> None:
    """Refuse an option the store's class does not take, before anything is opened.

    Raises:
        TypeError: An unknown option (as Python's own for a keyword argument), named with
            the options the store takes.
    """
    taken = _keywords(opener)
    unknown = [name for name in options if name not in taken]
    if not unknown:
        return
    from nodestep.store._sql.postgres import safe

    url_gives = "dsn" if opener is _postgres else "path"
    call = f"open_store({safe(url)!r})"
    raise unknown_store_option(call, unknown[0], _store_class(opener), taken, url_gives)


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
        TypeError: An option the store does not take (the message lists those it takes).
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
        problem = _query_problem(url, scheme, parts.query, parts.fragment, opener)
        if problem:
            raise GraphConfigError(f"Store URL {url!r} {problem}")
        path = unquote(parts.path)
        control = next((c for c in path if ord(c) < 32 or ord(c) == 127), None)
        if control is not None:
            raise GraphConfigError(
                f"Store URL {url!r} has a control character (\\x{ord(control):02x}) in its "
                f"path once percent-decoded; a file name cannot hold one. Check the "
                f"percent-encoded characters of the path (%00 is NUL)."
            )
        if path.startswith("//"):  # SQLAlchemy's four slashes: the same absolute path
            path = "/" + path.lstrip("/")
        if not path and opener is not _memory:
            raise GraphConfigError(
                f"Store URL {url!r} has no path; write e.g. '{scheme}:///var/app/history"
                f"{'.db' if scheme == 'sqlite' else '.jsonl'}'."
            )
    _check_options(url, opener, options)
    return opener(url, path, options)
