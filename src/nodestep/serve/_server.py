"""``serve``: run the app under uvicorn until stopped, refusing an open bind without a token."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nodestep.memory import MemoryStore
from nodestep.serve._app import create_app
from nodestep.serve._security import bind_access
from nodestep.store import StateStore

__all__ = ["serve"]


def serve(
    graphs: dict[str, Any] | Sequence[Any],
    *,
    store: StateStore | str | None = None,
    host: str = "127.0.0.1",
    port: int = 2024,
    workers: str | None = None,
    token: str | None = None,
    cors_origins: Sequence[str] = (),
    memory: MemoryStore | str | None = None,
    graph_paths: Mapping[str, str] | None = None,
) -> None:
    """Serve the graphs over the LangGraph Agent Server API until the process is stopped.

    Why a token off loopback: anyone reaching the port could run the graphs and read threads.

    Args:
        graphs: Graphs by name, or a list of graphs (see ``create_app``).
        store: A store, a store URL, or ``None`` for an SQLite file under ``./.nodestep/``.
        host: The address to bind; ``127.0.0.1`` by default.
        port: The port; 2024, as ``langgraph dev``.
        workers: A PostgreSQL URL to queue the runs on for workers (see ``create_app``).
        token: The API token; ``None`` reads ``NODESTEP_API_TOKEN``.
        cors_origins: Browser origins allowed besides ``localhost`` ones.
        memory: The memory store, or its URL; ``None``: beside ``store``.
        graph_paths: Each graph's import path, by name, for ``workers``.

    Raises:
        GraphConfigError: ``host`` is not a loopback address and there is no token, or
            ``workers`` without a store URL or the graphs' import paths.
    """
    import uvicorn

    token, hosts = bind_access(host, token)
    app = create_app(
        graphs,
        store=store,
        token=token,
        cors_origins=cors_origins,
        hosts=hosts,
        memory=memory,
        workers=workers,
        graph_paths=graph_paths,
    )
    # Open streams and joins would hold a graceful stop forever: after 5 s they are cut,
    # and their runs, still pending in the store, go on in the next server.
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=5,
    )
