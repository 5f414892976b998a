"""The long-term memory store endpoints: ``/store/items`` and ``/store/namespaces``.

They serve a ``nodestep.memory`` store with the shapes of ``client.store.*`` in
langgraph-sdk: items as ``{namespace, key, value, created_at, updated_at}`` (and ``score``
in a search), a namespace as a list of labels, a TTL in minutes (nodestep counts seconds).
The runs' nodes see the same store as ``ctx.memory``, so what an agent remembers is what
a client reads here, and the other way round.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from nodestep.memory import InMemoryMemoryStore, MemoryStore, open_memory
from nodestep.serve._bodies import (
    ApiError,
    StoreDelete,
    StoreNamespaces,
    StorePut,
    StoreSearch,
    parse,
    read_json,
)
from nodestep.serve._service import Service

__all__ = ["memory_beside", "routes"]


def memory_beside(store: str | None, default: Path) -> MemoryStore:
    """Return the memory store that goes with the state store at ``store`` (a URL).

    An SQLite or file store gets a file of its own next to it (``threads.memory.db`` beside
    ``threads.db``); a PostgreSQL store the same database (the memory store has a table of
    its own); ``memory:`` a memory store in the process.

    Args:
        store: The state store's URL, or ``None`` for ``default``'s SQLite file.
        default: The SQLite file the server uses when no store is given.
    """
    url = f"sqlite://{default.resolve()}" if store is None else store
    scheme = url.partition(":")[0].lower()
    if scheme in ("postgresql", "postgres"):
        return open_memory(url)
    if scheme not in ("sqlite", "file"):
        return InMemoryMemoryStore()
    path = Path(urlsplit(url).path)
    beside = path.with_name(f"{path.stem}.memory{path.suffix}")
    absolute = url.lower().startswith(f"{scheme}://")
    return open_memory(f"{scheme}://{beside}" if absolute else f"{scheme}:{beside}")


def _service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


def _memory(request: Request) -> MemoryStore:
    memory = _service(request).memory
    if memory is None:
        raise ApiError(
            404, "This server has no memory store: start it with one (--memory URL, or memory=)."
        )
    return memory


def _namespace(labels: list[str], field: str) -> tuple[str, ...]:
    """Return a namespace, refusing labels LangGraph's server refuses (empty, or with '.')."""
    for label in labels:
        if not label or "." in label:
            raise ApiError(
                422,
                f"{field} label {label!r} must be a non-empty string without '.', "
                f"e.g. ['users', 'u-1'].",
            )
    return tuple(labels)


def _ttl(minutes: float | None) -> float | None:
    """Return a ``ttl`` sent in minutes (as LangGraph counts) in the memory store's seconds.

    Why checked here: the store's own refusal would name seconds, and a value 60 times
    the one the client sent.

    Raises:
        ApiError: 422, not a finite number of minutes above 0.
    """
    if minutes is None:
        return None
    if not (minutes > 0 and math.isfinite(minutes * 60.0)):
        raise ApiError(
            422,
            f"ttl takes minutes, a number above 0 (or null: kept until deleted); got {minutes!r}.",
        )
    return minutes * 60.0


async def _put(request: Request) -> Response:
    body = parse(StorePut, await read_json(request, _service(request).limits.max_depth))
    namespace = _namespace(body.namespace, "namespace")
    index: Any = None if body.index is None else body.index
    await _memory(request).put(namespace, body.key, body.value, index=index, ttl=_ttl(body.ttl))
    return Response(status_code=204)


async def _get(request: Request) -> Response:
    raw = request.query_params.get("namespace", "")
    key = request.query_params.get("key")
    if not key:
        raise ApiError(
            422, "Query parameter 'key' is required: GET /store/items?namespace=a.b&key=k."
        )
    refresh = request.query_params.get("refresh_ttl")
    namespace = _namespace(raw.split(".") if raw else [], "namespace")
    item = await _memory(request).get(
        namespace, key, refresh_ttl=None if refresh is None else refresh.lower() == "true"
    )
    return JSONResponse(None if item is None else item.to_json())


async def _delete(request: Request) -> Response:
    body = parse(StoreDelete, await read_json(request, _service(request).limits.max_depth))
    await _memory(request).delete(_namespace(body.namespace, "namespace"), body.key)
    return Response(status_code=204)


async def _search(request: Request) -> Response:
    body = parse(StoreSearch, await read_json(request, _service(request).limits.max_depth))
    memory = _memory(request)
    # A store without embeddings cannot rank by meaning: as LangGraph's server without an
    # index, it answers the prefix and filter matches, unranked (score None).
    query = body.query if memory.embeddings is not None else None
    found = await memory.search(
        _namespace(body.namespace_prefix or [], "namespace_prefix"),
        query=query,
        filter=body.filter,
        limit=body.limit,
        offset=body.offset,
        refresh_ttl=body.refresh_ttl,
    )
    return JSONResponse({"items": [item.to_json() for item in found]})


async def _namespaces(request: Request) -> Response:
    body = parse(StoreNamespaces, await read_json(request, _service(request).limits.max_depth))
    found = await _memory(request).list_namespaces(
        prefix=_namespace(body.prefix or [], "prefix"),
        suffix=_namespace(body.suffix or [], "suffix"),
        max_depth=body.max_depth,
        limit=body.limit,
        offset=body.offset,
    )
    return JSONResponse({"namespaces": [list(ns) for ns in found]})


routes = [
    Route("/store/items", _put, methods=["PUT"]),
    Route("/store/items", _get, methods=["GET"]),
    Route("/store/items", _delete, methods=["DELETE"]),
    Route("/store/items/search", _search, methods=["POST"]),
    Route("/store/namespaces", _namespaces, methods=["POST"]),
]
