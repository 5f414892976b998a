"""The new-run form, made from a graph's state schema, and the input it posts.

Each field gets the control its type suggests: a chat box for a list of messages, a
yes/no choice for a ``bool``, a number box for an ``int`` or ``float``, a text box for a
``str``, and a JSON box for anything else. A control left empty sends nothing, so the
field keeps its default.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from nodestep import Graph

__all__ = ["FormError", "FormField", "form_fields", "read_input"]

Kind = Literal["chat", "bool", "int", "float", "str", "json"]


@dataclass(frozen=True, slots=True)
class FormField:
    """One control of the new-run form."""

    name: str
    kind: Kind
    type: str


class FormError(ValueError):
    """A value of the form cannot be read; the message names the field and the fix."""


def _kind(annotation: Any) -> Kind:
    text = str(annotation)
    if "Message" in text and ("list" in text or "Sequence" in text):
        return "chat"
    simple: dict[Any, Kind] = {bool: "bool", int: "int", float: "float", str: "str"}
    return simple.get(annotation, "json")


def form_fields(graph: Graph[Any]) -> list[FormField]:
    """Return the controls of the new-run form for ``graph``, in field order."""
    return [
        FormField(name, _kind(spec.annotation), getattr(spec.annotation, "__name__", None) or "")
        for name, spec in graph.schema.fields.items()
    ]


_SHOWN = {"int": "a whole number", "float": "a number", "bool": "true or false"}


def _value(item: FormField, text: str) -> Any:
    if item.kind == "chat":
        return [{"type": "human", "content": text}]
    if item.kind == "str":
        return text
    if item.kind == "bool" and text in ("true", "false"):
        return text == "true"
    try:
        if item.kind == "int":
            return int(text)
        if item.kind == "float":
            return float(text)
        return json.loads(text)
    except ValueError as e:
        shown = _SHOWN.get(item.kind, "JSON")
        raise FormError(
            f"Field {item.name!r} must be {shown}; got {text!r}. Fix the value, or leave it "
            f"empty to keep the default."
        ) from e


def read_input(graph: Graph[Any], form: dict[str, str]) -> dict[str, Any]:
    """Return the run's input from the posted form; empty controls are left out.

    Raises:
        FormError: a number or JSON box holds text that is not one.
    """
    values: dict[str, Any] = {}
    for item in form_fields(graph):
        text = form.get(f"field.{item.name}", "").strip()
        if text:
            values[item.name] = _value(item, text)
    return values
