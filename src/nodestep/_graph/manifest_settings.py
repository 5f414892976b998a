"""Write a node's resilience, roles and private state as manifest settings.

The inverse of the loader's settings table: ``retry`` and ``circuit_breaker`` as mappings
of their numbers, ``roles`` as a list, ``private_state`` as an import path. Which errors
count (``retry_on``, ``failure_on``) is written as ``on:``: a class name stays a name, a
class becomes its import path (``builtins:ConnectionError`` for a builtin one), so the
loaded policy is equal to the written one. A function that chooses the errors has no
text form, so it is reported, as a Python predicate in a route is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nodestep._flow.drawing import import_path
from nodestep._flow.nodes import Node
from nodestep._flow.resilience import CircuitBreaker, ErrorMatch, RetryPolicy

__all__ = ["node_settings"]

_DEFAULT = RetryPolicy()

PathOf = Callable[[Any, str, list[str]], str]
"""Return an object's import path, adding a problem when it has none."""


def node_settings(n: Node, path: PathOf, problems: list[str]) -> dict[str, Any]:
    """Return the manifest settings of node ``n`` (only those it has).

    Args:
        n: The node.
        path: Writes a class as its import path, adding a problem if it has none.
        problems: Where the parts a manifest cannot express are added.
    """
    data: dict[str, Any] = {}
    if n.retry is not None:
        data["retry"] = _retry(n.name, n.retry, path, problems)
    if n.breaker is not None:
        data["circuit_breaker"] = _breaker(n.name, n.breaker, path, problems)
    if n.roles:
        data["roles"] = list(n.roles)
    if n.private_state is not None:
        what = f"The private state class of node '{n.name}'"
        data["private_state"] = path(n.private_state, what, problems)
    return data


def _retry(name: str, policy: RetryPolicy, path: PathOf, problems: list[str]) -> dict[str, Any]:
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
    if policy.seed != _DEFAULT.seed:
        data["seed"] = policy.seed
    if policy.retry_on is not Exception:
        data["on"] = _errors(policy.retry_on, f"Node '{name}' has retry_on=", path, problems)
    return data


def _breaker(
    name: str, breaker: CircuitBreaker, path: PathOf, problems: list[str]
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "failures": breaker.failures,
        "window": breaker.window,
        "cooldown": breaker.cooldown,
    }
    if breaker.failure_on is not Exception:
        what = f"Node '{name}' has a breaker with failure_on="
        data["on"] = _errors(breaker.failure_on, what, path, problems)
    return data


def _errors(match: ErrorMatch, what: str, path: PathOf, problems: list[str]) -> Any:
    """Write an error match as ``on:``: one item as a scalar, a tuple as a list."""
    if not isinstance(match, type | str | tuple):
        problems.append(
            f"{what}{import_path(match)!r}, a function, which a manifest cannot express; "
            f"give exception classes or class names instead, e.g. (TimeoutError, 'RateLimited')"
        )
        return []
    if isinstance(match, tuple):
        return [_error(item, what, path, problems) for item in match]
    return _error(match, what, path, problems)


def _error(item: type[BaseException] | str, what: str, path: PathOf, problems: list[str]) -> str:
    if isinstance(item, str):
        return item
    return path(item, f"{what}{item.__name__}, whose class", problems)
