"""The ASGI app: the routes of every concern behind the security gate.

``create_app`` puts the parts together: a ``Service`` (graphs, store, rows, executor) on
``app.state``, the routes of the assistants, threads and runs, the error handlers that
turn every refusal into ``{"detail": ...}`` JSON, and the ``Gate`` in front. The lifespan
loads the stored rows, starts the task group runs execute in, and continues the runs a
previous server left pending.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from nodestep import (
    GraphConfigError,
    GraphExecutionError,
    NodestepError,
    ResumeError,
    StateStoreError,
    StateUpdateError,
    ThreadBusyError,
    UnknownThreadError,
    __version__,
)
from nodestep.memory import MemoryStore, open_memory
from nodestep.serve import _assistants, _runs, _store, _threads, _unsupported
from nodestep.serve._bodies import ApiError
from nodestep.serve._graphs import agent_table, graph_table
from nodestep.serve._security import Gate
from nodestep.serve._service import Limits, Service
from nodestep.store import SQLiteStateStore, StateStore, open_store

__all__ = ["DEFAULT_STORE", "create_app", "default_memory", "open_server_store"]

DEFAULT_STORE = Path(".nodestep") / "threads.db"
"""Where ``store=None`` keeps the threads: an SQLite file under ``./.nodestep/``."""

_STATUS: tuple[tuple[type[Exception], int], ...] = (
    (UnknownThreadError, 404),
    (ThreadBusyError, 409),
    (ResumeError, 422),
    (StateUpdateError, 422),
    (GraphConfigError, 422),
    (GraphExecutionError, 422),
    (StateStoreError, 503),
)


def open_server_store(store: StateStore | str | None) -> tuple[StateStore, bool]:
    """Return the store to serve from, and whether the server opened it (and closes it)."""
    if isinstance(store, StateStore):
        return store, False
    if store is None:
        DEFAULT_STORE.parent.mkdir(parents=True, exist_ok=True)
        return SQLiteStateStore(DEFAULT_STORE), True
    return open_store(store), True


async def _api_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, ApiError)
    return JSONResponse({"detail": error.detail}, status_code=error.status)


async def _nodestep_error(request: Request, error: Exception) -> Response:
    status = next((code for kind, code in _STATUS if isinstance(error, kind)), 422)
    return JSONResponse({"detail": str(error)}, status_code=status)


async def _bad_number(request: Request, error: Exception) -> Response:
    return JSONResponse({"detail": f"A query parameter is not a number: {error}."}, status_code=422)


async def _open_queue(
    stack: contextlib.AsyncExitStack, dsn: str, store_url: str, paths: dict[str, str]
) -> Any:
    """Open the run queue of ``--workers`` (creating its tables if missing)."""
    from nodestep.serve._queued import WorkerQueue
    from nodestep.workers import RunQueue

    queue = await stack.enter_async_context(RunQueue(dsn))
    await queue.create_schema()
    return WorkerQueue(queue, store_url, paths)


async def _http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    if error.status_code == 404:
        detail = f"No endpoint {request.url.path!r}: see docs/serving.md for the ones served."
    elif error.status_code == 405:
        detail = f"{request.method} is not served on {request.url.path!r}."
    else:
        detail = str(error.detail)
    return JSONResponse({"detail": detail}, status_code=error.status_code, headers=error.headers)


async def _ok(request: Request) -> Response:
    return JSONResponse({"ok": True})


async def _info(request: Request) -> Response:
    memory = request.app.state.service.memory is not None
    return JSONResponse(
        {
            "version": __version__,
            "server": "nodestep",
            "flags": {"assistants": True, "crons": False, "langsmith": False, "store": memory},
        }
    )


def default_memory(store: str | None = None) -> MemoryStore:
    """Return the memory store a server opens beside the state store at URL ``store``.

    ``threads.memory.db`` beside an SQLite ``threads.db``, a ``.memory.jsonl`` beside a
    file store, the same PostgreSQL database, an in-process store for ``memory:``;
    ``None``: beside the default SQLite file under ``./.nodestep/``. The caller closes it.

    Args:
        store: The state store's URL, or ``None``.
    """
    return _store.memory_beside(store, DEFAULT_STORE)


def open_server_memory(
    memory: MemoryStore | str | None, store: StateStore | str | None
) -> tuple[MemoryStore | None, bool]:
    """Return the memory store to serve, and whether the server opened it (and closes it).

    ``None`` puts it beside a store given by URL (or the default store); a store given as
    an object has none unless ``memory`` names one.
    """
    if isinstance(memory, MemoryStore):
        return memory, False
    if isinstance(memory, str):
        return open_memory(memory), True
    if isinstance(store, StateStore):
        return None, False
    return default_memory(store), True


def create_app(
    graphs: dict[str, Any] | Sequence[Any],
    *,
    store: StateStore | str | None = None,
    token: str | None = None,
    cors_origins: Sequence[str] = (),
    hosts: Sequence[str] = (),
    max_body: int = 10 * 1024 * 1024,
    max_depth: int = 100,
    heartbeat: float = 5.0,
    memory: MemoryStore | str | None = None,
    workers: str | None = None,
    graph_paths: Mapping[str, str] | None = None,
    clock: Callable[[], float] = time.time,
) -> Any:
    """Return an ASGI app that serves the graphs over the LangGraph Agent Server API.

    Each graph is an assistant whose ``graph_id`` is its name; threads and runs keep their
    history in ``store``. Runs execute in the app's process, as anyio tasks.

    Args:
        graphs: Graphs by name, or a list of graphs (each named by ``Graph(name=...)``);
            an ``Agent`` is served as its ``.graph``.
        store: A ``StateStore``, a store URL (``sqlite:///...``, ``postgresql://...``), or
            ``None`` for an SQLite file under ``./.nodestep/``.
        token: The API token requests must carry (``x-api-key`` or ``Authorization:
            Bearer``); ``None`` for none.
        cors_origins: Browser origins allowed besides ``localhost`` ones; ``"*"`` for any.
        hosts: Host names it answers to besides ``localhost`` and ``127.0.0.1``; ``"*"``: any.
        max_body: The largest request body, in bytes (10 MB by default).
        max_depth: The deepest JSON nesting a body may have.
        heartbeat: Seconds a stream may stay silent before a ``: heartbeat`` comment.
        memory: The long-term memory store the ``/store`` endpoints serve and the runs'
            nodes see as ``ctx.memory``: a ``MemoryStore``, a memory store URL, or
            ``None`` for one beside ``store`` (``threads.memory.db`` beside an SQLite
            ``threads.db``, the same PostgreSQL database); with a store object and no
            ``memory``, the endpoints answer 404.
        workers: A PostgreSQL URL: queue the runs there for ``nodestep.workers``
            processes instead of running them in this process. Needs ``store`` as a URL
            and ``graph_paths``.
        graph_paths: Each graph's import path (``"package.module:name"``), for the workers.
        clock: The clock a thread's ``ttl`` runs out by; a test passes a fake one.

    Returns:
        A Starlette app; run it with any ASGI server, or use ``serve``.

    Raises:
        GraphConfigError: a graph is not a ``Graph``, or two share a name; ``workers``
            without a store URL, without an import path for every graph, or without the
            ``workers`` extra installed.
    """
    table = graph_table(graphs)
    _check_workers(workers, store, graph_paths, table)
    opened, owned = open_server_store(store)
    remembered, owned_memory = open_server_memory(memory, store)
    limits = Limits(max_body, max_depth, heartbeat)
    service = Service(table, opened, limits, remembered, agent_table(graphs), clock)
    queued = None if workers is None else (workers, str(store), dict(graph_paths or {}))
    app = _starlette(service, owned, owned_memory, queued)
    return Gate(app, token=token, hosts=hosts, origins=cors_origins, max_body=max_body)


def _check_workers(
    workers: str | None, store: Any, paths: Mapping[str, str] | None, table: dict[str, Any]
) -> None:
    if workers is None:
        return
    if not isinstance(store, str):
        raise GraphConfigError(
            "create_app(workers=...) needs store= as a URL (e.g. 'postgresql://...'): the "
            "workers open the store themselves, in their own processes."
        )
    missing = sorted(set(table) - set(paths or {}))
    if missing:
        raise GraphConfigError(
            f"create_app(workers=...) needs the import path of every graph; missing "
            f"{', '.join(missing)}: pass graph_paths={{'{missing[0]}': 'package.module:name'}}."
        )
    # The queue opens when the server starts, where a missing extra would be a traceback in
    # uvicorn's log and a server that does not start; here it is one error naming the extra.
    try:
        import procrastinate  # noqa: F401 - only looked for here
    except ImportError as error:
        raise GraphConfigError(
            f"create_app(workers=...) needs the 'workers' extra ({error}); install it with "
            f"pip install 'nodestep[workers]'."
        ) from error


def _starlette(
    service: Service,
    owned: bool,
    owned_memory: bool,
    queued: tuple[str, str, dict[str, str]] | None,
) -> Starlette:
    """Return the app of the routes; its lifespan runs the executor (and closes the store)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await service.registry.load()
        async with contextlib.AsyncExitStack() as stack:
            if queued is not None:
                service.executor.queue = await _open_queue(stack, *queued)
            async with anyio.create_task_group() as group:
                service.executor.start(group)
                yield
                group.cancel_scope.cancel()
        if owned:
            await service.store.aclose()
        if owned_memory and service.memory is not None:
            await service.memory.aclose()

    app = Starlette(
        routes=[
            # The runs first: the router tries each route's pattern in turn, and a run is
            # the request that comes most often.
            *_runs.routes,
            Route("/ok", _ok, methods=["GET"]),
            Route("/info", _info, methods=["GET"]),
            *_assistants.routes,
            *_threads.routes,
            *_store.routes,
            *_unsupported.routes,
        ],
        exception_handlers={
            ApiError: _api_error,
            NodestepError: _nodestep_error,
            ValueError: _bad_number,
            HTTPException: _http_error,
        },
        lifespan=lifespan,
    )
    app.state.service = service
    return app
