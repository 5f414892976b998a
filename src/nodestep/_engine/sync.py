"""Run async code from sync code: the sync API is a thin driver over the async one.

Where no event loop runs in the calling thread, a coroutine runs on the thread's private
asyncio loop, kept for the thread's life: making a loop costs about 70 µs, more than a
short run. Where one runs (a Jupyter cell, an async framework calling sync code, a plain
``def`` node calling another graph), blocking it from inside is impossible, so the
coroutine runs on a worker thread with its own loop and the caller waits for it: the same
result and the same events, at the cost of a thread hop.

If the caller is interrupted while it waits (``KeyboardInterrupt``, say), the run is
cancelled too, so it records where it stopped instead of going on unseen.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import inspect
import os
import sys
import threading
import weakref
from collections.abc import AsyncGenerator, Callable, Coroutine, Generator, Hashable, Iterator
from typing import Any, TypeVar

__all__ = [
    "call_sync",
    "close_paused",
    "iterate_sync",
    "loop_running",
    "may_block_loop",
    "stream_key",
    "track_paused",
]

T = TypeVar("T")

_CANCEL_WAIT = 5.0
"""Seconds an interrupted caller waits for its cancelled run to record where it stopped."""


def loop_running() -> bool:
    """Tell whether an event loop (asyncio or trio) runs in the calling thread."""
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        pass
    trio = sys.modules.get("trio")
    if trio is not None:
        try:
            trio.lowlevel.current_trio_token()
            return True
        except RuntimeError:
            pass
    return False


_bridged: contextvars.ContextVar[bool] = contextvars.ContextVar("nodestep_bridged", default=False)


def may_block_loop() -> bool:
    """Tell whether the running code may block its event loop: run a plain ``def`` inline.

    Not in a run the bridge carries to a worker's loop (a sync call made where a loop runs:
    a notebook cell). Its caller cancels it when interrupted, and a cancellation reaches a
    task only when the loop runs again: a plain ``def`` run inline would end first, and the
    run go on with its result. In a worker thread, the node's thread is left to finish on
    its own, and the run stops at once.
    """
    return not _bridged.get()


class _OwnedLoop:
    """An event loop that closes when its owner (a thread's local storage) lets it go."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.pid = os.getpid()
        _owned_loops.add(self)

    def __del__(self) -> None:
        if self.pid != os.getpid():
            # A fork's copy, freed with a thread the child does not have (see _inherited).
            _inherited.append(self.loop)
        elif not self.loop.is_closed():
            self.loop.close()


_thread_loops = threading.local()
_owned_loops: weakref.WeakSet[_OwnedLoop] = weakref.WeakSet()

# The loops a forked child inherited, kept and never closed. A loop's selector (epoll) is
# shared with the parent across a fork, so closing the child's copy would unregister the
# parent's descriptors; running it would mix the two processes' events.
_inherited: list[object] = []


def _private_loop() -> asyncio.AbstractEventLoop:
    # One loop per calling thread, reused by every call of that thread. When the thread
    # ends, its local storage goes and the loop is closed with it.
    owned: _OwnedLoop | None = getattr(_thread_loops, "owned", None)
    if owned is None or owned.loop.is_closed():
        owned = _thread_loops.owned = _OwnedLoop()
    return owned.loop


class _Handle:
    """Where a coroutine runs, once it runs: so a waiter that gives up can cancel it."""

    loop: asyncio.AbstractEventLoop | None = None
    task: asyncio.Task[Any] | None = None

    def cancel(self) -> None:
        if self.loop is not None and self.task is not None:
            self.loop.call_soon_threadsafe(self.task.cancel)


def _run(
    loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T], handle: _Handle | None = None
) -> T:
    """Run ``coro`` to completion on ``loop``; if the wait is interrupted, cancel it first."""
    task = loop.create_task(coro)
    if handle is not None:
        handle.loop, handle.task = loop, task
    try:
        return loop.run_until_complete(task)
    except BaseException:
        if not task.done():
            task.cancel()
            # The cancellation ends the task with an error of its own; the interruption
            # that stopped the wait is the one that goes on up.
            with contextlib.suppress(BaseException):
                loop.run_until_complete(task)
        raise


def _worker_context() -> contextvars.Context:
    """Return a copy of the caller's context variables for a run on another thread's loop.

    The copy must not say which async library runs: the caller's says trio, say, while the
    worker runs asyncio, and anyio reads that to pick its back end.
    """
    context = contextvars.copy_context()
    context.run(_bridged.set, True)  # see may_block_loop
    sniffio = sys.modules.get("sniffio")
    if sniffio is not None:
        context.run(sniffio.current_async_library_cvar.set, None)
    return context


def call_sync(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Return the result of the coroutine ``make()``, run to completion from sync code."""
    if not loop_running():
        return _run(_private_loop(), make())
    context = _worker_context()
    handle = _Handle()
    future = _bridge_pool().submit(context.run, lambda: _run(_private_loop(), make(), handle))
    return _wait(future, handle)


def _wait(future: concurrent.futures.Future[T], handle: _Handle) -> T:
    try:
        return future.result()
    except BaseException:
        if not future.done():
            # The caller was interrupted; the worker's run goes on unless told to stop.
            handle.cancel()
            concurrent.futures.wait([future], timeout=_CANCEL_WAIT)
        raise


_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _forget_after_fork() -> None:
    """Start the child of a fork with no loop, pool or lock of its parent's.

    Why: a forked child has only the thread that forked. The parent's pool would take work
    for threads that do not exist (its idle count says they wait), so the child's first
    ``invoke`` from inside a running loop would wait forever; a lock another thread held at
    fork time stays held; and the parent's loops share their selector with the parent.
    """
    global _pool, _pool_lock, _thread_loops
    _inherited.extend([*list(_owned_loops), _pool])
    _owned_loops.clear()
    _thread_loops = threading.local()
    _pool, _pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


def _bridge_pool() -> concurrent.futures.ThreadPoolExecutor:
    # Each worker keeps its own private loop. A run on a worker may itself call sync code
    # inside its loop (a graph calling another); that goes to another worker.
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(32, "nodestep-sync")
        return _pool


def iterate_sync(agen: AsyncGenerator[T, None]) -> Generator[T, None, None]:
    """Yield the items of ``agen``, driving it on an event loop of its own.

    Its own loop, not the thread's shared one, so the caller may ``invoke`` a graph from
    the body of this very loop. Inside a running loop, that loop runs on a worker thread.
    """
    if loop_running():
        yield from _iterate_on_thread(agen)
        return
    loop = asyncio.new_event_loop()
    try:
        while True:
            try:
                item = _run(loop, _next(agen))
            except StopAsyncIteration:
                return
            yield item
    finally:
        try:
            loop.run_until_complete(agen.aclose())
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


async def _next(agen: AsyncGenerator[T, None]) -> T:
    return await agen.__anext__()


def _iterate_on_thread(agen: AsyncGenerator[T, None]) -> Iterator[T]:
    context = _worker_context()
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="nodestep-stream", daemon=True)
    thread.start()
    try:
        while True:
            handle = _Handle()
            try:
                item = _wait(_submit(loop, _next(agen), context, handle), handle)
            except StopAsyncIteration:
                return
            yield item
    finally:
        try:
            _submit(loop, agen.aclose(), context, _Handle()).result()
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()


def _submit(
    loop: asyncio.AbstractEventLoop,
    coro: Coroutine[Any, Any, T],
    context: contextvars.Context,
    handle: _Handle,
) -> concurrent.futures.Future[T]:
    """Start ``coro`` as a task of ``loop`` (another thread's) in ``context``."""
    future: concurrent.futures.Future[T] = concurrent.futures.Future()

    def start() -> None:
        task = loop.create_task(coro, context=context)
        handle.loop, handle.task = loop, task
        task.add_done_callback(lambda t: _settle(future, t))

    loop.call_soon_threadsafe(start)
    return future


def _settle(future: concurrent.futures.Future[T], task: asyncio.Task[T]) -> None:
    if task.cancelled():
        future.cancel()
        future.set_running_or_notify_cancel()
        return
    error = task.exception()
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(task.result())


# Per calling thread: the sync streams it holds paused between two events, by the key of
# the history branch their run writes (``track_paused``).
_paused = threading.local()


def stream_key(store: object, thread_id: str, branch_id: str) -> Hashable:
    """Return the key of the branch a sync stream writes, for ``track_paused`` and
    ``close_paused``: the store object itself (by identity), the thread and the branch."""
    return (id(store), thread_id, branch_id)


def track_paused(key: Hashable, stream: Generator[T, None, None]) -> Generator[T, None, None]:
    """Remember ``stream`` as the calling thread's open sync stream of branch ``key``.

    Why: a run paused in a stream holds its thread's lease until the stream is closed. A
    loop left with ``break`` closes it at once, but a stream the caller still holds (``s =
    graph.stream(...)``; ``for e in s: break``) stays open, and the caller's next call on
    that thread would find it busy, although the stream can only go on when this very
    thread asks for its next event. ``close_paused`` lets that next call close it first.
    Only a weak reference is kept: a dropped stream is closed by Python as before.
    """
    streams: dict[Hashable, weakref.ref[Generator[Any, None, None]]] | None = getattr(
        _paused, "streams", None
    )
    if streams is None:
        streams = _paused.streams = {}
    streams[key] = weakref.ref(stream)
    return stream


def close_paused(key: Hashable) -> None:
    """Close the calling thread's open sync stream of branch ``key``, if one is paused.

    Its run stops where it paused, as when the loop over it is left with ``break``: it
    records ``run_stopped`` (``"stream_closed"``) and gives the thread's lease back before
    this returns. A stream of another thread is left alone: it runs concurrently, and
    the branch is busy indeed.
    """
    streams: dict[Hashable, weakref.ref[Generator[Any, None, None]]] | None = getattr(
        _paused, "streams", None
    )
    if not streams:
        return
    ref = streams.pop(key, None)
    stream = ref() if ref is not None else None
    if stream is not None and inspect.getgeneratorstate(stream) != inspect.GEN_RUNNING:
        stream.close()
