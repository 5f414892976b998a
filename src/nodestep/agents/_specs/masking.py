"""Keep the call's context out of everything an agent stores.

``context=`` is call-time data: no byte of it may reach a store. The agent's own writes
never hold it, but text made by code that saw it can: a tool's result or error, a
function's output, a failure's message. ``Masks`` holds the context's texts for one step
(set by ``Agent.step`` and ``Agent.stream`` with ``masked``, in a context variable, so
concurrent steps of one agent each mask their own) and ``mask`` replaces them in a text
before the text is stored. The agent's graph run without a step (by a server, a worker or
the user's own code) masks the context each node is called with (``masking``).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = ["MASK", "Masks", "mask", "masked", "masking", "texts_of"]

MASK = "[context]"
"""What stands in stored text for a value of the call's context."""

_SHORTEST = 4  # a shorter value ("en", 7) is everywhere in text; masking it would garble
_BUDGET = 2000  # values looked at, at most


class Masks:
    """The texts of one call's context, longest first.

    Args:
        texts: The texts to mask.
    """

    __slots__ = ("texts",)

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts

    def apply(self, text: str) -> str:
        """Return ``text`` with each of the texts replaced by ``MASK``."""
        for secret in self.texts:
            if secret in text:
                text = text.replace(secret, MASK)
        return text


_NONE = Masks([])
_CURRENT: ContextVar[Masks] = ContextVar("nodestep_agent_masks", default=_NONE)
# The default is never changed in place: a step sets a Masks of its own.


@contextmanager
def masked(masks: Masks) -> Iterator[None]:
    """Mask ``masks``' texts in what the code inside stores, and in the runs it starts
    (their tasks copy the context variables)."""
    token = _CURRENT.set(masks)
    try:
        yield
    finally:
        _CURRENT.reset(token)


T = TypeVar("T")


def masking(
    node_fn: Callable[..., Awaitable[T]], context_of: Callable[[Any], Any]
) -> Callable[..., Awaitable[T]]:
    """Return ``node_fn`` masking the context it is called with, when no step set masks.

    ``context_of(ctx)`` reads a node call's context. Why here and not only in the step:
    a served agent's runs (and a worker's, and ``agent.graph.invoke``) never pass through
    ``Agent.step``, and the context must stay out of their stores too.
    """

    @functools.wraps(node_fn)
    async def masked_node(state: Any, ctx: Any, **more: Any) -> T:
        if _CURRENT.get() is not _NONE:  # a step's: it masks its whole run
            return await node_fn(state, ctx, **more)
        with masked(Masks(texts_of(context_of(ctx)))):
            return await node_fn(state, ctx, **more)

    return masked_node


def texts_of(context: Any) -> list[str]:
    """Return the texts of every string and number in ``context`` (dicts, lists, models)."""
    found: set[str] = set()
    todo = [context]
    seen = 0
    while todo and seen < _BUDGET:
        value = todo.pop()
        seen += 1
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            text = str(value)
            if len(text) >= _SHORTEST:
                found.add(text)
        elif isinstance(value, dict):
            todo.extend(value.values())
        elif isinstance(value, list | tuple | set | frozenset):
            todo.extend(value)
        elif isinstance(value, BaseModel):
            todo.extend(value.__dict__.values())
    return sorted(found, key=len, reverse=True)


def mask(text: str) -> str:
    """Return ``text`` with the running step's context values replaced by ``MASK``."""
    return _CURRENT.get().apply(text)
