"""JSON helpers: the one place that turns Python values into stored JSON and back."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import orjson
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError, to_jsonable_python

from nodestep._errors import StateStoreError
from nodestep._state.set_order import schema_has, sets_in_order

__all__ = [
    "INT_MIN",
    "UINT_MAX",
    "dump_json_object",
    "dumps",
    "first_at",
    "first_line",
    "json_in_iteration_order",
    "load_json_object",
    "loads",
    "non_finite",
    "to_json_value",
    "unencodable",
]

INT_MIN, UINT_MAX = -(2**63), 2**64 - 1
"""The ints a store can write: JSON text can hold any, but orjson writes 64 bits."""


def to_json_value(value: Any, *, what: str = "value") -> Any:
    """Return ``value`` as plain JSON data (dicts, lists, strings, numbers, booleans, None).

    Pydantic models become dicts through ``model_dump(mode="json")``, dates become strings,
    a set a list of its items in one order for every process (``set_order``).

    Why that order: a set's items iterate in an order that follows the process's hash
    seed, and this form is what is stored (interrupt payloads, resume answers,
    ``ctx.cache``) and streamed, which must not depend on the process that wrote it.

    Raises:
        StateStoreError: ``value`` holds something without a JSON form; the message names
            ``what`` and the type, never the value.
    """
    data = json_in_iteration_order(value, what=what)
    return sets_in_order(value, data, by_alias=True) if _holds_set(value) else data


def json_in_iteration_order(value: Any, *, what: str = "value") -> Any:
    """Return ``to_json_value``'s data with each set's items in iteration order.

    For the node cache, whose keys were made from this form: its own canonical form puts
    the sets it finds in order, and a key must not change between releases.

    Raises:
        StateStoreError: as ``to_json_value``.
    """
    try:
        data = to_jsonable_python(value)
        same = orjson.loads(orjson.dumps(data)) == data
    except (PydanticSerializationError, TypeError, ValueError) as error:
        raise StateStoreError(
            f"{what} cannot be stored as JSON: {first_line(error)}. Keep only JSON-friendly "
            f"data in the state (pass clients and handles through context=)."
        ) from None
    if not same:
        raise StateStoreError(
            f"{what} does not survive a JSON round trip (a nan or infinite float?). Keep only "
            f"JSON-friendly data in the state."
        )
    return data


class _SetFound(Exception):
    """Raised through orjson by ``_look``: the value holds a set."""


def _holds_set(value: Any) -> bool:
    """Tell whether ``value`` may hold a set that ``sets_in_order`` would put in order.

    One pass of orjson's encoder, which writes no set: plain data (most payloads) costs
    one encoding, with no Python call per item. What it cannot write goes to ``_look``;
    a failure that is not a set (an int beyond 64 bits, a key orjson cannot write) is
    taken as a maybe, and ``sets_in_order`` walks the value.
    """
    if type(value) in _PLAIN:
        return False
    try:
        orjson.dumps(value, default=_look, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return True
    return False


_PLAIN = frozenset({str, int, float, bool, type(None)})


def _look(item: Any) -> Any:
    """Give orjson what to walk of ``item`` in place of it, or raise ``_SetFound``.

    The parts ``sets_in_order`` follows: a model's fields when its type may hold a set
    (``_model_may_hold_set``), a tuple subclass's items (orjson writes plain tuples
    itself); anything else is a leaf, as it is to ``sets_in_order``. Decided once per
    type (``_kind``, kept in ``_KINDS``): a state of many messages makes a call per message.
    """
    cls = type(item)
    kind = _KINDS.get(cls) or _KINDS.setdefault(cls, _kind(cls))
    if kind is _LEAF:
        return None
    if kind is _FIELDS:
        extra = item.__pydantic_extra__
        return [item.__dict__, extra] if extra else item.__dict__
    if kind is _ITEMS:
        return list(item)
    raise _SetFound


_LEAF, _FIELDS, _ITEMS, _SET = "leaf", "fields", "items", "set"
_KINDS: dict[type, str] = {}


def _kind(cls: type) -> str:
    if issubclass(cls, set | frozenset):
        return _SET
    if issubclass(cls, BaseModel):
        return _FIELDS if _model_may_hold_set(cls) else _LEAF
    return _ITEMS if issubclass(cls, tuple) else _LEAF


@functools.cache
def _model_may_hold_set(model: type[BaseModel]) -> bool:
    """Tell whether a model's values may hold a set: a set in its schema (nested models
    included), or a position that takes anything (``Any``, ``dict``, a class of one's own),
    where a payload, unlike a state, may put one."""
    return schema_has(model.__pydantic_core_schema__, _SET_OR_ANYTHING)


# A set's schemas, and those of a position that takes anything.
_SET_OR_ANYTHING = frozenset({"set", "frozenset", "any", "is-instance"})


def first_line(error: BaseException) -> str:
    """Return the first line of ``error``'s message, or its type's name for none."""
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def dump_json_object(obj: Any, sort_keys: bool = True) -> str:
    """Serialize ``obj`` to compact JSON text.

    Args:
        obj: Any value with a JSON form (see ``to_json_value``).
        sort_keys: Sort the keys of every object, for stable text; ``False`` keeps the
            order of the dicts. Stored state payloads are written unsorted.

    Returns:
        The JSON text.

    Raises:
        StateStoreError: ``obj`` has no JSON form.
    """
    return dumps(obj, sort_keys=sort_keys).decode()


def dumps(obj: Any, *, sort_keys: bool = False) -> bytes:
    """Serialize plain JSON data (or values pydantic can convert) to bytes."""
    option = orjson.OPT_SORT_KEYS if sort_keys else 0
    try:
        return orjson.dumps(obj, option=option)
    except TypeError:
        pass
    try:
        return orjson.dumps(to_json_value(obj), option=option)
    except TypeError as error:  # e.g. an int beyond 64 bits, which orjson cannot write
        raise StateStoreError(
            f"The value cannot be stored as JSON: {error}. Keep integers within 64 bits "
            f"(store bigger ones as strings)."
        ) from None


def loads(data: bytes | str) -> Any:
    """Parse JSON text."""
    return orjson.loads(data)


def load_json_object(text: bytes | str) -> dict[str, Any]:
    """Parse JSON text that must hold an object.

    Raises:
        StateStoreError: ``text`` is not text (``None``, a dict), not JSON, or not an
            object.
    """
    if not isinstance(text, bytes | bytearray | memoryview | str):
        raise StateStoreError(
            f"load_json_object takes the text of one JSON object, a str or bytes, got "
            f"{text!r:.80} (a {type(text).__name__}). Pass the text dump_json_object wrote; "
            f"a dict is already loaded."
        )
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as error:
        raise StateStoreError(
            f"Not valid JSON: {error}. Pass the text of one JSON object, as "
            f"dump_json_object writes it."
        ) from None
    if not isinstance(value, dict):
        raise StateStoreError(
            f"Expected a JSON object, found a {type(value).__name__}: pass the text of one "
            f"JSON object ({{...}}), as dump_json_object writes it."
        )
    return value


def non_finite(value: Any) -> float | None:
    """Return ``value`` if it is a nan or infinite float (JSON has neither), else ``None``."""
    return value if isinstance(value, float) and not math.isfinite(value) else None


def unencodable(value: Any) -> int | str | None:
    """Return what orjson cannot write of a value: an int beyond 64 bits, a str's first
    lone surrogate; ``None`` for anything else."""
    if type(value) is int:
        return None if INT_MIN <= value <= UINT_MAX else value
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError as bad:
            return value[bad.start]
    return None


def first_at(data: Any, path: str, bad: Callable[[Any], Any]) -> tuple[str, Any] | None:
    """Return where in ``data`` (at ``path``) the first value, or str dict key, that ``bad``
    names is, and what ``bad`` said of it; ``None`` when there is none.

    ``data`` is JSON data, or what becomes it: tuples are walked as lists, and a pydantic
    model as its ``model_dump()``. For error paths, which name the culprit's place: the
    cost grows with the value, and is paid once.
    """
    found = bad(data)
    if found is not None:
        return path, found
    if isinstance(data, BaseModel):
        data = data.model_dump()
    if isinstance(data, dict):
        items: Any = data.items()
    elif isinstance(data, list | tuple):
        items = enumerate(data)
    else:
        return None
    for key, item in items:
        at = f"{path}[{key!r}]"
        hit = first_at(key, f"{at} (its key)", bad) if isinstance(key, str) else None
        hit = hit or first_at(item, at, bad)
        if hit is not None:
            return hit
    return None
