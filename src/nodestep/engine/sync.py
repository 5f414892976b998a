"""The sync API is a thin driver over the async one: it runs a coroutine on a private loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar, cast

from nodestep.engine.results import StreamEvent

__all__ = ["drive_stream", "no_running_loop", "run_sync"]

T = TypeVar("T")


def no_running_loop(method: str) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(
        f"graph.{method}() cannot run inside a running event loop (it would block it). In "
        f"async code, use 'await graph.a{method}(...)'"
        + (" / 'async for event in graph.astream(...)'." if method == "stream" else ".")
    )


class _OwnedLoop:
    """An event loop that closes when its owner (a thread's local storage) lets it go."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def __del__(self) -> None:
        if not self.loop.is_closed():
            self.loop.close()


_thread_loops = threading.local()


def _private_loop() -> asyncio.AbstractEventLoop:
    # One loop per calling thread, reused by every invoke() of that thread: creating and
    # closing a loop costs about 70 µs, more than a short run itself. When the thread ends,
    # its local storage goes and the loop is closed with it.
    owned: _OwnedLoop | None = getattr(_thread_loops, "owned", None)
    if owned is None or owned.loop.is_closed():
        owned = _thread_loops.owned = _OwnedLoop()
    return owned.loop


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on the calling thread's private loop."""
    return _private_loop().run_until_complete(coro)


def drive_stream(agen: AsyncIterator[StreamEvent]) -> Iterator[StreamEvent]:
    """Yield the events of ``agen``, driving it on a loop of its own."""
    # Its own loop, not the thread's shared one: the caller may invoke() the graph from the
    # body of this very loop, and a loop cannot run inside itself.
    loop = asyncio.new_event_loop()
    agen_ = cast(Any, agen)
    try:
        while True:
            try:
                event = loop.run_until_complete(agen_.__anext__())
            except StopAsyncIteration:
                return
            yield event
    finally:
        try:
            loop.run_until_complete(agen_.aclose())
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
