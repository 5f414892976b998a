"""``BaseState``: the base class of typed graph state."""

from __future__ import annotations

from pydantic import BaseModel

from nodestep._display.text import model_repr

__all__ = ["BaseState"]


class BaseState(BaseModel):
    """Base class for a graph's state: a pydantic model with the default configuration.

    Each field becomes a channel when a graph is built: a plain field is replaced by each
    write, and ``Annotated[T, reducer]`` merges writes with the reducer. ``str(state)`` reads
    as pydantic's, for example ``votes=['yes', 'no'] count=2``; ``repr(state)`` too, except
    that each value is shortened (a long list shows its first items and ``...``), so a big
    state prints as one short line.

    Every field needs a default, since a new thread starts from the defaults.
    """

    def __repr__(self) -> str:
        return model_repr(self)
