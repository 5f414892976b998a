"""The filters of ``MemoryStore.search``: conditions on the fields of an item's value.

A filter is a dict of field paths to conditions, all of which must hold::

    {"kind": "note"}                        equal
    {"score": {"$gte": 3, "$lt": 10}}       each operator must hold
    {"author.name": {"$ne": "bot"}}         a dotted path reads nested objects

The operators: ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``, ``$in``, ``$nin``.
Comparison follows JSON, not Python: ``True`` is not ``1``; an order (``$gt``, ...) holds
between two numbers or two strings only, and never across types. A missing field holds
for ``$ne`` and ``$nin`` only. Every back end filters in Python with this module, so a
filter means the same on each.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from nodestep._errors import GraphConfigError

__all__ = ["OPERATORS", "check_filter", "matches"]

_MISSING: Any = object()


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and bool(a == b)


def _ordered(a: Any, b: Any) -> bool:
    """Return whether ``a`` and ``b`` can be ordered: two numbers or two strings."""
    numbers = (
        isinstance(a, int | float)
        and isinstance(b, int | float)
        and not isinstance(a, bool)
        and not isinstance(b, bool)
    )
    return numbers or (isinstance(a, str) and isinstance(b, str))


OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": lambda a, b: a is not _MISSING and _same(a, b),
    "$ne": lambda a, b: a is _MISSING or not _same(a, b),
    "$gt": lambda a, b: _ordered(a, b) and a > b,
    "$gte": lambda a, b: _ordered(a, b) and a >= b,
    "$lt": lambda a, b: _ordered(a, b) and a < b,
    "$lte": lambda a, b: _ordered(a, b) and a <= b,
    "$in": lambda a, b: a is not _MISSING and any(_same(a, x) for x in b),
    "$nin": lambda a, b: a is _MISSING or not any(_same(a, x) for x in b),
}
"""Each operator, as a test of a field's value (``_MISSING`` if absent) against its operand."""


def check_filter(filter: Any) -> dict[str, Any]:
    """Return ``filter`` (``{}`` for ``None``), or refuse it.

    Raises:
        GraphConfigError: Not a dict of field paths, an unknown operator (the message
            lists the known ones), or ``$in``/``$nin`` without a list.
    """
    if filter is None:
        return {}
    if not isinstance(filter, Mapping):
        raise GraphConfigError(
            f"search(filter=...) takes a dict of fields to values, such as {{'kind': "
            f"'note'}}, got {type(filter).__name__} {filter!r}."
        )
    for path, condition in filter.items():
        if not isinstance(path, str) or not path:
            raise GraphConfigError(f"A search filter's field is a non-empty string, got {path!r}.")
        if not _is_operators(condition):
            continue
        for op, operand in condition.items():
            if op not in OPERATORS:
                raise GraphConfigError(
                    f"The search filter on {path!r} has the unknown operator {op!r}; the "
                    f"operators are {', '.join(OPERATORS)}."
                )
            if op in ("$in", "$nin") and not isinstance(operand, list | tuple):
                raise GraphConfigError(
                    f"The search filter on {path!r} gives {op} {operand!r}; {op} takes a "
                    f"list of values, such as [1, 2]."
                )
    return dict(filter)


def matches(value: Mapping[str, Any], filter: Mapping[str, Any]) -> bool:
    """Return whether ``value`` meets every condition of the checked ``filter``."""
    for path, condition in filter.items():
        found = _field(value, path)
        if _is_operators(condition):
            if not all(OPERATORS[op](found, operand) for op, operand in condition.items()):
                return False
        elif found is _MISSING or not _same(found, condition):
            return False
    return True


def _is_operators(condition: Any) -> bool:
    """Return whether ``condition`` is a dict of operators rather than a value to equal."""
    return (
        isinstance(condition, Mapping)
        and bool(condition)
        and all(isinstance(k, str) and k.startswith("$") for k in condition)
    )


def _field(value: Mapping[str, Any], path: str) -> Any:
    """Return the field at the dotted ``path`` of ``value``, or ``_MISSING``."""
    if path in value:
        return value[path]
    current: Any = value
    for part in path.split("."):
        if not isinstance(current, Mapping) or part not in current:
            return _MISSING
        current = current[part]
    return current
