"""How an OpenAPI tool writes a path or query argument into the URL: the parameter's style.

OpenAPI says how a value that is an array or an object is serialized (``style`` and
``explode``; the defaults are ``simple`` in a path and ``form`` with ``explode: true`` in
a query). ``form`` with explode repeats an array's name (``id=1&id=2``) and gives each
property of an object a pair of its own (``status=open&owner=ada``); without explode they
join with commas (``id=1,2``, ``filter=status,open,owner,ada``). ``deepObject`` sends
``filter[status]=open``; ``spaceDelimited`` and ``pipeDelimited`` join an array with a
space or ``|``. In a path, ``simple`` joins with commas (``k=v`` pairs with explode). A
value nested inside an array or an object, which OpenAPI leaves undefined, is sent as
JSON text. The path styles ``label`` and ``matrix`` are refused when the document is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from nodestep._errors import GraphConfigError

__all__ = ["Param", "param_of", "path_text", "query_pairs"]

_STYLES = {
    "path": ("simple",),
    "query": ("form", "spaceDelimited", "pipeDelimited", "deepObject"),
}
_JOINS = {"spaceDelimited": " ", "pipeDelimited": "|"}


@dataclass(frozen=True, slots=True)
class Param:
    """Where one argument goes, and how it is written.

    Attributes:
        place: ``"path"`` or ``"query"``.
        name: The parameter's name in the document.
        style: The OpenAPI style (``"simple"``, ``"form"``, ``"deepObject"``...).
        explode: Whether arrays and objects are spread out.
    """

    place: str
    name: str
    style: str
    explode: bool


def param_of(param: Mapping[str, Any], place: str, name: str, where: str) -> Param:
    """Return the ``Param`` of a parameter of the document, with OpenAPI's defaults.

    Raises:
        GraphConfigError: a style tools do not send (``label``, ``matrix``) or none of
            OpenAPI's.
    """
    style = param.get("style", _STYLES[place][0])
    if style not in _STYLES[place]:
        raise GraphConfigError(
            f"OpenAPI {where} sends the {place} parameter {name!r} in style {style!r}; "
            f"tools send a {place} parameter in style "
            f"{' or '.join(map(repr, _STYLES[place]))}. Fix the document, or leave the "
            f"operation out with operations=[...]."
        )
    explode = param.get("explode", style == "form")
    if not isinstance(explode, bool):
        raise GraphConfigError(
            f"OpenAPI {where} has explode={explode!r} for the {place} parameter {name!r}; "
            f"explode is true or false. Fix the document."
        )
    return Param(place, name, style, explode)


def query_pairs(param: Param, value: Any) -> list[tuple[str, str]]:
    """Return the query string's ``(name, text)`` pairs of one argument."""
    name, style = param.name, param.style
    if isinstance(value, dict):
        items = [(str(k), _text(v)) for k, v in value.items() if v is not None]
        if style == "deepObject":
            return [(f"{name}[{k}]", text) for k, text in items]
        if param.explode:
            return items
        return [(name, ",".join(part for item in items for part in item))]
    if isinstance(value, list):
        texts = [_text(item) for item in value]
        if param.explode and style == "form":
            return [(name, text) for text in texts]
        return [(name, _JOINS.get(style, ",").join(texts))]
    return [(name, _text(value))]


def path_text(param: Param, value: Any) -> str:
    """Return one path argument as text, in style ``simple``."""
    if isinstance(value, dict):
        items = [(str(k), _text(v)) for k, v in value.items() if v is not None]
        if param.explode:
            return ",".join(f"{k}={text}" for k, text in items)
        return ",".join(part for item in items for part in item)
    if isinstance(value, list):
        return ",".join(_text(item) for item in value)
    return _text(value)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list):
        return orjson.dumps(value).decode()
    return "" if value is None else str(value)
