"""The JSON form of a value of a type in the read-back rule, built in Python.

``read_back`` decides which field types' JSON forms provably read back equal. For such a
type with models, literals or ``Any`` in it, ``exact_dumper`` builds the JSON form in
Python and checks on the way what pydantic's dump would let through (each model of its
declared class, each literal one of its values, each ``Any`` plain JSON data, each int
within its bounds, each tagged union's member in the rule): a value whose every part is of
its declared type exactly gets its JSON form at a third of the cost of pydantic's dump of
a small model, and no walk after; any other value gets ``MISS`` and takes the full path.

A field's metadata object whose validation the rule cannot see into may bring the dumper
of the whole field (``OWN_DUMP``), as a conversation's does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import UnionType
from typing import Annotated, Any, Literal, Union, cast, get_args, get_origin

from pydantic import BaseModel

from nodestep._state.read_back import (
    MISS,
    always,
    int_bounds,
    json_kind,
    read_back_check,
    tagged_members,
    within_bounds,
)

__all__ = ["OWN_DUMP", "Dumper", "array_dumper", "exact_dumper", "own_dumper", "plain_copy"]

OWN_DUMP = "__nodestep_dump__"
"""An attribute of a field's metadata object (in ``Annotated``) whose validation the rule
cannot see into: a ``Dumper`` of the field's whole value. It returns what pydantic's dump
in JSON mode by alias gives for a value whose JSON form provably reads back, through the
field's validation, equal and of the same types throughout; for any other value ``MISS``."""


Dumper = Callable[[Any], Any]
"""Return the JSON form of a value, or ``MISS``."""

_MAX_DEPTH = 255  # orjson's own limit: deeper data takes the full path, which refuses it


def own_dumper(metadata: list[Any]) -> Dumper | None:
    """Return the dumper a field's one metadata object brings (``OWN_DUMP``), or ``None``.

    Only a field whose metadata is that object alone: another (a constraint, say) could
    refuse or change a value read back, which the object's dumper cannot know of.
    """
    if len(metadata) != 1:
        return None
    found = getattr(metadata[0], OWN_DUMP, None)
    return found if callable(found) else None


def exact_dumper(annotation: Any) -> Dumper | None:
    """Return a function giving the JSON form of a value of ``annotation``, or ``None``.

    For a type in the rule (``read_back_check``) with models, literals or ``Any`` in it;
    ``None`` for other types, and for plain containers of str, int, bool and None, which
    pydantic's dump handles faster. The function returns what pydantic's dump in JSON mode
    by alias would, for a value whose every part is of its declared type exactly (a model
    of its class, a literal of its values, an ``Any`` of plain JSON data); for anything
    else ``MISS``, and the value takes the full path with its errors. Built in Python, it
    costs about a third of pydantic's dump of a small model, and needs no walk after.
    """
    if read_back_check(annotation) in (None, always):
        return None
    return _dumper(annotation)


def _same_str(value: Any) -> Any:
    return value if type(value) is str else MISS


def _same_int(value: Any) -> Any:
    return value if type(value) is int else MISS


def _same_bool(value: Any) -> Any:
    return value if type(value) is bool else MISS


def _same_none(value: Any) -> Any:
    return value if value is None else MISS


_LEAF_DUMPERS: dict[Any, Dumper] = {
    str: _same_str,
    int: _same_int,
    bool: _same_bool,
    type(None): _same_none,
}


def _dumper(annotation: Any) -> Dumper:
    """Return the dumper of a type ``read_back_check`` takes (so every branch is known)."""
    leaf = _LEAF_DUMPERS.get(annotation)
    if leaf is not None:
        return leaf
    if annotation is Any:
        return lambda value: plain_copy(value, 0)
    if isinstance(annotation, type):
        return _model_dumper(annotation)
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Literal:
        allowed = _literal_values(annotation)
        return lambda value: value if (type(value), value) in allowed else MISS
    if origin is list:
        return array_dumper(list, _dumper(args[0]))
    if origin is tuple:
        return array_dumper(tuple, _dumper(args[0]))
    if origin is dict:
        return _dict_dumper(_dumper(args[1]))
    if origin is Annotated:
        return _tagged_dumper(cast(list[type[BaseModel]], tagged_members(annotation)))
    return _union_dumper(args)


def array_dumper(kind: type[Sequence[Any]], item: Dumper) -> Dumper:
    """Return the dumper of a sequence of exactly type ``kind`` (``list``, ``tuple``, or a
    field's own list class) whose items ``item`` dumps: a JSON array, or ``MISS``."""

    def dump(value: Any) -> Any:
        if type(value) is not kind:
            return MISS
        out = []
        for v in value:
            data = item(v)
            if data is MISS:
                return MISS
            out.append(data)
        return out

    return dump


def _tagged_dumper(members: list[type[BaseModel]]) -> Dumper:
    # Only the members in the rule: another's values get the full path.
    by_class = {m: _dumper(m) for m in members if read_back_check(m) is not None}

    def dump(value: Any) -> Any:
        found = by_class.get(type(value))
        return MISS if found is None else found(value)

    return dump


def _dict_dumper(item: Dumper) -> Dumper:
    def dump(value: Any) -> Any:
        if type(value) is not dict:
            return MISS
        out = {}
        for k, v in value.items():
            data = item(v)
            if data is MISS or type(k) is not str:
                return MISS
            out[k] = data
        return out

    return dump


def _union_dumper(args: tuple[Any, ...]) -> Dumper:
    by_kind: dict[Any, Dumper] = {type(None): _same_none}
    for arg in args:
        if arg is not type(None):
            by_kind[json_kind(arg)] = _dumper(arg)

    def dump(value: Any) -> Any:
        found = by_kind.get(type(value))
        if found is None:
            if not isinstance(value, BaseModel):
                return MISS
            found = by_kind.get(dict)
            if found is None:
                return MISS
        return found(value)

    return dump


def _model_dumper(cls: type[BaseModel]) -> Dumper:
    # A field whose dumper only checks the value's exact type (a str, an int, a str or
    # None, ...) is checked inline: most fields of a message or a record are such, and a
    # function call per field cost more than the check (about 1% of an agent's turn, W10).
    # So is a literal's (a message's role, a record's status): one a model has, or two.
    fields = [
        (info.alias or name, name, *_field_check(info.annotation, info.metadata))
        for name, info in cls.model_fields.items()
    ]

    def dump(value: Any) -> Any:
        if type(value) is not cls:
            return MISS
        out = {}
        # Read from the instance's dict, where pydantic keeps the fields and its own dump
        # reads them: a subscript costs less than a getattr (about 80 a turn of W10's
        # agent). A field missing from it (``model_construct``) makes the value MISS, as
        # a MISS read made every dumper return.
        held = value.__dict__
        for key, name, kinds, allowed, field in fields:
            try:
                data = held[name]
            except KeyError:
                return MISS
            if kinds is not None:
                if type(data) not in kinds:
                    return MISS
            elif allowed is not None:
                if (type(data), data) not in allowed:
                    return MISS
            else:
                data = field(data)
                if data is MISS:
                    return MISS
            out[key] = data
        return out

    return dump


def _field_check(
    annotation: Any, metadata: list[Any]
) -> tuple[frozenset[type] | None, frozenset[tuple[type, Any]] | None, Dumper]:
    """Return a model field's exact types, when its dumper returns a value of one of them
    as it is and refuses any other (``_exact_types``); for a literal, its values with their
    types, which its dumper passes as they are and no other; and its dumper."""
    dumper = _field_dumper(annotation, metadata)
    if metadata:
        return None, None, dumper
    kinds = _exact_types(annotation)
    if kinds is None and get_origin(annotation) is Literal:
        return None, _literal_values(annotation), dumper
    return kinds, None, dumper


def _literal_values(annotation: Any) -> frozenset[tuple[type, Any]]:
    """Return the values a literal type allows, each with its type (``True`` is not 1)."""
    return frozenset((type(a), a) for a in get_args(annotation))


def _exact_types(annotation: Any) -> frozenset[type] | None:
    """Return the types ``_dumper(annotation)`` passes as they are, refusing any other value:
    a leaf's, or a union of leaves' with ``None`` (``_union_dumper`` takes ``None``);
    else ``None``."""
    if annotation in _LEAF_DUMPERS:
        return frozenset((annotation,))
    if get_origin(annotation) in (Union, UnionType):
        args = get_args(annotation)
        if all(arg in _LEAF_DUMPERS for arg in args):
            return frozenset((type(None), *args))
    return None


def _field_dumper(annotation: Any, metadata: list[Any]) -> Dumper:
    """Return the dumper of a model's field: its type's, and its bounds (an int's) kept."""
    if not metadata:
        return _dumper(annotation)
    checks = int_bounds(metadata)
    if len(checks) == 1:  # the usual bound (a token count's ge=0), compared inline
        [(compare, limit)] = checks
        return lambda value: value if type(value) is int and compare(value, limit) else MISS
    within = within_bounds(metadata)
    return lambda value: value if type(value) is int and within(value) else MISS


def plain_copy(value: Any, depth: int) -> Any:
    """Return a copy of ``value`` if it is plain JSON data (``is_plain_json``), else ``MISS``."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if depth > _MAX_DEPTH:
        return MISS
    if kind is list:
        out = []
        for v in value:
            data = plain_copy(v, depth + 1)
            if data is MISS:
                return MISS
            out.append(data)
        return out
    if kind is dict:
        copied = {}
        for k, v in value.items():
            data = plain_copy(v, depth + 1)
            if data is MISS or type(k) is not str:
                return MISS
            copied[k] = data
        return copied
    return MISS
