"""``CachePolicy``: how a node's results are kept and reused, given with ``@node(cache=...)``.

A policy is data, like edges: it says what makes two calls of a node the same (the key) and
how long a result stays good (``ttl``). The engine (``_engine.node_cache``) keeps the
entries, in the graph's ``cache_store``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nodestep._numbers import is_finite_number, shown_number

__all__ = ["CachePolicy"]


@dataclass(frozen=True, slots=True)
class CachePolicy:
    """Reuse a node's result for the same input instead of running the node again.

    Give it to a node as ``@node(cache=CachePolicy(...))``. Before a task of the node runs,
    the engine computes the task's key; when the graph's cache store holds a result for
    the key that has not expired, the task takes that result (its update and its own
    routes) and the node's code does not run. The task's history record is marked
    ``"cached": true``.

    Args:
        key: A function of the node's state (the typed state the node would get, with a
            ``Send`` payload laid over it) that returns JSON data naming what the result
            depends on, e.g. ``lambda state: state.city``. ``None`` (the default) keys on
            the whole input: every field's value.
        ttl: Seconds a stored result stays good, on the graph's clock; ``None`` (the
            default) keeps it until the store forgets it.

    Raises:
        TypeError: ``key`` is not callable, or ``ttl`` is not a positive number.
    """

    key: Callable[[Any], Any] | None = None
    ttl: float | None = None

    def __post_init__(self) -> None:
        if self.key is not None and not callable(self.key):
            raise TypeError(
                f"CachePolicy(key=...) takes a function of the state that returns what the "
                f"result depends on, e.g. key=lambda state: state.city; got {self.key!r}."
            )
        ttl = self.ttl
        if ttl is not None:
            if not (is_finite_number(ttl) and ttl > 0):
                raise TypeError(
                    f"CachePolicy(ttl=...) takes a positive number of seconds, or None to keep "
                    f"results until the store forgets them; got {shown_number(ttl)}."
                )
            object.__setattr__(self, "ttl", float(ttl))
