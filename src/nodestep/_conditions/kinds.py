"""Compare values at run time by the kinds of the condition language, not by Python's ``==``.

Python holds ``True == 1``, ``True in [1]``, ``[True] == [1]`` and ``{1: 'a'} == {True:
'a'}``; a condition never does. Two values of two kinds (true/false and a number, a number
and a string) are never equal, and comparing them is an error, inside lists and dicts as
at the top, where the static types could not refuse it when the flow compiled. ``null``
compares with any kind (it equals only ``null``), and a value of no kind of the language
(``any``: a ``Decimal``, say) is left to Python.

``x in items`` finds an item of ``x``'s kind equal to it; an item of another kind is not
compared, so a list may mix kinds (``n in [1, 'a']``). A membership is an error only when
no item could match: every item is of another kind, not ``null`` (``true in [1, 2]``).

Why a fast path first: most values are strings, numbers or true/false of one Python type,
for which Python's ``==`` is already the language's; only the rest pays for the walk.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from nodestep._conditions.env import EvaluationProblem
from nodestep._conditions.types import Ty

__all__ = ["contains", "equal", "fits", "kind"]

_SCALARS = frozenset({str, int, float, bool, type(None)})
"""Python types whose ``==`` with a value of the same Python type is the language's."""
_LOOSE = frozenset({"null", "any"})
_SETS = (set, frozenset)
_CONTAINERS = (dict, list, tuple, set, frozenset)


class _Clash(Exception):
    """Two values of two kinds met where an equality needs one kind."""

    def __init__(self, a: Any, b: Any) -> None:
        super().__init__()
        self.a, self.b = a, b

    def message(self, op: str, a: Any, b: Any) -> str:
        """Say what clashed, and inside which values when it was not ``a`` and ``b``."""
        inside = "" if (self.a is a and self.b is b) else f" (inside {a!r} and {b!r})"
        return (
            f"'{op}' compares {_shown(self.a)} with {_shown(self.b)}, which are never equal{inside}"
        )


def kind(value: Any) -> str:
    """Return the kind of a value as the static types name it (``any``: no kind of theirs)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list | tuple | set | frozenset):
        return "list"
    if isinstance(value, dict):
        return "dict"
    return "model" if isinstance(value, BaseModel) else "any"


def _shown(value: Any) -> str:
    return f"{Ty(frozenset({kind(value)})).describe()} {value!r}"


def equal(a: Any, b: Any, op: str) -> bool:
    """Tell whether ``a`` equals ``b`` (values whose types were not known when compiling).

    Raises:
        EvaluationProblem: two values of two kinds meet, at the top or inside.
    """
    t = type(a)
    if t is type(b) and t in _SCALARS:
        return bool(a == b)
    try:
        return _same(a, b)
    except _Clash as clash:
        raise EvaluationProblem(clash.message(op, a, b)) from None


def _same(a: Any, b: Any) -> bool:
    t = type(a)
    if t is type(b) and t in _SCALARS:
        return bool(a == b)
    ka, kb = kind(a), kind(b)
    if ka != kb:
        if ka in _LOOSE or kb in _LOOSE:
            return bool(a == b)
        raise _Clash(a, b)
    if ka == "list":
        return _same_items(a, b)
    if ka == "dict":
        return _same_entries(a, b)
    return bool(a == b)


def _same_items(a: Any, b: Any) -> bool:
    """Compare two lists item by item (a tuple is a list here, as in JSON)."""
    if len(a) != len(b):
        return False
    if isinstance(a, _SETS) or isinstance(b, _SETS):
        if not (isinstance(a, _SETS) and isinstance(b, _SETS)):
            return False  # a set has no order, so it equals only a set
        return all(_lookup(x, b) for x in a)
    return all(_same(x, y) for x, y in zip(a, b, strict=True))


def _same_entries(a: dict[Any, Any], b: dict[Any, Any]) -> bool:
    if len(a) != len(b):
        return False
    for key, value in a.items():
        if key not in b:
            return False
        if type(key) is not str:
            # Python found an equal key, which may be of another kind (1 and True).
            _same(key, next(k for k in b if k == key))
        if not _same(value, b[key]):
            return False
    return True


def _lookup(item: Any, items: Iterable[Any]) -> bool | None:
    """Tell whether ``items`` holds an item of ``item``'s kind equal to it; ``None``: no
    item is of its kind, nor ``null``, nor of no kind of the language."""
    ki = kind(item)
    possible = False
    for other in items:
        t = type(other)
        if t is type(item) and t in _SCALARS:
            if other == item:
                return True
            possible = True
            continue
        ko = kind(other)
        if ko == ki:
            possible = True
            if _same(item, other):
                return True
        elif ko in _LOOSE or ki in _LOOSE:
            possible = True
            if bool(item == other):
                return True
    return False if possible else None


def contains(container: Any, item: Any, op: str) -> bool:
    """Tell whether ``item`` is in ``container`` (a list, a dict's keys, a string); ``in``
    on ``null`` is false.

    Raises:
        EvaluationProblem: ``container`` is no list, string or dict, or none of its items
            can be of ``item``'s kind.
    """
    if container is None:
        return False
    if isinstance(container, str):
        if not isinstance(item, str):
            raise EvaluationProblem(f"'{op}' a string needs a string, got {item!r}")
        return item in container
    if not isinstance(container, _CONTAINERS):
        return _contains_other(container, item, op)
    if item is None:
        return item in container  # null equals only null, by Python's == too
    t = type(item)
    if t is str or t is int or t is float:
        # Python's `in` (by hash for a dict or a set) finds an equal item, of the same kind
        # but for 0 and 1, which equal false and true: its answer is the language's then.
        if item not in container:
            return _missing(container, item, op)
        if t is str or (item != 0 and item != 1):
            return True
    try:
        found = _lookup(item, container)
    except _Clash as clash:
        raise EvaluationProblem(clash.message(op, item, container)) from None
    return _missing(container, item, op) if found is None else found


def _missing(container: Any, item: Any, op: str) -> bool:
    """Return false for an item ``container`` does not hold, when it holds an item of its
    kind (or null, or of no kind of the language) or nothing at all.

    Raises:
        EvaluationProblem: every item is of another kind, so ``item`` can never be found.
    """
    ki = kind(item)
    if not container or any(kind(x) in (ki, "null", "any") for x in container):
        return False
    where = "keys" if isinstance(container, dict) else "items"
    raise EvaluationProblem(
        f"'{op}' looks for {_shown(item)} in {container!r}, whose {where} are never of its "
        f"kind (values of two kinds are never equal)"
    )


def _contains_other(container: Any, item: Any, op: str) -> bool:
    """``in`` on a value of no kind of the language: Python's, if it has one."""
    if isinstance(container, BaseModel) or not hasattr(container, "__contains__"):
        raise EvaluationProblem(f"'{op}' needs a list, string or dict, got {container!r}")
    try:
        return item in container
    except TypeError:
        raise EvaluationProblem(f"'{op}' cannot look {item!r} up in {container!r}") from None


def fits(value: Any, ty: Ty) -> bool:
    """Tell whether ``value`` is of a kind ``ty`` allows, and so are its items where ``ty``
    says what they are. ``null`` always fits (a missing key reads as ``null``), and a dict
    fits a model type (it stands for one, as a dict context stands for its model)."""
    if value is None or ty.is_any:
        return True
    k = kind(value)
    if k not in ty.kinds:
        return k == "dict" and "model" in ty.kinds
    items = ty.items
    if items is None or items.is_any or k not in ("list", "dict"):
        return True
    return all(fits(x, items) for x in value)
