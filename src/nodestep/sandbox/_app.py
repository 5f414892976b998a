"""The app: the server's API, and the sandbox's pages at ``/ui``, in one process.

``create_app`` builds the API with ``nodestep.serve.create_app`` over one store, and puts
a router in front: ``/ui`` goes to the pages (behind their ``Guard``), ``/ui/api/...`` is
the API for the browser's live streams (the guard checks the cookie, the router adds the
API token), everything else is the API itself, unchanged. The pages read the store and the
graphs directly and start runs through the API, so a run started from the sandbox is a run
of the server, as any client's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from nodestep import Agent, Graph, GraphConfigError, SQLiteStateStore
from nodestep.sandbox._guard import Guard
from nodestep.sandbox._pages import pages_app
from nodestep.sandbox._reads import Sandbox
from nodestep.serve import create_app as create_api
from nodestep.serve import default_memory
from nodestep.store import StateStore, open_store

__all__ = ["DEFAULT_STORE", "create_app"]

DEFAULT_STORE = Path(".nodestep") / "threads.db"
"""Where ``store=None`` keeps the threads, as for ``nodestep.serve``."""


def _graphs(
    graphs: dict[str, Any] | Sequence[Any],
) -> tuple[dict[str, Graph[Any]], dict[str, Agent]]:
    """Return the graphs by name, and the agents among them (their chat view) by name."""
    items = graphs.items() if isinstance(graphs, dict) else ((None, g) for g in graphs)
    table: dict[str, Graph[Any]] = {}
    agents: dict[str, Agent] = {}
    for name, value in items:
        graph = value.graph if isinstance(value, Agent) else value
        if not isinstance(graph, Graph):
            raise GraphConfigError(
                f"The sandbox serves graphs; got {type(value).__name__} {name or ''!s}. "
                f"Pass a Graph or an Agent."
            )
        key = name or graph.name
        if key in table:
            raise GraphConfigError(f"Two graphs are named {key!r}; pass a dict to name them apart.")
        table[key] = graph
        if isinstance(value, Agent):
            agents[key] = value
    return table, agents


def _open(store: StateStore | str | None) -> tuple[StateStore, bool]:
    if isinstance(store, StateStore):
        return store, False
    if store is None:
        DEFAULT_STORE.parent.mkdir(parents=True, exist_ok=True)
        return SQLiteStateStore(DEFAULT_STORE), True
    return open_store(store), True


def create_app(
    graphs: dict[str, Any] | Sequence[Any],
    *,
    store: StateStore | str | None = None,
    token: str | None = None,
    hosts: Sequence[str] = (),
    cors_origins: Sequence[str] = (),
    memory: Any = None,
) -> Any:
    """Return an ASGI app: the Agent Server API, and the sandbox's pages at ``/ui``.

    Args:
        graphs: Graphs (or Agents) by name, or a list of them, as for
            ``nodestep.serve.create_app``.
        store: A ``StateStore``, a store URL, or ``None`` for an SQLite file under
            ``./.nodestep/``.
        token: The token for the API (a header) and the pages (``?token=`` once, or the
            login form, then a cookie); ``None`` for none.
        hosts: Host names served besides ``localhost`` and ``127.0.0.1``; ``"*"`` for any.
        cors_origins: Browser origins the API allows besides localhost ones.
        memory: The memory store (or its URL) of the API's ``/store`` endpoints and the
            runs' ``ctx.memory``; ``None``: beside a store given by URL, as the server
            does (``nodestep.serve.default_memory``), none beside a store object.

    Returns:
        An ASGI app; run it with uvicorn, or use ``nodestep.sandbox.serve``.

    Raises:
        GraphConfigError: a graph is not a ``Graph`` or ``Agent``, or two share a name.
    """
    table, agents = _graphs(graphs)
    opened, owned = _open(store)
    # As the server does: a store given by URL (or the default one) gets its memory store
    # beside it; the sandbox opened it, so the sandbox closes it.
    beside = default_memory(store) if memory is None and not isinstance(store, StateStore) else None
    api = create_api(
        {**table, **agents},  # the API knows the agents: a chat client sends them messages
        store=opened,
        token=token,
        hosts=hosts,
        cors_origins=cors_origins,
        memory=beside if beside is not None else memory,
    )
    sandbox = Sandbox(table, opened, api, token)
    sandbox.agents = agents
    pages = pages_app(sandbox)
    guard = Guard(pages, token=token, hosts=hosts)
    pages.state.guard = guard
    sandbox.csrf = guard.csrf
    closing = [sandbox.api.aclose, *([opened.aclose] if owned else [])]
    closing += [beside.aclose] if beside is not None else []
    return Router(api, guard, _ApiForBrowser(api, token, guard), closing)


class _ApiForBrowser:
    """The API's GET routes for the browser's EventSource, which sends no headers."""

    def __init__(self, api: ASGIApp, token: str | None, guard: Guard) -> None:
        self.api = api
        self.key = token.encode() if token else None
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def forward(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["method"] != "GET":
                await send({"type": "http.response.start", "status": 405, "headers": []})
                await send({"type": "http.response.body", "body": b""})
                return
            # The guard checked the cookie; the API gets its token and no browser headers.
            kept = [(k, v) for k, v in scope["headers"] if k not in (b"cookie", b"origin")]
            if self.key is not None:
                kept.append((b"x-api-key", self.key))
            path = scope["path"].removeprefix("/ui/api")
            # The raw path keeps its escapes (a thread id's ``%23`` stays in the id).
            raw = (scope.get("raw_path") or path.encode()).removeprefix(b"/ui/api")
            inner = {**scope, "path": path, "raw_path": raw, "headers": kept}
            await self.api(inner, receive, send)

        await self.guard.admit(forward, scope, receive, send)


class Router:
    """Send ``/ui`` to the pages, ``/ui/api`` to the browser's API, the rest to the API."""

    def __init__(
        self,
        api: ASGIApp,
        pages: ASGIApp,
        browser_api: ASGIApp,
        closing: Sequence[Callable[[], Awaitable[None]]],
    ) -> None:
        self.api = api
        self.pages = pages
        self.browser_api = browser_api
        self.closing = closing

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.api(scope, receive, self._closing(send))
            return
        path: str = scope.get("path", "")
        if path.startswith("/ui/api/"):
            await self.browser_api(scope, receive, send)
        elif path == "/ui" or path.startswith("/ui/"):
            await self.pages(scope, receive, send)
        else:
            await self.api(scope, receive, send)

    def _closing(self, send: Send) -> Send:
        async def sending(message: Message) -> None:
            if message["type"] == "lifespan.shutdown.complete":
                for close in self.closing:  # the pages' API client; a store the app opened
                    await close()
            await send(message)

        return sending
