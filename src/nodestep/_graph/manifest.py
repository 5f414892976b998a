"""Write a graph as a YAML manifest (format version 1), which ``load_graph`` reads back.

It lives with ``Graph`` (``graph.to_yaml()``); the loader, above it, is
``nodestep._declarative``. A manifest names code by import path and routes by condition
strings, one edge taken after a node, so a graph with a Python predicate, a ``branch()``,
a list fan-out (``a >> [b, c]``), a join (``[b, c] >> d``) or a function without an import
path cannot be written: each such part is reported, with its fix, all at once.

A node's settings are the inverse of the loader's settings table: ``retry`` and
``circuit_breaker`` as mappings of their numbers, ``roles`` as a list, ``private_state``
as an import path, ``defer`` when true, ``cache`` as ``{ttl, key}`` (the key function by
import path). Which errors count (``retry_on``, ``failure_on``) is written as
``on:``: a class name stays a name, a class becomes its import path
(``builtins:ConnectionError`` for a builtin one), so the loaded policy is equal to the
written one. A function that chooses the errors has no text form, so it is reported, as
a Python predicate in a route is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from nodestep._conditions.condition import CompiledCondition, Condition
from nodestep._errors import GraphConfigError
from nodestep._flow.cache_policy import CachePolicy
from nodestep._flow.drawing import import_path
from nodestep._flow.edges import END
from nodestep._flow.nodes import Node
from nodestep._flow.resilience import CircuitBreaker, ErrorMatch, RetryPolicy
from nodestep._flow.routing import When
from nodestep._flow.validation import Flow, Join

__all__ = ["MANIFEST_VERSION", "manifest_data", "manifest_text"]

MANIFEST_VERSION = 1
"""The manifest format version; a manifest says it as ``nodestep: 1``."""

_DEFAULT_RETRY = RetryPolicy()


def manifest_data(
    flow: Flow,
    *,
    name: str,
    state: type[BaseModel],
    max_steps: int,
    timeout: float | None,
    middleware: Sequence[Any] = (),
) -> dict[str, Any]:
    """Return the manifest of a graph as plain data.

    Raises:
        GraphConfigError: listing every part a manifest cannot express.
    """
    problems: list[str] = []
    data: dict[str, Any] = {"nodestep": MANIFEST_VERSION, "kind": "Graph", "name": name}
    data["state"] = _path(state, f"The state class {state.__name__!r}", problems)
    context = _context_type(flow)
    if context is not None:
        data["context"] = _path(context, "The context type", problems)
    data["start"] = flow.start
    data["max_steps"] = max_steps
    if timeout is not None:
        data["timeout"] = timeout
    if middleware:
        data["middleware"] = [_middleware(m, problems) for m in middleware]
    data["nodes"] = [_node(n, flow, problems) for n in flow.nodes.values()]
    if problems:
        listing = "\n".join(f"- {p}" for p in problems)
        raise GraphConfigError(
            f"Graph '{name}' cannot be written as a manifest that loads back:\n{listing}",
            problems,
        )
    return data


def manifest_text(data: dict[str, Any]) -> str:
    """Return manifest data as YAML text.

    Raises:
        GraphConfigError: PyYAML is not installed.
    """
    try:
        import yaml
    except ImportError:
        raise GraphConfigError(
            "Writing YAML manifests needs PyYAML, which is not installed; run "
            "pip install 'nodestep[yaml]'."
        ) from None
    text: str = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
    return text


def _path(obj: Any, what: str, problems: list[str]) -> str:
    path = import_path(obj)
    module, _, qualname = path.partition(":")
    parts = (*module.split("."), *qualname.split("."))
    if not all(p.isidentifier() for p in parts) or getattr(obj, "__self__", None) is not None:
        problems.append(
            f"{what} has no import path ({path!r}); a manifest names code by import path, "
            f"so define it with def or class at the top level of a module"
        )
    return path


def _middleware(made: Any, problems: list[str]) -> str:
    """Return the import path of a middleware's class, which the loader makes anew.

    The loader makes each without arguments, so only a middleware equal to its class made
    so (the same attributes) is written: one made with settings of its own would load as
    another.
    """
    cls = type(made)
    what = f"Middleware {cls.__name__!r}"
    path = _path(cls, what, problems)
    try:
        same = vars(cls()) == vars(made)
    except Exception as error:  # its own __init__, or a class without __dict__
        problems.append(f"{what} cannot be made without arguments ({error!r}); {_BY_HAND}")
        return path
    if not same:
        problems.append(f"{what} holds settings one made without arguments lacks; {_BY_HAND}")
    return path


_BY_HAND = (
    "a manifest makes its middleware without arguments, so pass this one with "
    "load_graph(..., middleware=[...])"
)


def _context_type(flow: Flow) -> Any:
    for route in flow.edges.values():
        if isinstance(route, When):
            for link in route.links():
                if link.context is not None:
                    return link.context
    return None


def _node(n: Node, flow: Flow, problems: list[str]) -> dict[str, Any]:
    data: dict[str, Any] = {"name": n.name}
    values = getattr(n.fn, "manifest_update", None)  # a manifest's built-in update node
    entry = getattr(n.fn, "manifest_entry", None)  # a node of a type given to load_graph
    if isinstance(values, dict):
        data["type"] = "update"
        data["update"] = values
    elif isinstance(entry, dict):
        data.update(entry)
    else:
        data["function"] = _path(n.fn, f"Node '{n.name}' runs a function that", problems)
    if n.timeout is not None:
        data["timeout"] = n.timeout
    settings = _node_settings(n, problems)
    if isinstance(entry, dict):
        settings.pop("private_state", None)  # the type's own (a model node's memory)
    data.update(settings)
    declared = flow.declared[n.name]
    if declared:
        data["goto"] = sorted(declared)
    route = flow.edges.get(n.name)
    if route is not None:
        data["edges"] = _edges(n.name, route, problems)
    return data


def _edges(name: str, route: Any, problems: list[str]) -> list[dict[str, Any]]:
    if isinstance(route, str):
        return [{"target": route}]
    if route is END:
        return [{"target": "END"}]
    if isinstance(route, tuple):
        targets = ", ".join(route)
        problems.append(
            f"Node '{name}' fans out to {targets} ({name} >> [{targets}]), which a manifest "
            f"cannot express: a manifest's edges take the first that applies, one target; "
            f"let the node return Command(goto=[...]) and declare goto: [{targets}]"
        )
        return []
    if isinstance(route, Join):
        if name == route.sources[0]:  # one problem per join, not one per source
            sources = ", ".join(route.sources)
            problems.append(
                f"The join [{sources}] >> {route.target} cannot be expressed in a manifest; "
                f"give each of {sources} an edge to '{route.target}' and make "
                f"'{route.target}' defer=True, so it runs once, after the turn's other tasks"
            )
        return []
    if not isinstance(route, When):
        problems.append(
            f"Node '{name}' routes with branch(), which a manifest cannot express; use "
            f"when() with condition strings"
        )
        return []
    edges: list[dict[str, Any]] = []
    for link in route.links():
        predicate = link.predicate
        if not isinstance(predicate, CompiledCondition | Condition):
            problems.append(
                f"The when() after '{name}' has a Python predicate, which a manifest cannot "
                f'express; write it as a condition string, e.g. when("count < 3", ...)'
            )
            continue
        edges.append({"target": link.target.name, "when": predicate.text})
    edges.append({"target": route.fallback().name})
    return edges


def _node_settings(n: Node, problems: list[str]) -> dict[str, Any]:
    """Return the manifest settings of node ``n`` (only those it has).

    Args:
        n: The node.
        problems: Where the parts a manifest cannot express are added.
    """
    data: dict[str, Any] = {}
    if n.retry is not None:
        data["retry"] = _retry(n.name, n.retry, problems)
    if n.breaker is not None:
        data["circuit_breaker"] = _breaker(n.name, n.breaker, problems)
    if n.roles:
        data["roles"] = list(n.roles)
    if n.private_state is not None:
        what = f"The private state class of node '{n.name}'"
        data["private_state"] = _path(n.private_state, what, problems)
    if n.defer:
        data["defer"] = True
    if n.cache is not None:
        data["cache"] = _cache(n.name, n.cache, problems)
    return data


def _cache(name: str, policy: CachePolicy, problems: list[str]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if policy.ttl is not None:
        data["ttl"] = policy.ttl
    if policy.key is not None:
        data["key"] = _path(policy.key, f"The cache key function of node '{name}'", problems)
    return data


def _retry(name: str, policy: RetryPolicy, problems: list[str]) -> dict[str, Any]:
    # Every number is written, defaults included, so the manifest means the same policy
    # even if a later nodestep changes a default.
    data: dict[str, Any] = {
        "attempts": policy.attempts,
        "backoff": policy.backoff,
        "multiplier": policy.multiplier,
        "max_backoff": policy.max_backoff,
        "jitter": policy.jitter,
    }
    if policy.deadline is not None:
        data["deadline"] = policy.deadline
    if policy.seed != _DEFAULT_RETRY.seed:
        data["seed"] = policy.seed
    if policy.retry_on is not Exception:
        data["on"] = _errors(policy.retry_on, f"Node '{name}' has retry_on=", problems)
    return data


def _breaker(name: str, breaker: CircuitBreaker, problems: list[str]) -> dict[str, Any]:
    data: dict[str, Any] = {
        "failures": breaker.failures,
        "window": breaker.window,
        "cooldown": breaker.cooldown,
    }
    if breaker.failure_on is not Exception:
        what = f"Node '{name}' has a breaker with failure_on="
        data["on"] = _errors(breaker.failure_on, what, problems)
    return data


def _errors(match: ErrorMatch, what: str, problems: list[str]) -> Any:
    """Write an error match as ``on:``: one item as a scalar, a tuple as a list."""
    if not isinstance(match, type | str | tuple):
        problems.append(
            f"{what}{import_path(match)!r}, a function, which a manifest cannot express; "
            f"give exception classes or class names instead, e.g. (TimeoutError, 'RateLimited')"
        )
        return []
    if isinstance(match, tuple):
        return [_error(item, what, problems) for item in match]
    return _error(match, what, problems)


def _error(item: type[BaseException] | str, what: str, problems: list[str]) -> str:
    if isinstance(item, str):
        return item
    return _path(item, f"{what}{item.__name__}, whose class", problems)
