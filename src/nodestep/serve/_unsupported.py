"""The endpoints of LangGraph's server that nodestep does not serve, answered 501 by name.

Why answer them at all: a client that calls one (``client.crons.create``, an assistant
update) must learn at once which feature is missing and what to use instead, in the
``{"detail": ...}`` shape it reads every error in, not from a bare 404 or 405 it would
take for a wrong URL.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

__all__ = ["routes"]

_CRONS = (
    "Crons (scheduled runs) are not served by nodestep serve: schedule runs with your own "
    "scheduler (cron, a workflow tool) calling runs.create."
)
_ASSISTANTS = (
    "Assistants are the served graphs, one each, made when the server starts: creating, "
    "changing, deleting and versioning them is not served. Serve another graph under its "
    "own name (nodestep serve NAME=MODULE:GRAPH) and pass per-run settings as context."
)
_THREAD_PROTOCOL = (
    "The thread event protocol (the JS client's threads.stream, streamProtocol 'v2-sse' or "
    "'v2-websocket') is not served: stream a run with runs.stream (as useStream does), and "
    "send an answer to an interrupt as a run with command={'resume': ...}."
)

_FEATURES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("/assistants", ("POST",), _ASSISTANTS),
    ("/assistants/{assistant_id}", ("PATCH", "DELETE"), _ASSISTANTS),
    ("/assistants/{assistant_id}/versions", ("POST",), _ASSISTANTS),
    ("/assistants/{assistant_id}/latest", ("POST",), _ASSISTANTS),
    ("/runs/crons", ("POST",), _CRONS),
    ("/runs/crons/search", ("POST",), _CRONS),
    ("/runs/crons/count", ("POST",), _CRONS),
    ("/runs/crons/{cron_id}", ("GET", "PATCH", "DELETE"), _CRONS),
    ("/threads/{thread_id}/runs/crons", ("POST",), _CRONS),
    (
        "/runs/batch",
        ("POST",),
        "Batches of runs are not served: create each run with runs.create.",
    ),
    (
        "/runs/cancel",
        ("POST",),
        "Cancelling runs in bulk is not served: cancel each with runs.cancel(thread, run).",
    ),
    (
        "/threads/prune",
        ("POST",),
        "Pruning threads is not served over HTTP: use `nodestep threads prune` on the store.",
    ),
    (
        "/threads/{thread_id}/commands",
        ("POST",),
        _THREAD_PROTOCOL,
    ),
    (
        "/threads/{thread_id}/stream/events",
        ("GET", "POST"),
        _THREAD_PROTOCOL,
    ),
    (
        "/threads/{thread_id}/stream",
        ("GET",),
        "Streaming a thread (rather than a run) is not served: join a run's stream with "
        "runs.join_stream(thread, run).",
    ),
)


def _refusal(detail: str) -> Callable[[Request], Awaitable[Response]]:
    async def refuse(request: Request) -> Response:
        return JSONResponse({"detail": detail}, status_code=501)

    return refuse


routes = [
    Route(path, _refusal(detail), methods=list(methods)) for path, methods, detail in _FEATURES
]
