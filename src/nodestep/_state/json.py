"""JSON helpers: the one place that turns Python values into stored JSON and back."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import orjson
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError, to_jsonable_python

from nodestep._errors import StateStoreError

__all__ = [
    "INT_MIN",
    "UINT_MAX",
    "dump_json_object",
    "dumps",
    "first_at",
    "first_line",
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

    Pydantic models become dicts through ``model_dump(mode="json")``, dates become strings.

    Raises:
        StateStoreError: ``value`` holds something without a JSON form; the message names
            ``what`` and the type, never the value.
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
