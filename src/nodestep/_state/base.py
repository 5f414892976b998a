"""``BaseState``: the base class of typed graph state."""

from __future__ import annotations

from pydantic import BaseModel

__all__ = ["BaseState"]


class BaseState(BaseModel):
    """Base class for a graph's state: a pydantic model with the default configuration.

    Each field becomes a channel when a graph is built: a plain field is replaced by each
    write, and ``Annotated[T, reducer]`` merges writes with the reducer. ``str(state)`` reads
    as pydantic's, for example ``votes=['yes', 'no'] count=2``.

    Every field needs a default, since a new thread starts from the defaults.
    """
