"""``serve``: run the API and the sandbox's pages under uvicorn until stopped."""

from __future__ import annotations

import contextlib
import socket
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nodestep.sandbox._app import create_app
from nodestep.serve import bind_access
from nodestep.store import StateStore

if TYPE_CHECKING:
    import uvicorn

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

    Prints the address to open (``nodestep sandbox: http://...``) once the server listens.

    Why a token off loopback: bound to another address, anyone who reaches the port could
    run the graphs and read every thread, through the pages as through the API.

    Args:
        graphs: Graphs (or Agents) by name, or a list of them.
        store: A store, a store URL, or ``None`` for an SQLite file under ``./.nodestep/``.
        host: The address to bind; ``127.0.0.1`` by default.
        port: The port; 2024, as ``nodestep serve``; 0 takes a free one, and the address
            printed once the server listens shows it.
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
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=5,
    )
    server = _announcing(config, f"?token={token}" if token else "")
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl+C: uvicorn stops, then re-raises it
        server.run()
    if not server.started:
        sys.exit(3)  # uvicorn's exit code for a server that did not start, as uvicorn.run


def _announcing(config: uvicorn.Config, query: str) -> uvicorn.Server:
    """Return a server that prints the sandbox's address once it listens.

    Why after the bind: with port 0 the system picks the port, so only the bound socket
    knows it; and an address printed before the server listens would refuse a first visit.
    """
    import uvicorn

    class Announcing(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            bound = [s for server in self.servers for s in server.sockets]
            host = config.host if ":" not in config.host else f"[{config.host}]"
            port = bound[0].getsockname()[1] if bound else config.port
            # As Jupyter does: the address to open, with the token the first visit
            # trades for a cookie.
            print(f"nodestep sandbox: http://{host}:{port}/ui{query}", flush=True)

    return Announcing(config)
