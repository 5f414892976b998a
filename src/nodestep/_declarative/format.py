"""The manifest format, version 1: its keys, the per-node settings, and its JSON Schema.

The settings table is the one place a manifest key meets a ``node()`` keyword: each row
checks the shape of its value and names the keyword it becomes. A row whose keyword this
build's ``node()`` does not take is refused at load ("not available in this build"),
so adding the keyword to ``node()`` is all it takes to make the row work.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nodestep._errors import GraphConfigError
from nodestep._flow.credentials import check_roles
from nodestep._flow.resilience import CircuitBreaker, RetryPolicy
from nodestep._graph.manifest import MANIFEST_VERSION
from nodestep._numbers import is_finite_number, shown_number

__all__ = [
    "EDGE_KEYS",
    "GRAPH_KEYS",
    "MANIFEST_VERSION",
    "NODE_KEYS",
    "NODE_TYPES",
    "SETTINGS",
    "Setting",
    "manifest_json_schema",
]

NODE_TYPES = ("function", "update")
"""``function``: runs the function at ``function:``. ``update``: returns ``update:`` as is."""

GRAPH_KEYS = (
    "nodestep",
    "kind",
    "name",
    "description",
    "state",
    "context",
    "start",
    "max_steps",
    "timeout",
    "middleware",
    "nodes",
)
EDGE_KEYS = ("target", "when")

_IMPORT_PATH = re.compile(
    r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"
)


def is_import_path(text: Any) -> bool:
    """Tell whether ``text`` reads ``package.module:name``."""
    return isinstance(text, str) and _IMPORT_PATH.match(text) is not None


def _positive_number(value: Any) -> str | None:
    if is_finite_number(value) and value > 0:
        return None
    return f"takes a positive number of seconds, got {shown_number(value)}"


def _fields(value: Any, shape: dict[str, tuple[str, bool]], example: str) -> str | None:
    """Check a mapping against ``{key: (kind, required)}``; kinds: int, number, names."""
    if not isinstance(value, dict):
        return f"takes a mapping such as {example}, got {value!r}"
    for key in value:
        if key not in shape:
            return f"has the unknown key '{key}' (known: {', '.join(shape)})"
    for key, (kind, required) in shape.items():
        if key not in value:
            if required:
                return f"needs '{key}', e.g. {example}"
            continue
        v = value[key]
        if kind == "int" and not (isinstance(v, int) and not isinstance(v, bool) and v >= 1):
            return f"'{key}' takes a whole number of at least 1, got {v!r}"
        if kind == "number" and not (is_finite_number(v) and v >= 0):
            return f"'{key}' takes a number of seconds, 0 or more, got {shown_number(v)}"
        if kind == "seed" and not (isinstance(v, int) and not isinstance(v, bool)):
            return f"'{key}' takes a whole number, got {v!r}"
        if kind == "names" and not (
            _name(v) or (isinstance(v, list) and v and all(_name(x) for x in v))
        ):
            return (
                f"'{key}' takes an exception class name or import path (TimeoutError, "
                f"app.errors:RateLimited), or a list of them, got {v!r}"
            )
    return None


def _name(x: Any) -> bool:
    return isinstance(x, str) and (x.isidentifier() or is_import_path(x))


def _retry(value: Any) -> str | None:
    shape = {
        "attempts": ("int", True),
        "backoff": ("number", False),
        "multiplier": ("number", False),
        "max_backoff": ("number", False),
        "jitter": ("number", False),
        "deadline": ("number", False),
        "seed": ("seed", False),
        "on": ("names", False),
    }
    return _fields(value, shape, "{attempts: 3, backoff: 0.5}")


def _breaker(value: Any) -> str | None:
    shape = {
        "failures": ("int", True),
        "window": ("number", False),
        "cooldown": ("number", False),
        "on": ("names", False),
    }
    return _fields(value, shape, "{failures: 5, cooldown: 30}")


def _policy(cls: type, on: str) -> Callable[[Any], Any]:
    """Return a ``build`` that makes ``cls`` from a checked mapping; ``on`` names the
    keyword the manifest's ``on:`` (exception class names) becomes."""

    def build(value: dict[str, Any]) -> Any:
        kwargs = {k: v for k, v in value.items() if k != "on"}
        if "on" in value:
            given = value["on"]
            kwargs[on] = tuple(given) if isinstance(given, list) else given
        return cls(**kwargs)

    return build


def _roles(value: Any) -> str | None:
    if not (
        isinstance(value, list) and value and all(isinstance(r, str) and r.strip() for r in value)
    ):
        return f"takes a non-empty list of role names, got {value!r}"
    for role in value:
        try:
            check_roles([role], "")
        except GraphConfigError as error:
            # node()'s own rule, so a manifest takes exactly the roles node() does. Its
            # message opens with the node's name, which a setting's check is not given,
            # so only the rule after it is kept.
            rule = str(error).partition("; ")[2]
            return f"has {role!r}, which is not a role name: {rule}"
    return None


def _private_state(value: Any) -> str | None:
    if is_import_path(value):
        return None
    return f"takes the import path of a state class, e.g. app.state:Notes, got {value!r}"


def _defer(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    return f"takes true or false, got {value!r}"


def _cache(value: Any) -> str | None:
    example = "{ttl: 3600, key: app.nodes:city_key}, or {} to key on the whole input"
    if not isinstance(value, dict):
        return f"takes a mapping such as {example}, got {value!r}"
    for key in value:
        if key not in ("ttl", "key"):
            return f"has the unknown key '{key}' (known: ttl, key)"
    if "ttl" in value and _positive_number(value["ttl"]):
        return f"'ttl' {_positive_number(value['ttl'])}"
    if "key" in value and not is_import_path(value["key"]):
        return (
            f"'key' takes the import path of a function of the state, e.g. "
            f"app.nodes:city_key, got {value['key']!r}"
        )
    return None


@dataclass(frozen=True, slots=True)
class Setting:
    """A per-node setting: its manifest key, the ``node()`` keyword, its check and schema.

    ``build`` turns the checked plain value into what the keyword takes (seconds as a
    float; a policy object for a setting whose keyword takes one).
    """

    key: str
    keyword: str
    check: Callable[[Any], str | None]
    schema: dict[str, Any]
    build: Callable[[Any], Any] = lambda value: value


_NUMBER = {"type": "number", "minimum": 0}
_ERRORS = {
    "oneOf": [{"type": "string"}, {"type": "array", "minItems": 1, "items": {"type": "string"}}]
}
SETTINGS = (
    Setting("timeout", "timeout", _positive_number, {"type": "number", "exclusiveMinimum": 0},
            float),
    Setting("retry", "retry", _retry, {
        "type": "object", "additionalProperties": False, "required": ["attempts"],
        "properties": {"attempts": {"type": "integer", "minimum": 1}, "backoff": _NUMBER,
                       "multiplier": {"type": "number", "minimum": 1},
                       "max_backoff": _NUMBER, "jitter": {"type": "number", "minimum": 0,
                                                          "maximum": 1},
                       "deadline": {"type": "number", "exclusiveMinimum": 0},
                       "seed": {"type": "integer"}, "on": _ERRORS},
    }, _policy(RetryPolicy, "retry_on")),
    Setting("circuit_breaker", "breaker", _breaker, {
        "type": "object", "additionalProperties": False, "required": ["failures"],
        "properties": {"failures": {"type": "integer", "minimum": 1}, "window": _NUMBER,
                       "cooldown": _NUMBER, "on": _ERRORS},
    }, _policy(CircuitBreaker, "failure_on")),
    Setting("roles", "roles", _roles,
            {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
            list),
    Setting("private_state", "private_state", _private_state,
            {"type": "string", "pattern": _IMPORT_PATH.pattern}),
    Setting("defer", "defer", _defer, {"type": "boolean"}),
    Setting("cache", "cache", _cache, {
        "type": "object", "additionalProperties": False,
        "properties": {"ttl": {"type": "number", "exclusiveMinimum": 0},
                       "key": {"type": "string", "pattern": _IMPORT_PATH.pattern}},
    }),
)  # fmt: skip

NODE_KEYS = ("name", "description", "type", "function", "update", "goto", "edges",
             *(s.key for s in SETTINGS))  # fmt: skip


def manifest_json_schema(node_types: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Return the JSON Schema of a manifest document, for editors and CI checks.

    It describes the shape; the loader checks more (import paths resolve, targets exist,
    conditions fit the state) and reports every problem with its line and column.

    Args:
        node_types: The node types a manifest may use besides the built-in ones, as
            given to ``load_graph`` (e.g. ``agent_node_types()``): their names join
            ``type``'s values and their keys the node's keys.
    """
    path = {"type": "string", "pattern": _IMPORT_PATH.pattern}
    node_props = _node_properties(path, dict(node_types or {}))
    node = {
        "type": "object",
        "additionalProperties": False,
        "required": ["name"],
        "properties": node_props,
    }
    version = {"const": MANIFEST_VERSION}
    graph = {
        "type": "object",
        "additionalProperties": False,
        "required": ["nodestep", "kind", "name", "state", "start"],
        "properties": {
            "nodestep": version,
            "kind": {"const": "Graph"},
            "name": {"type": "string"},
            "description": {"type": "string"},
            "state": path,
            "context": path,
            "start": {"type": "string"},
            "max_steps": {"type": "integer", "minimum": 1},
            "timeout": {"type": "number", "exclusiveMinimum": 0},
            "middleware": {"type": "array", "items": path},
            "nodes": {"type": "array", "items": node},
        },
    }
    node_doc = {
        "type": "object",
        "additionalProperties": False,
        "required": ["nodestep", "kind", "name"],
        "properties": {"nodestep": version, "kind": {"const": "Node"}, **node_props},
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://nodestep.dev/schemas/manifest-v{MANIFEST_VERSION}.json",
        "title": f"nodestep graph manifest, version {MANIFEST_VERSION}",
        "oneOf": [graph, node_doc],
    }  # fmt: skip


def _node_properties(path: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Return the schema of a node's keys: the built-in ones, then the given types'."""
    edge = {
        "type": "object",
        "additionalProperties": False,
        "required": ["target"],
        "properties": {"target": {"type": "string"}, "when": {"type": "string"}},
    }
    node_props: dict[str, Any] = {
        "name": {"type": "string", "minLength": 1},
        "description": {"type": "string"},
        "type": {"enum": [*NODE_TYPES, *(t for t in extra if t not in NODE_TYPES)]},
        "function": path,
        "update": {"type": "object"},
        "goto": {"type": "array", "items": {"type": "string"}},
        "edges": {"type": "array", "items": edge},
        **{s.key: s.schema for s in SETTINGS},
    }
    for kind in extra.values():
        for key in kind.keys:
            node_props.setdefault(key, dict(kind.schema.get(key, {})))
    return node_props
