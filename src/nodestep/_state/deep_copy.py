"""Deep copies of state values, refused with a clear error past Python's recursion limit.

The state gets copies of what a caller passes in (``input``, ``update_state``, a
migration) and a stream hands out copies of the state, so that no one changes a run's
values in place. ``copy.deepcopy`` recurses once per level of nesting (a few frames a
level), so a value nested some hundreds of levels deep raises a raw ``RecursionError``
from deep inside the run. These helpers turn it into a ``StateUpdateError`` that names
the field and the writer, and says how deep a value can go.

Why not copy without recursion: a store keeps at most ``JSON_DEPTH`` levels (its JSON
encoders refuse more), far below where ``copy.deepcopy`` stops, so a value deep
enough to fail here could never be stored anyway; a flatter shape is the fix either way.
"""

from __future__ import annotations

import copy
import sys
from typing import Any, TypeVar

from nodestep._errors import StateUpdateError

__all__ = [
    "FLATTEN",
    "JSON_DEPTH",
    "deep_copy",
    "deep_copy_dict",
    "deep_copy_values",
    "too_deep",
]

T = TypeVar("T")

JSON_DEPTH = 254
"""How many levels of lists, dicts and models JSON data may nest: pydantic's dump and orjson
both refuse a 255th. A stored value gets fewer: the record around it takes a few levels
(a node's write about 4, each enclosing subgraph a few more)."""

FLATTEN = (
    f"A store keeps values about {JSON_DEPTH - 4} levels deep at most (of lists, dicts and "
    f"models: JSON stops at {JSON_DEPTH}, the record's own levels included). Flatten a "
    f"deep tree into a list of nodes that name their parent's id, say."
)
"""The fix every message about a value nested too deeply gives."""


def deep_copy(value: T, writer: str | None, field: str | None = None) -> T:
    """Return ``copy.deepcopy(value)``.

    Args:
        value: What to copy.
        writer: Who wrote it (a node, ``"input"``, ``"update_state"``, ``"migrate"``),
            for the message; ``None`` when the state's merged values are copied.
        field: The field it is a value of, or ``None`` for a whole update.

    Raises:
        StateUpdateError: ``value`` is nested too deeply to copy within Python's
            recursion limit.
    """
    try:
        return copy.deepcopy(value)
    except RecursionError:
        raise too_deep(writer, field) from None


def deep_copy_values(values: dict[str, T], writer: str | None) -> dict[str, T]:
    """Return a deep copy of the field values ``values`` as a dict, in one ``deepcopy``.

    One call keeps values that share an object sharing their copy, as before; only on a
    failure are the fields copied one by one, to name the one nested too deeply.

    Raises:
        StateUpdateError: a value is nested too deeply to copy.
    """
    try:
        return copy.deepcopy(values)
    except RecursionError:
        pass
    return {key: deep_copy(value, writer, key) for key, value in values.items()}


def deep_copy_dict(value: dict[Any, Any]) -> dict[Any, Any]:
    """Return ``copy.deepcopy(value)`` of a plain ``dict``, made as ``deepcopy`` makes it.

    The same steps as ``deepcopy``'s own for a dict (the copy in the memo before its items,
    each key and value copied with that memo), less the ones that change nothing here: a
    ``str`` key is its own copy, and a memo no caller holds needs no keep-alive list. A
    dict field is deep-copied about three times a turn of W10's agent (``nodes`` read, the
    input's ``inbox`` and ``nodes``): 15.6K instructions each through ``deepcopy``, 7.4K
    this way.

    Raises:
        RecursionError: as ``deepcopy``, for a value nested too deeply.
    """
    memo: dict[int, Any] = {}
    out: dict[Any, Any] = {}
    memo[id(value)] = out
    deepcopy = copy.deepcopy
    for key, item in value.items():
        out[key if type(key) is str else deepcopy(key, memo)] = deepcopy(item, memo)
    return out


def too_deep(writer: str | None, field: str | None) -> StateUpdateError:
    """Return the error for a value from ``writer`` that ``copy.deepcopy`` could not copy."""
    held = "holds a value" if writer is None else f"got a value from '{writer}'"
    what = f"Field '{field}' {held}" if field is not None else f"The update {held}"
    return StateUpdateError(
        f"{what} nested too deeply to copy: copying it passed Python's "
        f"recursion limit ({sys.getrecursionlimit()} frames). {FLATTEN}",
        field=field,
        writer=writer,
    )
