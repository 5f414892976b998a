"""What a field's type says about its values: can they change in place, are they JSON as is."""

from __future__ import annotations

import dataclasses
import enum
import types
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import (
    Annotated,
    Any,
    Literal,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)
from uuid import UUID

import annotated_types
from pydantic import BaseModel

__all__ = [
    "PLAIN_TYPES",
    "builds_new_values",
    "has_exact_form",
    "holds_only",
    "is_frozen_value",
    "is_immutable",
    "is_json_native",
    "keeps_instances",
    "shallow_container",
    "type_name",
]

_IMMUTABLE_LEAVES: tuple[Any, ...] = (
    int,
    float,
    str,
    bool,
    bytes,
    type(None),
    Decimal,
    UUID,
    date,
    datetime,
    time,
    timedelta,
)


def is_immutable(annotation: Any) -> bool:
    """Tell whether values of this type cannot be changed in place, so need no copy."""
    if annotation in _IMMUTABLE_LEAVES:
        return True
    if isinstance(annotation, type):
        if issubclass(annotation, enum.Enum):
            return True
        if issubclass(annotation, BaseModel):
            # A frozen model can still hold a list that a node could change in place.
            return bool(annotation.model_config.get("frozen")) and all(
                is_immutable(f.annotation) for f in annotation.model_fields.values()
            )
        return False
    origin = get_origin(annotation)
    if origin is Literal:
        return True
    if origin is Annotated:
        return is_immutable(get_args(annotation)[0])
    if origin in (Union, types.UnionType, tuple, frozenset):
        return all(is_immutable(a) for a in get_args(annotation) if a is not Ellipsis)
    return False


def shallow_container(annotation: Any) -> type | None:
    """Return ``dict`` or ``list`` when a value of this type is copied by copying its container.

    A str-keyed dict of immutable values, or a list of immutable items, holds nothing a node
    could change in place but the container itself: a new container around the same items
    is as good as a deep copy, at a fraction of its cost. Keys are ``str`` only, the keys
    JSON keeps as they are, so that the position cache may keep such a container in place
    of its JSON form (``_engine.positions``). ``None`` for every other type.
    """
    if get_origin(annotation) is Annotated:
        return shallow_container(get_args(annotation)[0])
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is dict and len(args) == 2 and args[0] is str and is_immutable(args[1]):
        return dict
    if origin is list and len(args) == 1 and is_immutable(args[0]):
        return list
    return None


# Types whose equal values, once validated, are always stored alike. (Not float: 0.0 and
# -0.0 are equal; not datetime: one instant has many UTC offsets; not Any.)
_EXACT_LEAVES: tuple[Any, ...] = (int, str, bool, bytes, type(None), UUID)


def is_frozen_value(value: Any) -> bool:
    """Tell whether ``value`` is of a class whose instances never change once made.

    Such a class says so with a class attribute ``__nodestep_frozen__ = True``: a read-only
    container of values, such as the conversation's ``MessageList``. Its type may still look
    mutable (``list[AnyMessage]``), so this is asked of the value, not of the annotation;
    the engine then shares it, as it shares a value of an immutable type.
    """
    kind = type(value)
    # A builtin type holds no such attribute, and asking one for it costs a formatted
    # AttributeError (several a turn of W10's agent: its dict fields).
    return kind not in PLAIN_TYPES and getattr(kind, "__nodestep_frozen__", False) is True


PLAIN_TYPES = frozenset({dict, list, tuple, set, str, bytes, int, float, bool, type(None)})
"""Builtin types, which no ``__nodestep_frozen__`` attribute can be set on."""


def has_exact_form(annotation: Any, _seen: frozenset[type] = frozenset()) -> bool:
    """Tell whether equal values of this type, validated, always have one stored form.

    ``list[str]``, ``dict[str, int]``, ``Literal["a"]``, enums and models with only such
    fields do; ``float``, ``datetime``, ``Any`` and unions of several types do not.
    """
    if annotation in _EXACT_LEAVES:
        return True
    if isinstance(annotation, type):
        if issubclass(annotation, enum.Enum):
            return True
        if issubclass(annotation, BaseModel) and annotation not in _seen:
            seen = _seen | {annotation}
            return all(has_exact_form(f.annotation, seen) for f in annotation.model_fields.values())
        return False
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Literal:
        return all(type(a) in (str, bool, type(None)) or isinstance(a, enum.Enum) for a in args)
    if origin is Annotated:
        return has_exact_form(args[0], _seen)
    if origin in (list, tuple, set, frozenset, dict):
        return bool(args) and all(has_exact_form(a, _seen) for a in args if a is not Ellipsis)
    if origin in (Union, types.UnionType):
        # One type besides None: a union of int and bool could hold 1 or True.
        rest = [a for a in args if a is not type(None)]
        return len(rest) == 1 and has_exact_form(rest[0], _seen)
    return False


def builds_new_values(annotation: Any) -> bool:
    """Tell whether validation gives a value that shares nothing mutable with its input.

    pydantic builds new lists, sets and dicts for ``list[T]``, ``set[T]``, ``dict[K, V]``;
    with immutable items, nothing of the input is kept. A model instance, an ``Any`` value,
    or the items of a bare ``list`` pass through as they are.
    """
    if is_immutable(annotation):
        return True
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Annotated:
        return builds_new_values(args[0])
    if origin in (list, set, dict):
        return bool(args) and all(builds_new_values(a) for a in args)
    if origin in (Union, types.UnionType):
        return all(builds_new_values(a) for a in args)
    return False


def keeps_instances(annotation: Any, _seen: frozenset[type] = frozenset()) -> bool:
    """Tell whether a value of this type may hold a model or dataclass instance.

    pydantic hands such an instance back from validation as it is, without checking its
    fields again (``revalidate_instances='never'``): it trusts that the instance was valid
    when made. ``list[Address]``, ``Address | None`` and a TypedDict with a model in it may
    hold one; ``list[str]``, ``dict[str, int]`` and ``Any`` (which validates nothing) do not.
    """
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel) or dataclasses.is_dataclass(annotation):
            return True
        if is_typeddict(annotation) and annotation not in _seen:
            try:
                hints = get_type_hints(annotation, include_extras=True).values()
            except (NameError, TypeError):  # a forward reference it cannot resolve here
                return True
            seen = _seen | {annotation}
            return any(keeps_instances(h, seen) for h in hints)
    return any(keeps_instances(a, _seen) for a in get_args(annotation))


def is_json_native(annotation: Any) -> bool:
    """Tell whether values of this type are JSON data as they are (dicts, lists, scalars).

    For such a field a value whose JSON form equals it survives the round trip, so the
    check need not validate the JSON form back (a cost that grows with the value).
    """
    if annotation in (str, int, float, bool, type(None), Any, list, dict):
        return True
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Annotated:
        # Metadata such as Json or a serializer changes the JSON form; constraints do not.
        return all(_is_constraint(m) for m in args[1:]) and is_json_native(args[0])
    if origin is list:
        return all(is_json_native(a) for a in args)
    if origin is dict:
        return (not args or args[0] is str) and all(is_json_native(a) for a in args[1:])
    if origin in (Union, types.UnionType):
        return all(is_json_native(a) for a in args)
    return False


def _is_constraint(item: object) -> bool:
    return isinstance(item, annotated_types.BaseMetadata)


def holds_only(annotation: Any, container: type) -> bool:
    """Tell whether every value of this type (but ``None``) is a ``container`` (list, dict).

    ``list[str]``, ``list`` and ``list[int] | None`` hold only lists; ``Any``, ``tuple`` and
    ``list[int] | str`` do not.
    """
    if annotation is container or get_origin(annotation) is container:
        return True
    origin = get_origin(annotation)
    if origin is Annotated:
        return holds_only(get_args(annotation)[0], container)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return bool(args) and all(holds_only(a, container) for a in args)
    return False


def type_name(annotation: Any) -> str:
    """Return a type as messages show it: ``int``, ``list[str]``, ``Optional[int]``."""
    if isinstance(annotation, type) and not get_args(annotation):
        return annotation.__name__
    return str(annotation).replace("typing.", "")
