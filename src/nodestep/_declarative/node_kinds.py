"""The node types a manifest declares: ``function`` (by import path), ``update``, and the
types a layer above gives ``load_graph`` (``NodeType``: ``llm``, ``tool``)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from nodestep._declarative.documents import plain
from nodestep._declarative.format import NODE_TYPES
from nodestep._declarative.imports import Importer
from nodestep._declarative.node_types import NodeDeclaration, NodeType
from nodestep._declarative.yaml_tree import Problems, Y
from nodestep._errors import GraphConfigError, StateUpdateError
from nodestep._flow.nodes import Node, node
from nodestep._state.schema import StateSchema

__all__ = ["ENTRY_ATTRIBUTE", "UPDATE_ATTRIBUTE", "make_node", "type_hint"]

UPDATE_ATTRIBUTE = "manifest_update"
"""The attribute an ``update`` node's function carries its values on, so that
``to_yaml`` writes the node back as ``type: update``."""

ENTRY_ATTRIBUTE = "manifest_entry"
"""The attribute the function of a node of a ``NodeType`` carries its manifest keys on
(``type`` and the type's keys), so that ``to_yaml`` writes the node back as declared."""

_AGENT_TYPES = ("llm", "tool")


def make_node(
    name: str,
    data: dict[str, Y],
    kwargs: dict[str, Any],
    importer: Importer,
    problems: Problems,
    state: type[BaseModel] | None,
    node_types: Mapping[str, NodeType],
) -> Node | None:
    """Build the node a manifest entry declares, or return ``None`` after adding problems."""
    kind_y = data.get("type")
    kind = kind_y.value if kind_y is not None else ("update" if "update" in data else "function")
    where = data.get("name") or kind_y or next(iter(data.values()), None)
    if isinstance(kind, str) and (kind in node_types or kind in NODE_TYPES):
        _foreign_keys(name, kind, kind_y is not None, data, node_types, problems)
    if isinstance(kind, str) and kind in node_types and where is not None:
        declared = NodeDeclaration(name, kind, data, state, importer, problems)
        return _typed(node_types[kind], declared, kwargs, where, problems)
    if kind not in NODE_TYPES:
        problems.add(kind_y or where or "?:1:1", type_hint(kind, node_types))
        return None
    if kind == "function":
        fn_y = data.get("function")
        if fn_y is None:
            problems.add(where or "?:1:1", f"node '{name}' needs 'function: package.module:name'")
            return None
        fn = importer.resolve(fn_y, f"the function of node '{name}'")
        if fn is None:
            return None
        if isinstance(fn, Node):
            return _renamed(fn, name, kwargs, data.get("private_state") or fn_y, problems)
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
    if fields is not None:
        _check_values(name, update_y.value, values, state, problems)
    return _node(_update_function(values), name, kwargs, update_y, problems)


_OWN_KEYS = {"function": ("function",), "update": ("update",)}
"""The keys only some node types read, by built-in type; a ``NodeType`` lists its own."""


def _foreign_keys(
    name: str,
    kind: str,
    typed: bool,
    data: dict[str, Y],
    node_types: Mapping[str, NodeType],
    problems: Problems,
) -> None:
    """Report ``function:`` or ``update:`` on a node whose type would ignore it.

    Why: every node takes both keys (they are node keys of the format), but a node runs
    one; the other would be silently dropped, and the node run differently than it reads.
    """
    own = node_types[kind].keys if kind in node_types else _OWN_KEYS[kind]
    for key in ("function", "update"):
        y = data.get(key)
        if y is None or key in own:
            continue
        if not typed:  # both keys, no type: the node would return update: unasked
            problems.add(
                y,
                f"node '{name}' has both 'function:' and 'update:', but a node runs one: "
                f"remove 'update:' to run the function, or 'function:' to return the values",
            )
        elif kind in NODE_TYPES:
            problems.add(
                y,
                f"node '{name}' of type {kind} has '{key}:', which only a node of type {key} "
                f"uses; remove it, or make the node 'type: {key}' without '{kind}:'",
            )
        else:
            keys = ", ".join(own) or "none"
            problems.add(
                y,
                f"node '{name}' of type {kind} has '{key}:', which the type does not use "
                f"(its keys: {keys}); remove it",
            )


def _check_values(
    name: str, given: dict[str, Y], values: dict[str, Any], state: Any, problems: Problems
) -> None:
    """Report each value of ``update:`` its state field refuses, as the run would."""
    try:
        schema = StateSchema.of(state)
    except GraphConfigError:
        return  # a state class that cannot work: Graph() reports it
    for key, value in values.items():
        if key not in schema.fields:
            continue  # reported above
        try:
            schema.validate_update({key: value}, name)
        except StateUpdateError as error:
            problems.add(given[key], f"{error} Fix the value under 'update:'.")


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


def type_hint(kind: Any, node_types: Mapping[str, NodeType]) -> str:
    """Return the problem of an unknown node type, naming the types there are."""
    known = ", ".join([*NODE_TYPES, *(t for t in node_types if t not in NODE_TYPES)])
    text = f"unknown node type {kind!r}; the types are {known}"
    if kind in _AGENT_TYPES:
        text += (
            "; model and tool nodes come from nodestep.agents: pass "
            "load_graph(..., node_types=agent_node_types(models={...}, tools=[...]))"
        )
    return text


def _typed(
    kind: NodeType, declared: NodeDeclaration, kwargs: dict[str, Any], where: Y, problems: Problems
) -> Node | None:
    """Build a node of a ``NodeType`` and give it the manifest's name and settings."""
    for key in kind.required:
        if not declared.has(key):
            declared.problem(
                f"node '{declared.name}' of type {declared.type} needs '{key}' "
                f"({kind.summary or 'see the type'})"
            )
    if declared.failed:
        return None
    made = kind.build(declared)
    if made is None or declared.failed:
        return None
    if not isinstance(made, Node):
        problems.add(
            where,
            f"the builder of node type {declared.type!r} returned {made!r}, not a Node; "
            f"fix the NodeType given to load_graph(node_types=...)",
        )
        return None
    built = _renamed(made, declared.name, kwargs, where, problems)
    if built is not None:
        entry = {"type": declared.type}
        entry.update({k: declared.value(k) for k in kind.keys if declared.has(k)})
        # A bound method takes no attribute: to_yaml then refuses the node, naming it.
        with contextlib.suppress(AttributeError):
            setattr(built.fn, ENTRY_ATTRIBUTE, entry)
    return built


def _renamed(
    made: Node, name: str, kwargs: dict[str, Any], where: Y, problems: Problems
) -> Node | None:
    """Return a node made in Python with the manifest's name and settings.

    Why a new node: the manifest names the node (its identity in the stored history) and
    may add settings, while the object it names may be used elsewhere, so it is left as
    it is. What the node was made with stays unless the manifest sets it; its roles are
    added to. A private state is the node's own: the manifest may name the same class
    (``to_yaml`` writes it), not another. ``where`` is the manifest's ``private_state``
    when it has one, else the place that names the node.
    """
    given, own = kwargs.get("private_state"), made.private_state
    if given is not None and own is not None and given is not own:
        problems.add(
            where,
            f"node '{name}' already keeps a private state ({own.__name__}), not "
            f"{getattr(given, '__name__', given)}; remove 'private_state' from the manifest, "
            f"or name {own.__module__}:{own.__qualname__} there",
        )
        return None
    options: dict[str, Any] = {
        "goto": made.goto or None,
        "timeout": made.timeout,
        "defer": made.defer,
        "retry": made.retry,
        "breaker": made.breaker,
        "private_state": made.private_state,
        "cache": made.cache,
        **kwargs,
        "roles": sorted({*made.roles, *kwargs.get("roles", ())}),
    }
    built = _node(made.fn, name, options, where, problems)
    if built is not None:
        built.state_check = made.state_check
    return built
