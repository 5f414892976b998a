"""Server-sent events: a run's events as ``text/event-stream``, with heartbeats.

Each event goes out as ``event:``, ``data:`` (JSON) and ``id:`` (its number in the run),
so a client that reconnects with ``Last-Event-ID`` gets what it missed. A comment line,
``: heartbeat``, goes out whenever no event came for a while: proxies and browsers drop
an idle connection, and a long node (a slow model) must not look like a dead server.
The stream ends when the run ends; there is no end event, as in the reference server.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable

import anyio
import orjson
from starlette.types import Receive, Scope, Send

from nodestep.serve._events import RunEvents

__all__ = ["HEARTBEAT_SECONDS", "EventStream", "while_connected"]

HEARTBEAT_SECONDS = 5.0
"""How long a stream may stay silent before a heartbeat comment goes out."""


def _frame(number: int, event: str, data: object) -> bytes:
    body = orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS)
    return b"event: %s\ndata: %s\nid: %d\n\n" % (event.encode(), body, number)


class EventStream:
    """An ASGI response that follows a run's events from number ``start`` until it ends.

    Args:
        events: The run's events.
        start: The first event to send.
        headers: More response headers (``Content-Location``).
        on_disconnect: Called (and awaited, if it returns an awaitable) when the client
            goes away before the run ended.
        heartbeat: Seconds of silence before a heartbeat.
        modes: Only the events of these stream modes (``join_stream(stream_mode=)``), a
            subgraph's included; ``error`` always. The events sent keep their numbers.
    """

    def __init__(
        self,
        events: RunEvents,
        start: int = 0,
        headers: dict[str, str] | None = None,
        on_disconnect: Callable[[], object] | None = None,
        heartbeat: float = HEARTBEAT_SECONDS,
        modes: frozenset[str] | None = None,
    ) -> None:
        self._events = events
        self._start = start
        self._headers = headers or {}
        self._on_disconnect = on_disconnect
        self._heartbeat = heartbeat
        self._modes = modes

    def _wanted(self, event: str) -> bool:
        # Why "error" always: a client that joins for some modes must still learn that the
        # run failed (LangGraph's join drops it, and the client waits on a dead run).
        if self._modes is None or event == "error":
            return True
        mode = event.split("|", 1)[0]
        return mode in self._modes or (
            mode == "messages" and "messages-tuple" in self._modes  # its events' name
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-store"),
            (b"x-accel-buffering", b"no"),
        ] + [(k.lower().encode(), v.encode()) for k, v in self._headers.items()]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        gone = await while_connected(receive, lambda: self._pump(send))
        if gone and not self._events.finished.is_set() and self._on_disconnect is not None:
            cancelled = self._on_disconnect()
            if inspect.isawaitable(cancelled):
                await cancelled
        if not gone:
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _pump(self, send: Send) -> None:
        index = self._start
        while True:
            with anyio.move_on_after(self._heartbeat) as quiet:
                await self._events.wait_past(index)
            if quiet.cancelled_caught:
                await send(
                    {"type": "http.response.body", "body": b": heartbeat\n\n", "more_body": True}
                )
                continue
            for event, data in self._events.since(index):
                if self._wanted(event):
                    await send(
                        {
                            "type": "http.response.body",
                            "body": _frame(index, event, data),
                            "more_body": True,
                        }
                    )
                index += 1
            if self._events.finished.is_set() and not self._events.since(index):
                return


async def while_connected(receive: Receive, work: Callable[[], Awaitable[None]]) -> bool:
    """Run ``work`` until it ends or the client goes away; return whether it went away.

    Why a task of its own: a response that waits (a stream, a wait for a run's end)
    learns that its client disconnected only from ``receive``, which it does not read
    otherwise.
    """
    gone = False
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            nonlocal gone
            while (await receive())["type"] != "http.disconnect":
                pass
            gone = True
            group.cancel_scope.cancel()

        group.start_soon(watch)
        await work()
        group.cancel_scope.cancel()
    return gone
