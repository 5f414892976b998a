"""Turn a manifest node's settings into ``node()`` keywords, each checked at its place.

The table in ``format`` checks each setting's shape. Here the import paths in it are
resolved under the manifest's allow-list (``private_state``, and the classes in a
policy's ``on:``) and the policy objects are built, so a setting that cannot work
(``jitter: 2``) is reported at its file, line and column like any other problem.
"""

from __future__ import annotations

import builtins
import inspect
from typing import Any

from pydantic import BaseModel

from nodestep._declarative.documents import plain
from nodestep._declarative.format import SETTINGS, is_import_path
from nodestep._declarative.imports import Importer
from nodestep._declarative.yaml_tree import Problems, Y
from nodestep._errors import GraphConfigError
from nodestep._flow.cache_policy import CachePolicy
from nodestep._flow.edges import END
from nodestep._flow.nodes import node

__all__ = ["node_keywords"]

_NODE_PARAMETERS = frozenset(inspect.signature(node).parameters)


def node_keywords(data: dict[str, Y], importer: Importer, problems: Problems) -> dict[str, Any]:
    """Check the per-node settings in ``data`` and return them as ``node()`` keywords."""
    kwargs: dict[str, Any] = {}
    for setting in SETTINGS:
        y = data.get(setting.key)
        if y is None:
            continue
        value = plain(y)
        problem = setting.check(value)
        if problem:
            problems.add(y, f"'{setting.key}' {problem}")
        elif setting.keyword not in _NODE_PARAMETERS:
            problems.add(
                y,
                f"'{setting.key}' is not available in this build of nodestep (node() has "
                f"no {setting.keyword}= keyword); remove it, or install a nodestep that has it",
            )
        elif setting.key == "private_state":  # an import path, under the allow-list
            kwargs[setting.keyword] = _model(y, importer, problems)
        elif setting.key == "cache":  # its key function by import path, under the allow-list
            kwargs[setting.keyword] = _cache_policy(y, importer, problems)
        elif (value := _error_classes(y, value, importer, problems)) is not None:
            try:
                kwargs[setting.keyword] = setting.build(value)
            except GraphConfigError as error:  # a policy that cannot work, e.g. jitter 2
                problems.add(_culprit(y, error), f"'{setting.key}': {error}")
    goto = data.get("goto")
    if goto is not None:
        names = plain(goto)
        if isinstance(names, list) and names and all(isinstance(n, str) for n in names):
            kwargs["goto"] = [END if n == "END" else n for n in names]
        else:
            problems.add(goto, f"'goto' takes a non-empty list of node names, got {names!r}")
    return kwargs


def _model(y: Y, importer: Importer, problems: Problems) -> Any:
    cls = importer.resolve(y, "private state class")
    if cls is not None and not (isinstance(cls, type) and issubclass(cls, BaseModel)):
        problems.add(y, f"private state class '{y.value}' is not a pydantic model class")
        return None
    return cls


def _cache_policy(y: Y, importer: Importer, problems: Problems) -> CachePolicy | None:
    """Return the ``CachePolicy`` of a checked ``cache:`` mapping, its ``key`` imported."""
    key_y = y.value.get("key")
    key = None
    if key_y is not None:
        key = importer.resolve(key_y, "the cache key function")
        if key is None:
            return None
        if not callable(key) or isinstance(key, type):
            problems.add(key_y, f"cache key '{key_y.value}' is not a function of the state")
            return None
    ttl = y.value.get("ttl")
    return CachePolicy(key=key, ttl=None if ttl is None else ttl.value)


def _error_classes(y: Y, value: Any, importer: Importer, problems: Problems) -> Any:
    """Replace the import paths in a policy's ``on:`` by the exception classes they name.

    Returns ``None`` (after adding problems) when a path does not name one.
    """
    on = y.value.get("on") if isinstance(y.value, dict) else None
    if on is None:
        return value
    items = on.value if isinstance(on.value, list) else [on]
    found: list[Any] = []
    for item in items:
        if not is_import_path(item.value):
            found.append(item.value)  # a class name, matched by name
            continue
        cls = _builtin(item.value) or importer.resolve(item, "the exception class")
        if cls is not None and not (isinstance(cls, type) and issubclass(cls, BaseException)):
            problems.add(item, f"'{item.value}' is not an exception class; name one, or its name")
            cls = None
        found.append(cls)
    if any(cls is None for cls in found):
        return None
    # One item written alone stays one item (retry_on=TimeoutError); a list is a tuple.
    return {**value, "on": found if isinstance(on.value, list) else found[0]}


def _builtin(path: str) -> Any:
    # The builtins module is always imported and runs no code, so an allow-list does
    # not need to name it for 'builtins:ConnectionError'.
    module, _, name = path.partition(":")
    if module != "builtins":
        return None
    return getattr(builtins, name, None)


def _culprit(y: Y, error: GraphConfigError) -> Y:
    """Point at the key a policy's error names (``RetryPolicy(jitter=...)``), if written."""
    if isinstance(y.value, dict):
        for key, value in y.value.items():
            if f"({key}=...)" in str(error):
                found: Y = value
                return found
    return y
