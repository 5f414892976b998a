"""The stored order of a set's items: by their JSON text, the same in every process.

Why: pydantic's JSON form of a ``set`` or ``frozenset`` lists its items in iteration
order, and the order of strings (and of anything hashed through them) follows the
process's hash seed (``PYTHONHASHSEED``), so two processes storing the same state would
write different bytes, and history would depend on which process wrote it. A value
whose type may hold a set (``may_hold_set``, decided once per field or model) has each
set's items put in one order (``sets_in_order``) after its dump; a type without sets
pays nothing.

The order (``_in_order``): a set of strings in code point order, a set of numbers in
numeric order (an int before a float equal to it), any other set by its items' JSON text
(orjson's bytes). Each is total on what is stored: items that tie are stored as the same
bytes, whichever comes first. A set whose items hold sets has those put in order first,
so an item's text does not depend on the process either.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import orjson
from pydantic import BaseModel, RootModel

__all__ = ["may_hold_set", "schema_has", "sets_in_order"]

_SET_SCHEMAS = frozenset({"set", "frozenset"})


def may_hold_set(core_schema: Any) -> bool:
    """Tell whether a pydantic core schema has a set or frozenset anywhere in it.

    Nested models, unions and definitions included: a ``TypeAdapter``'s ``core_schema``,
    a model's ``__pydantic_core_schema__``. (An ``Any`` position cannot hold a set in a
    stored value: a set's JSON form reads back as a list, which the store refuses.)
    """
    return schema_has(core_schema, _SET_SCHEMAS)


def schema_has(core_schema: Any, kinds: frozenset[str]) -> bool:
    """Tell whether a pydantic core schema has a schema of one of ``kinds`` (its
    ``type``, such as ``"set"`` or ``"any"``) anywhere in it."""
    if isinstance(core_schema, dict):
        if core_schema.get("type") in kinds:
            return True
        return any(schema_has(v, kinds) for v in core_schema.values())
    if isinstance(core_schema, list | tuple):
        return any(schema_has(v, kinds) for v in core_schema)
    return False


def _text(item: Any) -> bytes:
    return orjson.dumps(item)


def _number(item: Any) -> tuple[Any, bool]:
    return item, type(item) is float


def _in_order(items: list[Any]) -> list[Any]:
    """Return a set's JSON items sorted (see the module's docstring for the order)."""
    kinds = {type(item) for item in items}
    if kinds == {str}:
        items.sort()
    elif kinds and kinds <= {int, float} and all(math.isfinite(item) for item in items):
        items.sort(key=_number)
    else:
        items.sort(key=_text)
    return items


def sets_in_order(value: Any, data: Any, *, by_alias: bool) -> Any:
    """Return ``data``, the JSON form pydantic's dump gave of ``value``, its sets in order.

    ``data`` mirrors ``value``: a set, list or tuple became a list of the same length
    (a set's items in its iteration order), a dict a dict in the same order, a model or
    dataclass a dict of its fields (by alias where ``by_alias``, as the dump was made).
    Where a part does not mirror its value (a custom serializer), it is kept as it is.
    ``data`` must be JSON that orjson can write; it is not changed (the lists and dicts
    returned are new).
    """
    if isinstance(value, set | frozenset):
        if type(data) is not list or len(data) != len(value):
            return data
        return _in_order(
            [sets_in_order(v, d, by_alias=by_alias) for v, d in zip(value, data, strict=True)]
        )
    if isinstance(value, list | tuple):
        if type(data) is not list or len(data) != len(value):
            return data
        return [sets_in_order(v, d, by_alias=by_alias) for v, d in zip(value, data, strict=True)]
    if isinstance(value, dict):
        if type(data) is not dict or len(data) != len(value):
            return data
        return {
            k: sets_in_order(v, d, by_alias=by_alias)
            for v, (k, d) in zip(value.values(), data.items(), strict=True)
        }
    if isinstance(value, RootModel):  # dumped as its root value alone
        return sets_in_order(value.root, data, by_alias=by_alias)
    if type(data) is not dict:
        return data
    if isinstance(value, BaseModel):
        names = _model_keys(type(value), by_alias)
        extra = value.__pydantic_extra__ or {}
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = _dataclass_keys(type(value), by_alias)
        extra = {}
    else:
        return data
    out = {}
    for key, d in data.items():
        name = names.get(key)
        if name is not None:
            out[key] = sets_in_order(getattr(value, name), d, by_alias=by_alias)
        else:
            out[key] = sets_in_order(extra[key], d, by_alias=by_alias) if key in extra else d
    return out


@functools.cache
def _model_keys(cls: type[BaseModel], by_alias: bool) -> dict[str, str]:
    """Return a model's dumped keys, each with the name of the field it holds."""
    return {_key(name, info, by_alias): name for name, info in cls.model_fields.items()}


@functools.cache
def _dataclass_keys(cls: type[Any], by_alias: bool) -> dict[str, str]:
    """Return a dataclass's dumped keys (a pydantic dataclass's may be aliases)."""
    infos = getattr(cls, "__pydantic_fields__", None)
    if infos is None:
        return {f.name: f.name for f in dataclasses.fields(cls)}
    return {_key(name, info, by_alias): name for name, info in infos.items()}


def _key(name: str, info: Any, by_alias: bool) -> str:
    if not by_alias:
        return name
    found = info.serialization_alias or info.alias
    return found if isinstance(found, str) else name
