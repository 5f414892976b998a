"""``serve``: run the API and the sandbox's pages under uvicorn until stopped."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nodestep.sandbox._app import create_app
from nodestep.serve import bind_access
from nodestep.store import StateStore

__all__ = ["serve"]


def serve(
    graphs: dict[str, Any] | Sequence[Any],
    *,
    store: StateStore | str | None = None,
    host: str = "127.0.0.1",
    port: int = 2024,
    token: str | None = None,
    cors_origins: Sequence[str] = (),
    memory: Any = None,
) -> None:
    """Serve the graphs' API and the sandbox at ``/ui`` until the process is stopped.

    Why a token off loopback: bound to another address, anyone who reaches the port could
    run the graphs and read every thread, through the pages as through the API.

    Args:
        graphs: Graphs (or Agents) by name, or a list of them.
        store: A store, a store URL, or ``None`` for an SQLite file under ``./.nodestep/``.
        host: The address to bind; ``127.0.0.1`` by default.
        port: The port; 2024, as ``nodestep serve``.
        token: The token; ``None`` reads ``NODESTEP_API_TOKEN``.
        cors_origins: Browser origins the API allows besides ``localhost`` ones.
        memory: The memory store or its URL, as for ``nodestep.serve.create_app``.

    Raises:
        GraphConfigError: ``host`` is not a loopback address and there is no token.
    """
    import uvicorn

    token, hosts = bind_access(host, token)
    app = create_app(
        graphs, store=store, token=token, hosts=hosts, cors_origins=cors_origins, memory=memory
    )
    # As Jupyter does: the address to open, with the token the first visit trades for a cookie.
    first = f"?token={token}" if token else ""
    print(f"nodestep sandbox: http://{host}:{port}/ui{first}", flush=True)
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=5,
    )
