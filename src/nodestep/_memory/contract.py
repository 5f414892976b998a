"""``MemoryStore``: the interface of the long-term memory store, and what its back ends give.

Each operation is written once, as blocking code over a back end's few row operations
(``_read``, ``_upsert``, ``_remove``, ``_rows``, ``_touch``, ``_sweep``); the async method
runs it through ``_call`` (in the caller's thread for the local stores, as the SQLite
state store does, in a worker thread for PostgreSQL) and the ``_sync`` form calls it
directly. Embedding, the one step that may wait on a model, happens before: awaited in
the async methods, called in the sync forms.

Why TTLs are checked at every read rather than only swept: an item past its time must
never come back, whether or not a ``sweep`` ran; the sweep only frees the space.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from functools import partial
from types import TracebackType
from typing import Any, TypeVar

from nodestep._errors import GraphConfigError
from nodestep._memory.embeddings import Embeddings, best_cosine, index_texts
from nodestep._memory.filters import check_filter, matches
from nodestep._memory.items import (
    Item,
    Row,
    SearchItem,
    check_key,
    check_namespace,
    check_prefix,
    check_ttl,
    check_value,
)

__all__ = ["MemoryStore"]

T = TypeVar("T")


class _StoreTTL:
    """The default of ``put(ttl=...)``: the store's own ``ttl``."""

    def __repr__(self) -> str:
        return "<the store's ttl>"


_DEFAULT: Any = _StoreTTL()


class MemoryStore(ABC):
    """JSON items under namespaces, shared by every thread and run that opens the store.

    The graph's history never holds the store or its items: a node reads and writes them
    through ``ctx.memory`` and they are the same for every thread.

    Args:
        ttl: Seconds an item lives after it is written, unless its ``put`` says otherwise;
            ``None`` (the default) keeps items until they are deleted.
        refresh_ttl: Whether ``get`` and ``search`` restart the TTL of the items they
            return (``True``, the default: an item read is an item in use), unless the
            call says otherwise.
        embeddings: Turns texts into vectors for ``search(query=...)``; ``None`` leaves
            semantic search off.
        index_fields: The fields of a value to embed, as dotted paths (``"$"``: the whole
            value); a ``put`` may name its own.
        clock: Returns the time in epoch seconds; inject one in tests.

    Raises:
        GraphConfigError: A ``ttl`` that is not a number of seconds above 0, a
            ``refresh_ttl`` that is not a bool, a ``clock`` that is not callable, or
            ``embeddings`` that is not an ``Embeddings``.
    """

    def __init__(
        self,
        *,
        ttl: float | None = None,
        refresh_ttl: bool = True,
        embeddings: Embeddings | None = None,
        index_fields: Sequence[str] = ("$",),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ttl = check_ttl(ttl)
        if not isinstance(refresh_ttl, bool):
            # bool() would take any text as True: refresh_ttl="no" would refresh.
            raise GraphConfigError(
                f"refresh_ttl= takes True or False, got {type(refresh_ttl).__name__} "
                f"{refresh_ttl!r}."
            )
        if not callable(clock):
            raise GraphConfigError(
                f"clock= takes a function that returns the time in epoch seconds, such as "
                f"time.time or nodestep.testing.FakeTime(), got {type(clock).__name__} "
                f"{clock!r:.60}."
            )
        self.refresh_ttl = refresh_ttl
        if embeddings is not None and not isinstance(embeddings, Embeddings):
            raise GraphConfigError(
                f"embeddings= takes an Embeddings (subclass it and give embed()), got "
                f"{type(embeddings).__name__}."
            )
        self.embeddings = embeddings
        self.index_fields = _fields(index_fields)
        self.clock = clock

    # -- what a back end gives: blocking row operations ---------------------------------

    @abstractmethod
    def _read(self, namespace: tuple[str, ...], key: str) -> Row | None:
        """Return the row of ``key``, expired or not, or ``None``."""

    @abstractmethod
    def _upsert(self, row: Row) -> None:
        """Write ``row``, keeping the ``created_at`` of a row it replaces that is still live.

        Atomic: a reader, another writer or a crash sees the old row or the new one.
        """

    @abstractmethod
    def _remove(self, namespace: tuple[str, ...], key: str) -> bool:
        """Delete the row of ``key``; return whether there was one."""

    @abstractmethod
    def _rows(self, prefix: tuple[str, ...]) -> list[Row]:
        """Return every row whose namespace starts with ``prefix``, expired ones too."""

    @abstractmethod
    def _touch(self, namespace: tuple[str, ...], key: str, expires_at: float) -> None:
        """Set the expiry of ``key``'s row, if there is one."""

    @abstractmethod
    def _sweep(self, now: float) -> int:
        """Delete the rows expired at ``now``; return how many."""

    def _namespaces(self, now: float) -> set[tuple[str, ...]]:
        """Return the namespaces that hold a live item (a back end may do it faster)."""
        return {row.namespace for row in self._rows(()) if row.live(now)}

    def _close(self) -> None:  # noqa: B027 - an optional hook, empty by default
        """Release the back end's connections or files."""

    async def _call(self, fn: Callable[[], T]) -> T:
        """Run a blocking operation for an async method; in this thread by default."""
        return fn()

    # -- put --------------------------------------------------------------------------

    async def put(
        self,
        namespace: Sequence[str],
        key: str,
        value: dict[str, Any],
        *,
        index: Sequence[str] | bool | None = None,
        ttl: float | None = _DEFAULT,
    ) -> None:
        """Store ``value`` under ``key`` in ``namespace``, replacing what was there.

        Args:
            namespace: The namespace, a tuple of labels such as ``("users", "u-1")``.
            key: The key, a non-empty string.
            value: A JSON object. It is checked before anything is written.
            index: The fields to embed for semantic search; ``None``: the store's
                ``index_fields``; ``False``: none.
            ttl: Seconds the item lives; default the store's ``ttl``; ``None``: for ever.

        Raises:
            GraphConfigError: A bad namespace, key, ttl or value (the message names the
                key, the place in the value and the type found); nothing was written.
            StateStoreError: The back end could not write.
        """
        ns, key, value, ttl_s, fields = self._put_args(namespace, key, value, index, ttl)
        vectors = await self._aembed(value, fields)
        await self._call(partial(self._put, ns, key, value, ttl_s, vectors))

    def put_sync(
        self,
        namespace: Sequence[str],
        key: str,
        value: dict[str, Any],
        *,
        index: Sequence[str] | bool | None = None,
        ttl: float | None = _DEFAULT,
    ) -> None:
        """Run ``put`` from sync code; see ``put`` for the arguments."""
        ns, key, value, ttl_s, fields = self._put_args(namespace, key, value, index, ttl)
        vectors = self._embed(value, fields)
        self._put(ns, key, value, ttl_s, vectors)

    def _put_args(
        self, namespace: Any, key: Any, value: Any, index: Any, ttl: Any
    ) -> tuple[tuple[str, ...], str, dict[str, Any], float | None, Sequence[str]]:
        ns = check_namespace(namespace)
        key = check_key(key)
        value = check_value(key, value)
        ttl_s = self.ttl if ttl is _DEFAULT else check_ttl(ttl)
        if index is None or index is True:
            fields: Sequence[str] = self.index_fields if self.embeddings is not None else ()
        elif index is False:
            fields = ()
        else:
            fields = _fields(index)
            if fields and self.embeddings is None:
                raise GraphConfigError(
                    f"put(..., index={list(fields)!r}) for key {key!r} asks to embed fields, "
                    f"but the store has no embeddings=; give the store an Embeddings."
                )
        return ns, key, value, ttl_s, fields

    def _put(
        self,
        ns: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        ttl: float | None,
        vectors: list[list[float]],
    ) -> None:
        now = self.clock()
        expires = None if ttl is None else now + ttl
        self._upsert(Row(ns, key, value, now, now, ttl, expires, vectors))

    async def _aembed(self, value: dict[str, Any], fields: Sequence[str]) -> list[list[float]]:
        texts = index_texts(value, fields) if fields else []
        if not texts or self.embeddings is None:
            return []
        return _vectors(await self.embeddings.aembed(texts), len(texts))

    def _embed(self, value: dict[str, Any], fields: Sequence[str]) -> list[list[float]]:
        texts = index_texts(value, fields) if fields else []
        if not texts or self.embeddings is None:
            return []
        return _vectors(self.embeddings.embed(texts), len(texts))

    # -- get, delete --------------------------------------------------------------------

    async def get(
        self, namespace: Sequence[str], key: str, *, refresh_ttl: bool | None = None
    ) -> Item | None:
        """Return the item under ``key`` in ``namespace``, or ``None``; never an expired one.

        Args:
            namespace: The namespace.
            key: The key.
            refresh_ttl: Restart the item's TTL; default the store's ``refresh_ttl``.

        Returns:
            The item, or ``None`` when there is none (or it expired).

        Raises:
            GraphConfigError: A bad namespace or key.
            StateStoreError: The back end could not read.
        """
        ns, key = check_namespace(namespace, lookup=True), check_key(key, lookup=True)
        return await self._call(partial(self._get, ns, key, _refresh(refresh_ttl)))

    def get_sync(
        self, namespace: Sequence[str], key: str, *, refresh_ttl: bool | None = None
    ) -> Item | None:
        """Run ``get`` from sync code; see ``get`` for the arguments."""
        ns, key = check_namespace(namespace, lookup=True), check_key(key, lookup=True)
        return self._get(ns, key, _refresh(refresh_ttl))

    def _get(self, ns: tuple[str, ...], key: str, refresh: bool | None) -> Item | None:
        now = self.clock()
        row = self._read(ns, key)
        if row is None or not row.live(now):
            return None
        if row.ttl is not None and (self.refresh_ttl if refresh is None else refresh):
            self._touch(ns, key, now + row.ttl)
        return row.item()

    async def delete(self, namespace: Sequence[str], key: str) -> bool:
        """Delete the item under ``key`` in ``namespace``.

        Returns:
            Whether there was an item (an expired one counts as none).

        Raises:
            GraphConfigError: A bad namespace or key.
            StateStoreError: The back end could not write.
        """
        ns, key = check_namespace(namespace, lookup=True), check_key(key, lookup=True)
        return await self._call(partial(self._delete, ns, key))

    def delete_sync(self, namespace: Sequence[str], key: str) -> bool:
        """Run ``delete`` from sync code; see ``delete``."""
        ns, key = check_namespace(namespace, lookup=True), check_key(key, lookup=True)
        return self._delete(ns, key)

    def _delete(self, ns: tuple[str, ...], key: str) -> bool:
        row = self._read(ns, key)
        removed = self._remove(ns, key)
        return removed and row is not None and row.live(self.clock())

    # -- search -------------------------------------------------------------------------

    async def search(
        self,
        prefix: Sequence[str] = (),
        *,
        query: str | None = None,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
    ) -> list[SearchItem]:
        """Return the items under a namespace prefix that match ``filter``, best first.

        Without ``query`` the order is by namespace, then key; with one, by the score (the
        best cosine similarity of an item's indexed fields to the query), highest first,
        then by namespace and key; items with nothing indexed come last, scored ``None``.

        Args:
            prefix: The namespace prefix; ``()`` searches every namespace.
            query: A text to rank by meaning; needs a store with ``embeddings=``.
            filter: Conditions on value fields (see ``nodestep.memory``'s docs), e.g.
                ``{"kind": "note", "stars": {"$gte": 3}}``.
            limit: The most items to return.
            offset: How many of the ordered items to skip first.
            refresh_ttl: Restart the TTL of the items returned; default the store's.

        Returns:
            The items, as ``SearchItem``\\ s.

        Raises:
            GraphConfigError: A bad prefix, filter, limit or offset, or a query on a
                store without embeddings.
            StateStoreError: The back end could not read.
        """
        pre, flt = _search_args(prefix, filter, limit, offset)
        vector = None
        if query is not None:
            vector = _vectors(await self._embedder(query).aembed([query]), 1)[0]
        found = partial(self._search, pre, flt, vector, limit, offset, _refresh(refresh_ttl))
        return await self._call(found)

    def search_sync(
        self,
        prefix: Sequence[str] = (),
        *,
        query: str | None = None,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
    ) -> list[SearchItem]:
        """Run ``search`` from sync code; see ``search`` for the arguments."""
        pre, flt = _search_args(prefix, filter, limit, offset)
        vector = None
        if query is not None:
            vector = _vectors(self._embedder(query).embed([query]), 1)[0]
        return self._search(pre, flt, vector, limit, offset, _refresh(refresh_ttl))

    def _embedder(self, query: Any) -> Embeddings:
        if not isinstance(query, str):
            raise GraphConfigError(f"search(query=...) takes a text, got {query!r}.")
        if self.embeddings is None:
            raise GraphConfigError(
                f"search(query={query!r}) ranks by meaning, but the store has no "
                f"embeddings=; give it an Embeddings, or search with filter= alone."
            )
        return self.embeddings

    def _search(
        self,
        prefix: tuple[str, ...],
        filter: dict[str, Any],
        vector: list[float] | None,
        limit: int,
        offset: int,
        refresh: bool | None,
    ) -> list[SearchItem]:
        now = self.clock()
        rows = [r for r in self._rows(prefix) if r.live(now) and matches(r.value, filter)]
        if vector is not None:
            _check_lengths(vector, rows)
        scored = [(None if vector is None else best_cosine(vector, r.vectors), r) for r in rows]
        scored.sort(key=lambda s: (s[0] is None, -(s[0] or 0.0), s[1].namespace, s[1].key))
        page = scored[offset : offset + limit]
        if self.refresh_ttl if refresh is None else refresh:
            for _, row in page:
                if row.ttl is not None:
                    self._touch(row.namespace, row.key, now + row.ttl)
        return [row.found(score) for score, row in page]

    # -- namespaces, sweep, close -------------------------------------------------------

    async def list_namespaces(
        self,
        *,
        prefix: Sequence[str] = (),
        suffix: Sequence[str] = (),
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        """Return the namespaces that hold items, sorted.

        Args:
            prefix: Only namespaces that start with these labels.
            suffix: Only namespaces that end with these labels.
            max_depth: Cut longer namespaces to their first ``max_depth`` labels (the cut
                namespaces are listed once).
            limit: The most namespaces to return.
            offset: How many of the sorted namespaces to skip first.

        Raises:
            GraphConfigError: A bad prefix, suffix, depth, limit or offset.
            StateStoreError: The back end could not read.
        """
        args = self._namespace_args(prefix, suffix, max_depth, limit, offset)
        return await self._call(partial(self._list_namespaces, *args))

    def list_namespaces_sync(
        self,
        *,
        prefix: Sequence[str] = (),
        suffix: Sequence[str] = (),
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        """Run ``list_namespaces`` from sync code; see ``list_namespaces``."""
        return self._list_namespaces(
            *self._namespace_args(prefix, suffix, max_depth, limit, offset)
        )

    @staticmethod
    def _namespace_args(
        prefix: Any, suffix: Any, max_depth: Any, limit: Any, offset: Any
    ) -> tuple[tuple[str, ...], tuple[str, ...], int | None, int, int]:
        pre = check_prefix(prefix)
        suf = check_prefix(suffix, "namespace suffix")
        if max_depth is not None and (
            isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 1
        ):
            raise GraphConfigError(
                f"list_namespaces(max_depth=...) takes a whole number of 1 or more, or None; "
                f"got {max_depth!r}."
            )
        _check_page(limit, offset)
        return pre, suf, max_depth, limit, offset

    def _list_namespaces(
        self,
        prefix: tuple[str, ...],
        suffix: tuple[str, ...],
        max_depth: int | None,
        limit: int,
        offset: int,
    ) -> list[tuple[str, ...]]:
        found = set()
        for ns in self._namespaces(self.clock()):
            if ns[: len(prefix)] != prefix or (suffix and ns[-len(suffix) :] != suffix):
                continue
            found.add(ns if max_depth is None else ns[:max_depth])
        return sorted(found)[offset : offset + limit]

    async def sweep(self) -> int:
        """Delete the expired items, freeing their space; return how many.

        Expired items are never returned whether or not a sweep ran: call it now and
        then (a worker's timer, a cron job) to keep the store small.
        """
        return await self._call(lambda: self._sweep(self.clock()))

    def sweep_sync(self) -> int:
        """Run ``sweep`` from sync code."""
        return self._sweep(self.clock())

    async def aclose(self) -> None:
        """Close the store's connections or files; a later call opens them again."""
        await self._call(self._close)

    def close(self) -> None:
        """Close the store from sync code; see ``aclose``."""
        self._close()

    async def __aenter__(self) -> MemoryStore:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _fields(fields: Any) -> tuple[str, ...]:
    if isinstance(fields, str) or not isinstance(fields, Sequence):
        raise GraphConfigError(
            f"The fields to index are a list of dotted paths such as ['text', 'author.bio'] "
            f"('$': the whole value), got {fields!r}."
        )
    for f in fields:
        if not isinstance(f, str) or not f:
            raise GraphConfigError(f"A field to index is a non-empty dotted path, got {f!r}.")
    return tuple(fields)


def _vectors(vectors: Any, count: int) -> list[list[float]]:
    """Return the embedder's vectors as lists of floats, or refuse a wrong answer.

    Why each number is checked: a nan would make every score it touches nan, which sorts
    nowhere in particular, and a vector of another length would be compared over the
    shorter one's numbers only.
    """
    if not isinstance(vectors, list | tuple) or len(vectors) != count:
        raise GraphConfigError(
            f"The memory store's embeddings returned {vectors!r:.80} for {count} texts; "
            f"embed() returns one vector (a list of floats) per text."
        )
    out = []
    for v in vectors:
        try:
            floats = [float(x) for x in v]
        except (TypeError, ValueError):
            floats = []
        if not floats or not all(math.isfinite(x) for x in floats):
            raise GraphConfigError(
                f"The memory store's embeddings returned the vector {v!r:.80}; embed() "
                f"returns for each text a non-empty list of finite floats."
            )
        out.append(floats)
    if len({len(v) for v in out}) > 1:
        raise GraphConfigError(
            f"The memory store's embeddings returned vectors of {sorted({len(v) for v in out})} "
            f"numbers for one call; embed() returns vectors all of the same length."
        )
    return out


def _check_lengths(query: list[float], rows: list[Row]) -> None:
    """Refuse a query whose vector is not as long as the items' vectors.

    Raises:
        GraphConfigError: naming an item embedded with vectors of another length, as
            after a change of the store's embeddings.
    """
    for row in rows:
        for v in row.vectors:
            if len(v) != len(query):
                raise GraphConfigError(
                    f"The memory item {row.key!r} in {row.namespace!r} was embedded as "
                    f"vectors of {len(v)} numbers, and the query as one of {len(query)}: the "
                    f"store's embeddings changed since it was put. Put the items again to "
                    f"embed them anew, or search with the embeddings they were put with."
                )


def _search_args(
    prefix: Sequence[str], filter: dict[str, Any] | None, limit: Any, offset: Any
) -> tuple[tuple[str, ...], dict[str, Any]]:
    """Return ``search``'s checked prefix and filter, once the page is checked too."""
    pre, flt = check_prefix(prefix), check_filter(filter)
    _check_page(limit, offset)
    return pre, flt


def _refresh(refresh_ttl: Any) -> bool | None:
    """Return a call's ``refresh_ttl``, or refuse one that is neither a bool nor ``None``."""
    if refresh_ttl is None or isinstance(refresh_ttl, bool):
        return refresh_ttl
    raise GraphConfigError(
        f"refresh_ttl= takes True, False or None (the store's setting), got "
        f"{type(refresh_ttl).__name__} {refresh_ttl!r}."
    )


def _check_page(limit: Any, offset: Any) -> None:
    for name, n in (("limit", limit), ("offset", offset)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise GraphConfigError(f"{name}= takes a whole number of 0 or more, got {n!r}.")
