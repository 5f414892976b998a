"""Which state flows into a subgraph and back: shared fields, or mapping functions.

In: the child run starts from the child's defaults with an input, as any new turn does:
``state_in(parent_state)``, merged through the child's reducers as any input is; else the
parent's values of the shared fields (every field, when both graphs have one state class),
each as ``Replace(value)``. A shared field starts where the parent stands rather than being
merged into the child's default: a reducer field with a non-empty default (``["start"]``
under ``add``, ``1`` under ``operator.add``) would otherwise hold the default twice, and,
changed in the child's eyes, flow back to the parent doubled. The child's other fields
start from its defaults.

Out: the task's update in the parent: ``state_out(child_final_state)``, else the shared
fields the child changed, each written so that the parent's reducer keeps what it had:
the new items of an ``add`` list, the new or changed keys of a ``merge_dict`` dict, the
new value of a plain field, and ``Replace(value)`` for a field whose reducer cannot take
the change as an update (a custom reducer, or items removed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from nodestep._state.reducers import Replace, add, merge_dict
from nodestep._state.schema import StateSchema
from nodestep._state.view import same_stored_form

__all__ = ["StateMap"]

MapFn = Callable[[Any], Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class StateMap:
    """How a subgraph node maps its state in and out.

    Attributes:
        share: The fields both graphs declare that flow both ways, or ``None``: every
            field (the two graphs must have one state class) where no function is given.
        state_in: Builds the child's input from the parent's state, or ``None``.
        state_out: Builds the parent's update from the child's final state, or ``None``.
    """

    share: tuple[str, ...] | None = None
    state_in: MapFn | None = None
    state_out: MapFn | None = None

    def problems(self, node: str, parent: StateSchema, child: StateSchema) -> list[str]:
        """Return what keeps the mapping from working between these two state classes."""
        out: list[str] = []
        same = parent.cls is child.cls
        if self.share is None and not same and (self.state_in is None or self.state_out is None):
            missing = " and ".join(
                f"{n}="
                for n, f in (("state_in", self.state_in), ("state_out", self.state_out))
                if f is None
            )
            out.append(
                f"Subgraph node '{node}' has state {child.cls.__name__} and its graph "
                f"{parent.cls.__name__}, and nothing says which state flows between them; "
                f"pass share=[fields both declare], or {missing} to subgraph()"
            )
        for field in self.share or ():
            for schema, whose in ((parent, "the parent's"), (child, "the subgraph's")):
                if field not in schema.fields:
                    out.append(
                        f"Subgraph node '{node}' shares field '{field}', which {whose} state "
                        f"{schema.cls.__name__} does not declare; share only fields both "
                        f"declare, or map them with state_in=/state_out="
                    )
        return out

    def input(self, parent_state: BaseModel) -> dict[str, Any]:
        """Return the child run's input: ``state_in``'s dict, else the shared fields as
        ``Replace`` writes, so the child starts from the parent's values (see the module).

        Raises:
            TypeError: ``state_in`` returned something other than a dict.
        """
        if self.state_in is not None:
            return _mapping(self.state_in(parent_state), "state_in")
        fields = self.share if self.share is not None else type(parent_state).model_fields
        return {name: Replace(getattr(parent_state, name)) for name in fields}

    def output(
        self, parent: StateSchema, parent_state: BaseModel, final: BaseModel
    ) -> dict[str, Any]:
        """Return the task's update from the child's final state.

        Raises:
            TypeError: ``state_out`` returned something other than a dict.
        """
        if self.state_out is not None:
            return _mapping(self.state_out(final), "state_out")
        fields = self.share if self.share is not None else list(parent.fields)
        update: dict[str, Any] = {}
        for name in fields:
            old, new = getattr(parent_state, name), getattr(final, name)
            if new is old or (new == old and same_stored_form(new, old)):
                continue
            update[name] = _write(getattr(parent.fields[name].channel, "reducer", None), old, new)
        return update


def _write(reducer: Any, old: Any, new: Any) -> Any:
    """Return the write that takes a field from ``old`` to ``new`` through ``reducer``."""
    if reducer is None:
        return new
    if reducer is add and isinstance(old, list) and isinstance(new, list):
        grown = new[: len(old)] == old
        return new[len(old) :] if grown else Replace(new)
    if reducer is merge_dict and isinstance(old, dict) and isinstance(new, dict):
        grown = old.keys() <= new.keys()
        return (
            {k: v for k, v in new.items() if k not in old or old[k] != v} if grown else Replace(new)
        )
    return Replace(new)


def _mapping(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(
            f"A subgraph's {what}= function returns a dict of state fields, got "
            f"{type(value).__name__}: {value!r:.80}."
        )
    return dict(value)
