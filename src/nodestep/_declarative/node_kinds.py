"""The node types a manifest declares: ``function`` (by import path) and ``update``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from nodestep._declarative.documents import plain
from nodestep._declarative.format import NODE_TYPES
from nodestep._declarative.imports import Importer
from nodestep._declarative.yaml_tree import Problems, Y
from nodestep._errors import GraphConfigError
from nodestep._flow.nodes import Node, node

__all__ = ["UPDATE_ATTRIBUTE", "make_node"]

UPDATE_ATTRIBUTE = "manifest_update"
"""The attribute an ``update`` node's function carries its values on, so that
``to_yaml`` writes the node back as ``type: update``."""


def make_node(
    name: str,
    data: dict[str, Y],
    kwargs: dict[str, Any],
    importer: Importer,
    problems: Problems,
    state: type[BaseModel] | None,
) -> Node | None:
    """Build the node a manifest entry declares, or return ``None`` after adding problems."""
    kind_y = data.get("type")
    kind = kind_y.value if kind_y is not None else ("update" if "update" in data else "function")
    where = data.get("name") or kind_y or next(iter(data.values()), None)
    if kind not in NODE_TYPES:
        problems.add(
            kind_y or where or "?:1:1",
            f"unknown node type {kind!r}; the types are {', '.join(NODE_TYPES)}",
        )
        return None
    if kind == "function":
        fn_y = data.get("function")
        if fn_y is None:
            problems.add(where or "?:1:1", f"node '{name}' needs 'function: package.module:name'")
            return None
        fn = importer.resolve(fn_y, f"the function of node '{name}'")
        if fn is None:
            return None
        return _node(fn, name, kwargs, fn_y, problems)
    update_y = data.get("update")
    if update_y is None or not isinstance(update_y.value, dict):
        problems.add(
            update_y or where or "?:1:1",
            f"node '{name}' of type update needs 'update:', a mapping of state fields to values",
        )
        return None
    fields = getattr(state, "model_fields", None)
    for key, value in update_y.value.items():
        if fields is not None and key not in fields:
            shown = ", ".join(fields)
            problems.add(value, f"'{key}' is not a field of the state class ({shown})")
    values = {k: plain(v) for k, v in update_y.value.items()}
    return _node(_update_function(values), name, kwargs, update_y, problems)


def _update_function(values: dict[str, Any]) -> Any:
    def update(state: Any) -> dict[str, Any]:
        # A fresh copy each run: a reducer must never get the manifest's own lists.
        return {k: _copy(v) for k, v in values.items()}

    setattr(update, UPDATE_ATTRIBUTE, values)
    return update


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _node(fn: Any, name: str, kwargs: dict[str, Any], where: Y, problems: Problems) -> Node | None:
    try:
        return node(fn, name=name, **kwargs)
    except (TypeError, GraphConfigError) as error:
        problems.add(where, f"node '{name}' cannot be made: {error}")
        return None
