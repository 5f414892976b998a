"""``AsyncCall``: a coroutine that explains itself when someone forgets to ``await`` it.

``exists``, ``update_state``, ``migrate`` and ``fork`` return one (they are declared with
``@async_call``). Without ``await``, ``if graph.exists(...)`` would always be true, and
``graph.update_state(...)`` would change nothing without a word; with an ``AsyncCall`` the
first raises and the second warns, each naming the ``_sync`` form. Awaited, an
``AsyncCall`` is the method's coroutine, and ``asyncio.run`` takes it as one.

The other thread methods stay plain coroutines: forgetting ``await`` there fails at once
anyway, and ``get_state`` is called often enough that the object would cost (about
0.3 µs a call).
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable, Coroutine, Generator
from typing import Any, ParamSpec, TypeVar

__all__ = ["AsyncCall", "async_call"]

P = ParamSpec("P")
T = TypeVar("T")


class AsyncCall(Coroutine[Any, Any, T]):
    """The coroutine of an async thread method, made when it is first awaited."""

    __slots__ = ("_coro", "_explained", "_make", "_method")

    def __init__(self, method: str, make: Callable[[], Coroutine[Any, Any, T]]) -> None:
        self._method = method
        self._make: Callable[[], Coroutine[Any, Any, T]] | None = make
        self._coro: Coroutine[Any, Any, T] | None = None
        self._explained = False  # an error said it all already; no warning on top

    def _started(self) -> Coroutine[Any, Any, T]:
        if self._coro is None:
            if self._make is None:
                raise RuntimeError(f"graph.{self._method}(...) was closed before it ran")
            # Awaited, whatever comes of it: a call that raises (a bad argument, say) ran,
            # and must not be warned about as never awaited.
            make, self._make = self._make, None
            self._coro = make()
        return self._coro

    def __await__(self) -> Generator[Any, None, T]:
        return self._started().__await__()

    def send(self, value: Any) -> Any:
        return self._started().send(value)

    def throw(self, *args: Any) -> Any:
        return self._started().throw(*args)

    def close(self) -> None:
        self._make = None
        if self._coro is not None:
            self._coro.close()

    def _explain(self) -> str:
        name = self._method
        return (
            f"graph.{name}(...) is async: write 'await graph.{name}(...)' in async code or "
            f"a notebook cell, or call graph.{name}_sync(...) in plain code."
        )

    def __bool__(self) -> bool:
        self._explained = True
        raise TypeError(f"{self._explain()} (Without await, it is always true.)")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # a protocol probe (copy, pickle, ...), not a user's read
            raise AttributeError(name)
        self._explained = True
        raise AttributeError(f"{self._explain()} (Its result has the attribute {name!r}.)")

    def __del__(self) -> None:
        if self._make is not None and not self._explained:  # the call silently did nothing
            warnings.warn(
                f"{self._explain()} It was never awaited, so it did nothing.",
                RuntimeWarning,
                stacklevel=2,
            )

    def __repr__(self) -> str:
        return f"<AsyncCall graph.{self._method}(...)>"


def async_call(
    method: Callable[P, Coroutine[Any, Any, T]],
) -> Callable[P, Coroutine[Any, Any, T]]:
    """Make the ``async def`` method ``method`` return an ``AsyncCall`` of its coroutine.

    The method's body runs only when the call is awaited, as a coroutine's would. Its
    signature (``inspect.signature``, ``help()``) keeps the parameters and shows the
    return as the coroutine it is, e.g. ``-> Coroutine[Any, Any, bool]``.
    """
    name = method.__name__

    @functools.wraps(method)
    def call(*args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, T]:
        return AsyncCall(name, lambda: method(*args, **kwargs))

    signature = inspect.signature(method)
    returns = signature.return_annotation
    if returns is not inspect.Signature.empty:
        text = returns if isinstance(returns, str) else inspect.formatannotation(returns)
        signature = signature.replace(return_annotation=f"Coroutine[Any, Any, {text}]")
    call.__signature__ = signature  # type: ignore[attr-defined]
    return call
