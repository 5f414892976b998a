"""``sync_form``: the ``_sync`` form of an async method, made from the method itself.

Every thread method of a graph is async (``await graph.get_state(...)``) and has a sync
form for plain scripts (``graph.get_state_sync(...)``). One line declares each::

    get_state_sync = sync_form(get_state)

so the two cannot drift apart: the sync form takes the async one's parameters (mypy sees
them through the ``ParamSpec``; ``inspect.signature`` and ``help()`` through
``__signature__``) and returns what awaiting it gives.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterator
from typing import Any, Concatenate, ParamSpec, TypeVar

from nodestep._engine.sync import call_sync, iterate_sync

__all__ = ["iterate_form", "sync_form"]

P = ParamSpec("P")
T = TypeVar("T")
Owner = TypeVar("Owner")


def sync_form(
    method: Callable[Concatenate[Owner, P], Coroutine[Any, Any, T]],
    before: Callable[Concatenate[Owner, P], None] | None = None,
) -> Callable[Concatenate[Owner, P], T]:
    """Return the ``_sync`` form of the async method ``method``, to assign in its class.

    The form runs ``await method(...)`` to completion with ``_engine.sync.call_sync``:
    without a running event loop, on the calling thread's private loop; inside one (a
    notebook cell, say), on a worker thread, while the caller waits.

    Its name is ``method``'s with ``_sync`` added; assign it to that name. Its signature
    is ``method``'s, with the result of awaiting it as the return annotation (for a
    method wrapped with ``async_call``, the wrapped coroutine function's).

    Args:
        method: An ``async def`` method, or a method that returns a coroutine.
        before: Called with the same arguments on the calling thread first, before the
            method runs (perhaps on a worker thread): for what only the caller's own
            thread can do, such as closing a sync stream it holds open.

    Returns:
        A plain function; in a class body it becomes a method as any ``def`` does.
    """
    name = f"{method.__name__}_sync"

    def run(self: Owner, /, *args: P.args, **kwargs: P.kwargs) -> T:
        if before is not None:
            before(self, *args, **kwargs)
        # The coroutine is made inside the call, on whichever thread runs it, so nothing
        # is left unawaited if the call never starts.
        return call_sync(lambda: method(self, *args, **kwargs))

    run.__name__ = name
    run.__qualname__ = f"{method.__qualname__}_sync"
    run.__module__ = method.__module__
    run.__doc__ = (
        f"Run ``{method.__name__}`` from sync code; see ``{method.__name__}`` for the "
        f"arguments.\n\nWithout a running event loop it runs on a private loop of the "
        f"calling thread;\ninside one (a notebook cell, say) it runs on a worker thread, and "
        f"the call waits for it:\nthe result is the same."
    )
    # ``help()`` and ``inspect.signature`` show the async method's parameters; the return
    # annotation is the awaited result, which a wrapper such as ``async_call`` hides.
    run.__signature__ = inspect.signature(inspect.unwrap(method))  # type: ignore[attr-defined]
    return run


def iterate_form(
    method: Callable[Concatenate[Owner, P], AsyncGenerator[T, None]],
) -> Callable[Concatenate[Owner, P], Iterator[T]]:
    """Return the ``_sync`` form of the async generator method ``method``: a method that
    yields its items to a plain ``for`` loop (``_engine.sync.iterate_sync`` drives it:
    on a private loop, or on a worker thread inside a running one). Leaving the loop
    early closes the async generator.
    """
    name = f"{method.__name__}_sync"

    def run(self: Owner, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        return iterate_sync(method(self, *args, **kwargs))

    run.__name__ = name
    run.__qualname__ = f"{method.__qualname__}_sync"
    run.__module__ = method.__module__
    run.__doc__ = (
        f"Run ``{method.__name__}`` from sync code and yield its items; see "
        f"``{method.__name__}`` for the arguments.\n\nWithout a running event loop it "
        f"runs on a private loop of the calling thread;\ninside one (a notebook cell, say) "
        f"on a worker thread. Leaving the loop early stops it."
    )
    run.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]
    return run
