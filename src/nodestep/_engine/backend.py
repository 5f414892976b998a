"""The three things the engine does per event loop; everything else in it is plain anyio.

* ``task_group()``: the task group of a superstep's async tasks. anyio's costs about 15 µs
  a task on asyncio and ``asyncio.TaskGroup`` about 3 (measured in ``docs/performance.md``);
  a superstep may fan out to hundreds of tasks, so on asyncio the engine uses asyncio's
  own, and anyio's on trio. Either way the group is structured: it ends only when all its
  tasks have, and a cancellation from outside reaches them.
* ``shielded()``: anyio's shielded cancel scope, made without asking sniffio which
  library runs when an asyncio task asks (see there why).
* ``RunTask``: a task outside any task group, for a stream's run (``_engine.streaming``
  says why). anyio has no call for that; asyncio and trio each have their own.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, Protocol

import anyio
import anyio.abc
import anyio.lowlevel

__all__ = ["RunTask", "TaskGroup", "on_asyncio", "shielded", "task_group"]


class TaskGroup(Protocol):
    """Start tasks; cancel the ones still running."""

    def start_soon(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None: ...

    def cancel(self) -> None: ...


class _AsyncioGroup:
    def __init__(self, group: asyncio.TaskGroup) -> None:
        self._group = group
        self._tasks: list[asyncio.Task[Any]] = []

    def start_soon(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        self._tasks.append(self._group.create_task(fn(*args)))

    def cancel(self) -> None:
        for task in self._tasks:
            task.cancel()


class _AnyioGroup:
    def __init__(self, group: anyio.abc.TaskGroup) -> None:
        self._group = group

    def start_soon(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        self._group.start_soon(fn, *args)

    def cancel(self) -> None:
        self._group.cancel_scope.cancel()


@asynccontextmanager
async def task_group() -> AsyncIterator[TaskGroup]:
    """Open a task group on the running event loop (see the module docstring).

    Its body must raise nothing but a cancellation: both kinds of group wrap any other
    error in an ``ExceptionGroup``.
    """
    if on_asyncio():
        async with asyncio.TaskGroup() as group:
            yield _AsyncioGroup(group)
    else:
        async with anyio.create_task_group() as any_group:
            yield _AnyioGroup(any_group)


def on_asyncio() -> bool:
    """Tell whether the running event loop is asyncio's (else trio, through anyio)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


_asyncio_scope: type[anyio.CancelScope] | None = None
"""The class of anyio's cancel scopes on asyncio, once ``shielded`` has made one there."""


def shielded() -> anyio.CancelScope:
    """Return a new ``anyio.CancelScope(shield=True)``: cancellation from outside waits
    until it exits.

    Why not that call: ``anyio.CancelScope()`` asks sniffio which library runs, about 12k
    instructions on asyncio of a scope's 32k (0.55% of a turn of W10's agent, whose lease is
    taken in one). Code running in an asyncio task runs on anyio's asyncio back end, so
    there the scope is made from its class, learnt from the first scope made the usual
    way; it is the same scope, with the same shield. Anywhere else (trio, trio's guest
    mode on an asyncio loop: no asyncio task runs), anyio decides as always.
    """
    global _asyncio_scope
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no asyncio loop runs: trio
        task = None
    if task is None:
        return anyio.CancelScope(shield=True)
    kind = _asyncio_scope
    if kind is None:
        scope = anyio.CancelScope(shield=True)
        if type(scope).__module__ == "anyio._backends._asyncio":  # anyio agrees: asyncio
            _asyncio_scope = type(scope)
        return scope
    return kind(shield=True)


class RunTask:
    """A coroutine run as a task of its own on the current event loop, cancellable.

    It runs in a copy of the caller's context variables.
    """

    def __init__(self, coro: Coroutine[Any, Any, None]) -> None:
        self._coro = coro
        self._scope: anyio.CancelScope | None = None
        self._cancelled = False
        self._done = anyio.Event()
        context = contextvars.copy_context()
        if on_asyncio():
            asyncio.get_running_loop().create_task(self._main(), context=context)
        else:
            import trio  # the only other back end anyio runs on

            trio.lowlevel.spawn_system_task(self._main, name="nodestep run", context=context)

    async def _main(self) -> None:
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                if self._cancelled:
                    scope.cancel()
                await self._coro
        finally:
            self._done.set()

    def cancel(self) -> None:
        """Cancel the task; it still runs its cleanup (``wait`` for it)."""
        self._cancelled = True
        if self._scope is not None:
            self._scope.cancel()

    async def wait(self) -> None:
        """Wait until the task has finished."""
        await self._done.wait()
