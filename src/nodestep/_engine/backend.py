"""The two things the engine does per event loop; everything else in it is plain anyio.

* ``task_group()``: the task group of a superstep's async tasks. anyio's costs about 15 µs
  a task on asyncio and ``asyncio.TaskGroup`` about 3 (measured in ``docs/performance.md``);
  a superstep may fan out to hundreds of tasks, so on asyncio the engine uses asyncio's
  own, and anyio's on trio. Either way the group is structured: it ends only when all its
  tasks have, and a cancellation from outside reaches them.
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

__all__ = ["RunTask", "TaskGroup", "on_asyncio", "task_group"]


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
