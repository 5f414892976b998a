"""The answer of a request that waits for a run's end: ``runs.wait`` and ``join``.

Its headers go out at once, with ``Location`` naming where to ask again (the run's
``join``), then a newline whenever the run stays silent for a heartbeat, then the JSON
answer. Why not one response at the end: the LangGraph SDK reconnects to ``Location``
when the connection drops, and it can read that header only once the headers are out;
and a proxy closes a connection that stays idle too long. Whitespace before a JSON value
is valid JSON, so a client reads the answer as it reads a plain one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import orjson
from starlette.types import Receive, Scope, Send

from nodestep.serve._events import RunEvents
from nodestep.serve._sse import while_connected

__all__ = ["WaitAnswer"]


class WaitAnswer:
    """An ASGI response that waits for a run's end, then answers ``answer()`` as JSON.

    Args:
        events: The run's events; the answer goes out once they end.
        answer: Makes the JSON answer once the run has ended.
        headers: More response headers (``Location``, ``Content-Location``).
        heartbeat: Seconds of silence before a newline goes out.
        on_disconnect: Awaited when the client goes away before the run ended
            (``on_disconnect="cancel"``, ``cancel_on_disconnect=1``: it cancels the run).
    """

    def __init__(
        self,
        events: RunEvents,
        answer: Callable[[], Awaitable[Any]],
        headers: dict[str, str],
        heartbeat: float,
        on_disconnect: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        self._events = events
        self._answer = answer
        self._headers = headers
        self._heartbeat = heartbeat
        self._on_disconnect = on_disconnect

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(b"content-type", b"application/json")]
        headers += [(k.lower().encode(), v.encode()) for k, v in self._headers.items()]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        if self._on_disconnect is None:
            await self._wait(send)
        elif await while_connected(receive, lambda: self._wait(send)):
            if not self._events.finished.is_set():
                await self._on_disconnect()
            return
        body = orjson.dumps(await self._answer(), option=orjson.OPT_NON_STR_KEYS)
        await send({"type": "http.response.body", "body": body, "more_body": False})

    async def _wait(self, send: Send) -> None:
        # Without on_disconnect, a client that went away meanwhile is no error: the server
        # drops what is sent to it, and the run goes on (its join answers later).
        while not self._events.finished.is_set():
            with anyio.move_on_after(self._heartbeat) as quiet:
                await self._events.finished.wait()
            if quiet.cancelled_caught:
                await send({"type": "http.response.body", "body": b"\n", "more_body": True})
