"""``BaseState``: the base class of typed graph state."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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

    A state is read by attribute (``state.count``), not as LangGraph's dict state is:
    ``state["count"]``, ``state["count"] = 1`` and ``state.get("count")`` raise the error
    they would raise anyway (a ``TypeError``, an ``AttributeError``), naming the way that
    works.
    """

    def __repr__(self) -> str:
        return model_repr(self)

    if not TYPE_CHECKING:  # for type checkers, a state is not subscriptable and has no get

        def __getitem__(self, key: Any) -> Any:
            raise TypeError(
                f"{type(self).__name__!r} object is not subscriptable: a state is read by "
                f"attribute, {_attribute(key)}"
            )

        def __setitem__(self, key: Any, value: Any) -> None:
            raise TypeError(
                f"{type(self).__name__!r} object does not support item assignment: a node "
                f"returns its updates, return {{{key!r}: ...}}"
            )

        def __getattr__(self, name: str) -> Any:
            # Only a failed lookup gets here (fields live in the instance's __dict__);
            # pydantic's own __getattr__ serves private attributes.
            try:
                return super().__getattr__(name)
            except AttributeError as error:
                if name != "get":
                    raise
                raise AttributeError(
                    f"{error}: a state is read by attribute, state.<field>, or "
                    "getattr(state, name, default) for a name held in a variable",
                    name=name,
                    obj=self,
                ) from None


def _attribute(key: Any) -> str:
    """How to read ``key`` by attribute: ``state.key``, or ``getattr`` for another string."""
    if not isinstance(key, str):
        return "state.<field>"
    return f"state.{key}" if key.isidentifier() else f"getattr(state, {key!r})"
