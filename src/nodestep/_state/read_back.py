"""Which field types' JSON forms provably read back equal, so the store need not check.

A state value is stored only if its JSON form, validated back, equals it (``FieldSpec.
to_json``). For most types that check costs a second validation and a deep comparison on
every write. For some types it cannot fail once the value has been dumped in pydantic's
JSON mode with ``warnings="error"`` (which refuses a value of the wrong type at any
position): the JSON form of a ``str``, an ``int`` within 64 bits, a ``bool``, ``None``, and
lists and str-keyed dicts of them, validates back into an equal value. ``read_back_check``
decides once, when the schema compiles, whether a field's type is such a type, and returns
the check that is left for each value: the few things the serializer lets through.

The serializer lets through a model instance of a subclass (dumped as the declared class,
it would read back as another type), a ``Literal`` field holding a value outside it (a
``model_construct`` instance, a reducer's output), and in an ``Any`` position anything. So
the check left walks those positions only: each model is of its declared class, each
literal one of its values, and each ``Any`` value plain JSON data (str, int, bool, None,
lists, str-keyed dicts; no float, whose nan reads back as None), each int with bounds
(``Field(ge=0)``) within them, each member of a union tagged by a literal field (``Field(
discriminator=...)``) of a class in the rule. A value that fails the walk is not refused:
it gets the full check, with its error.

For such a type with models, literals or ``Any`` in it, ``exact_dump`` builds the JSON
form in Python and does the walk on the way.

A model class whose validators only fill in what its dump holds says so (``KEEPS_DUMP``),
and the rule takes it despite them. ``first_difference`` says where a value read back
differs from what was written, type by type, for the full path's error.
"""

from __future__ import annotations

import dataclasses
import enum
import operator
import types
from collections.abc import Callable
from typing import (
    Annotated,
    Any,
    Literal,
    TypeVar,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

import annotated_types
from pydantic import BaseModel

__all__ = [
    "KEEPS_DUMP",
    "MISS",
    "ValueCheck",
    "always",
    "changes_values",
    "first_difference",
    "int_bounds",
    "is_json_data",
    "is_plain_json",
    "json_kind",
    "may_read_back_as_base",
    "read_back_check",
    "tagged_members",
    "within_bounds",
]

ValueCheck = Callable[[Any], bool]
"""Tell whether a dumped value of a field provably reads back equal."""

KEEPS_DUMP = "__nodestep_keeps_dump__"
"""Set to ``True`` in a model class's own body (not inherited): the class promises that its
validators give back, from its own JSON dump, an instance equal to the one dumped (they
only fill in what a dump always holds), so the rule takes it despite them."""

_LEAVES: tuple[Any, ...] = (str, int, bool, type(None))

# Model config keys that make a second validation change a value a first one gave, or
# let a value in that the dump does not give back.
_CHANGING_CONFIG = frozenset(
    {
        "str_strip_whitespace",
        "str_to_lower",
        "str_to_upper",
        "str_min_length",
        "str_max_length",
        "alias_generator",
        "json_encoders",
    }
)

# What a model's decorators may hold for the rule: none of these.
_DECORATORS = (
    "validators",
    "field_validators",
    "root_validators",
    "field_serializers",
    "model_serializers",
    "model_validators",
    "computed_fields",
)


def always(value: Any) -> bool:
    """Return ``True``: a type whose dumped values need no walk."""
    return True


def read_back_check(annotation: Any) -> ValueCheck | None:
    """Return the check left for a value of ``annotation`` once dumped, or ``None``.

    ``None``: the type is outside the rule (a float, a datetime, a model with a validator,
    ...), and every value gets the full validate-back-and-compare check. Otherwise a
    function of the value: ``True`` when its JSON form provably reads back equal.
    """
    return _check(annotation, frozenset())


def changes_values(config: Any) -> bool:
    """Tell whether a config (a model's, or a state class's for its fields) can make a
    second validation give another value than the first, or the dump another form."""
    return bool(_CHANGING_CONFIG & {k for k, v in config.items() if v})


def _check(annotation: Any, seen: frozenset[type]) -> ValueCheck | None:
    if annotation in _LEAVES:
        return always
    if annotation is Any:
        return is_plain_json
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel) and annotation not in seen:
            return _model_check(annotation, seen | {annotation})
        return None
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Literal:
        return _literal_check(args)
    if (origin is list and len(args) == 1) or _variadic(origin, args):
        return _list_check(_check(args[0], seen))
    if origin is dict and len(args) == 2 and args[0] is str:
        return _dict_check(_check(args[1], seen))
    if origin in (Union, types.UnionType):
        return _union_check(args, seen)
    tagged = tagged_members(annotation)
    if tagged is not None:
        return _tagged_check(tagged, seen)
    return None


def _variadic(origin: Any, args: tuple[Any, ...]) -> bool:
    """Tell whether a type is ``tuple[X, ...]``: a JSON array that reads back as a tuple."""
    return origin is tuple and len(args) == 2 and args[1] is Ellipsis


def tagged_members(annotation: Any) -> list[type[BaseModel]] | None:
    """Return the models of a union tagged by a literal field, or ``None``.

    That is ``Annotated[A | B, Field(discriminator="kind")]`` with nothing else in the
    ``Field``: each member's JSON form holds its tag, which picks that member when read
    back, so two models of one JSON kind cannot swap there as they can in a plain union.
    """
    if get_origin(annotation) is not Annotated:
        return None
    inner, *meta = get_args(annotation)
    if len(meta) != 1 or get_origin(inner) not in (Union, types.UnionType):
        return None
    tag = getattr(meta[0], "discriminator", None)
    if type(tag) is not str or getattr(meta[0], "_attributes_set", None) != {"discriminator": tag}:
        return None
    members = list(get_args(inner))
    for member in members:
        if not (isinstance(member, type) and issubclass(member, BaseModel)):
            return None
        field = member.model_fields.get(tag)
        if (
            field is None
            or field.alias not in (None, tag)
            or get_origin(field.annotation) is not Literal
        ):
            return None
    return members


def _tagged_check(members: list[type[BaseModel]], seen: frozenset[type]) -> ValueCheck | None:
    # A member outside the rule (a validator, say) leaves its values to the full check.
    by_class = {m: _check(m, seen) for m in members}
    if all(c is None for c in by_class.values()):
        return None

    def check(value: Any) -> bool:
        found = by_class.get(type(value))
        return found is not None and found(value)

    return check


def _literal_check(args: tuple[Any, ...]) -> ValueCheck | None:
    if not all(type(a) in _LEAVES for a in args):
        return None
    if all(type(a) is str for a in args):
        texts = frozenset(args)
        return lambda value: type(value) is str and value in texts
    # By type and value: True == 1, but Literal[1] does not take True back.
    allowed = frozenset((type(a), a) for a in args)
    return lambda value: (type(value), value) in allowed


def _list_check(item: ValueCheck | None) -> ValueCheck | None:
    if item is None or item is always:
        return item
    return lambda value: all(item(v) for v in value)


def _dict_check(item: ValueCheck | None) -> ValueCheck | None:
    if item is None or item is always:
        return item
    return lambda value: all(item(v) for v in value.values())


def json_kind(annotation: Any) -> object:
    """Return what a value of ``annotation`` is in JSON (str, list, object, ...)."""
    if get_origin(annotation) is Literal:
        kinds = {type(a) for a in get_args(annotation)}
        return kinds.pop() if len(kinds) == 1 else None
    if annotation is Any:
        return None
    origin = get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return dict
    if _variadic(origin, get_args(annotation)):
        return list
    if tagged_members(annotation) is not None:
        return dict
    return origin if origin in (list, dict) else annotation


def _union_check(args: tuple[Any, ...], seen: frozenset[type]) -> ValueCheck | None:
    """Return the check of a union whose members are apart in JSON, or ``None``.

    ``str | list[str] | None`` reads back as it was: a JSON string can only be the str. Two
    members of one JSON kind (two models, ``int | bool``'s 1 and True in a lax read) could
    swap, so such a union is outside the rule.
    """
    rest = [a for a in args if a is not type(None)]
    kinds = [json_kind(a) for a in rest]
    if None in kinds or len(set(kinds)) != len(kinds) or {int, bool} <= set(kinds):
        return None
    checks = [(json_kind(a), _check(a, seen)) for a in rest]
    if any(c is None for _, c in checks):
        return None
    if all(c is always for _, c in checks):
        return always
    by_kind: dict[Any, ValueCheck] = {k: c for k, c in checks if c is not None}

    def check(value: Any) -> bool:
        if value is None:
            return True
        found = by_kind.get(type(value))
        if found is None and isinstance(value, BaseModel):
            found = by_kind.get(dict)
        return found is not None and found(value)

    return check


def _plain_model(cls: type[BaseModel]) -> bool:
    """Tell whether a model's class keeps its fields as they are, both ways."""
    config = cls.model_config
    decorators = cls.__pydantic_decorators__
    return (
        config.get("extra") != "allow"
        and config.get("validate_by_alias", True) is not False
        and not changes_values(config)
        and not cls.__private_attributes__
        and (
            not any(getattr(decorators, name, None) for name in _DECORATORS)
            or cls.__dict__.get(KEEPS_DUMP) is True
        )
        and cls.model_post_init is BaseModel.model_post_init
        and getattr(cls.__get_pydantic_core_schema__, "__func__", None)
        is getattr(BaseModel.__get_pydantic_core_schema__, "__func__", None)
    )


def _model_check(cls: type[BaseModel], seen: frozenset[type]) -> ValueCheck | None:
    if not _plain_model(cls):
        return None
    walks: list[tuple[str, ValueCheck]] = []
    for name, info in cls.model_fields.items():
        alias = info.alias
        bounds = _bounds(info.metadata)
        if info.exclude or bounds is None or info.discriminator is not None:
            return None
        if info.validation_alias not in (None, alias) or info.serialization_alias not in (
            None,
            alias,
        ):
            return None
        check = _check(info.annotation, seen)
        if check is None:
            return None
        if bounds:
            if info.annotation is not int:
                return None
            check = _bounded_check(bounds)
        if check is not always:
            walks.append((name, check))

    def model(value: Any) -> bool:
        if type(value) is not cls:
            return False
        for name, check in walks:  # noqa: SIM110 - a loop costs less than all() of a generator
            if not check(getattr(value, name)):
                return False
        return True

    return model


# A bound pydantic checks on an int, with the comparison it makes.
_BOUNDS: dict[type, tuple[str, Callable[[Any, Any], bool]]] = {
    annotated_types.Ge: ("ge", operator.ge),
    annotated_types.Gt: ("gt", operator.gt),
    annotated_types.Le: ("le", operator.le),
    annotated_types.Lt: ("lt", operator.lt),
}


def _bounds(metadata: list[Any]) -> list[Any] | None:
    """Return a field's bounds (``Field(ge=0)``), ``[]`` for none, ``None`` for other
    metadata, whose effect on a value read back is not known here."""
    if all(type(m) in _BOUNDS for m in metadata):
        return metadata
    return None


def int_bounds(bounds: list[Any]) -> list[tuple[Callable[[Any, Any], bool], Any]]:
    """Return ``bounds`` as ``(compare, limit)`` pairs: an int ``v`` is within them when
    ``compare(v, limit)`` holds for each."""
    return [(_BOUNDS[type(b)][1], getattr(b, _BOUNDS[type(b)][0])) for b in bounds]


def within_bounds(bounds: list[Any]) -> ValueCheck:
    """Tell whether an int is within ``bounds``: one outside (``model_construct``, or a
    value changed after validation) would be refused when read back."""
    checks = int_bounds(bounds)

    def within(value: Any) -> bool:
        return all(compare(value, limit) for compare, limit in checks)

    return within


def _bounded_check(bounds: list[Any]) -> ValueCheck:
    within = within_bounds(bounds)
    return lambda value: type(value) is int and within(value)


def is_plain_json(value: Any) -> bool:
    """Tell whether ``value`` is JSON data of the exact builtin types, without floats."""
    # A loop over a stack rather than recursion: one call for a whole tool call's args.
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if kind is list:
            stack.extend(item)
        elif kind is dict:
            for key in item:
                if type(key) is not str:
                    return False
            stack.extend(item.values())
        else:
            return False
    return True


_JSON_LEAVES = frozenset({str, int, float, bool, type(None)})
_JSON_KINDS = _JSON_LEAVES | {list, dict}


def is_json_data(value: Any) -> bool:
    """Tell whether ``value`` is JSON data of the exact builtin types, floats included.

    A value that is such data and equals its JSON form is that form: nothing in it can
    read back as another type. (``==`` alone cannot tell: ``Color.RED == 1`` for an
    ``IntEnum``, and a ``StrEnum`` member equals its text.)
    """
    kind = type(value)
    if kind in _JSON_LEAVES:
        return True
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is dict:
            # The types of a container's items at once (map and set run in C): a list of
            # numbers costs a fraction of a loop over it.
            if not set(map(type, item)) <= {str}:
                return False
            items: Any = item.values()
        elif type(item) is list:
            items = item
        else:
            return False
        kinds = set(map(type, items))
        if kinds <= _JSON_LEAVES:
            continue
        if not kinds <= _JSON_KINDS:
            return False
        stack.extend(v for v in items if type(v) is list or type(v) is dict)
    return True


def may_read_back_as_base(annotation: Any) -> bool:
    """Tell whether a value of ``annotation`` may read back as a plain builtin where it
    held a subclass of it, ``==`` to it: an ``IntEnum`` member as its int.

    That takes a place that also admits the plain value: ``Any`` or ``object`` (also as
    the items of a bare ``list`` or ``dict``, or a model's extra fields), or a union with
    an enum or a subclass of a builtin in it. Elsewhere validation gives back the declared
    type, so ``==`` of the value read back is the whole check. Why it matters: the
    type-by-type walk (``first_difference``) costs several times ``==`` in Python, on
    every write of a field such as a conversation's messages.
    """
    return _loose(annotation, frozenset())


_BARE = frozenset({list, dict, tuple, set, frozenset})


def _loose(annotation: Any, seen: frozenset[Any]) -> bool:
    if annotation is Any or annotation is object or isinstance(annotation, TypeVar):
        return True
    if annotation in _BARE:
        return True
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Literal:
        return False
    if origin in (Union, types.UnionType) and any(_subclassed(a) for a in args):
        return True
    if origin is not None:
        return any(_loose(a, seen) for a in args if a is not Ellipsis)
    if not isinstance(annotation, type) or annotation in seen:
        return False
    seen = seen | {annotation}
    if issubclass(annotation, BaseModel):
        if annotation.model_config.get("extra") == "allow":
            return True
        return any(_loose(f.annotation, seen) for f in annotation.model_fields.values())
    if dataclasses.is_dataclass(annotation) or is_typeddict(annotation):
        try:
            hints = get_type_hints(annotation)
        except Exception:  # a hint that does not resolve: take the slow, sure way
            return True
        return any(_loose(h, seen) for h in hints.values())
    return False


def _subclassed(annotation: Any) -> bool:
    """Tell whether a union member is a subclass of a builtin scalar (an enum, say)."""
    return (
        isinstance(annotation, type)
        and annotation not in _SCALARS
        and (issubclass(annotation, enum.Enum) or issubclass(annotation, _BUILTINS))
    )


_BUILTINS: tuple[type, ...] = (str, int, float, bytes)


_SCALARS = frozenset({str, int, float, bool, type(None), bytes})


def first_difference(value: Any, back: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """Return where ``back``, ``value`` read back from its JSON form, first differs from it.

    Returns ``(path, part of value, part of back)``, or ``None`` when the two are the same
    value, of the same types throughout. Why not ``==``: it takes an ``IntEnum`` member for
    its int and a ``StrEnum`` member for its text, so ``Color.RED`` in an ``Any`` or an
    ``int | Color`` field, which reads back as ``1``, would pass for read back equal.
    Models and dataclasses are compared field by field (a model's private attributes
    count), and sets must hold items of the same types.

    Why two walks: the common answer is "the same", which ``_same`` gives without
    building a path for every item (a conversation's messages are written at every step);
    only a difference is walked again, for its place.
    """
    try:
        if _same(value, back):
            return None
    except Exception:  # an odd value's own == raised: the walk below says where
        pass
    return _difference(value, back, path)


def _same(a: Any, b: Any) -> bool:
    """Tell whether ``a`` and ``b`` are the same value of the same types throughout, as
    ``_difference`` finds no difference."""
    kind = type(a)
    if kind is not type(b):
        return False
    if kind in _SCALARS:
        return bool(a == b)
    if kind is list or kind is tuple:
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        if len(a) != len(b):
            return False
        for key, item in a.items():
            if type(key) is str:  # a str key reads back as the same str, or not at all
                again = b.get(key, MISS)
                if again is MISS or not _same(item, again):
                    return False
            else:
                return False  # rare: the slow walk decides, by the keys' types
        return True
    if isinstance(a, BaseModel):
        if not _same(a.__dict__, b.__dict__):
            return False
        if (a.__pydantic_extra__ or b.__pydantic_extra__) and not _same(
            a.__pydantic_extra__ or {}, b.__pydantic_extra__ or {}
        ):
            return False
        return bool(a.__pydantic_private__ == b.__pydantic_private__)
    return _difference(a, b, "") is None


def _difference(value: Any, back: Any, path: str) -> tuple[str, Any, Any] | None:
    """``first_difference``, walked with the path of each part."""
    kind = type(value)
    if kind is not type(back):
        return path, value, back
    if kind in _SCALARS:
        return None if value == back else (path, value, back)
    if isinstance(value, dict):
        if len(value) != len(back):
            return path, value, back
        keys = {(type(k), k): k for k in back}
        for key, item in value.items():
            found = keys.get((type(key), key), MISS)
            if found is MISS:  # read back as another key: an equal one, or none
                again = next((k for k in back if k == key), MISS)
                return f"{path}[{key!r}] (its key)", key, again
            hit = _difference(item, back[found], f"{path}[{key!r}]")
            if hit is not None:
                return hit
        return None
    if isinstance(value, list | tuple):
        if len(value) != len(back):
            return path, value, back
        for i, (item, again) in enumerate(zip(value, back, strict=True)):
            hit = _difference(item, again, f"{path}[{i}]")
            if hit is not None:
                return hit
        return None
    if isinstance(value, set | frozenset):
        same = {(type(v), v) for v in value} == {(type(v), v) for v in back}
        return None if same else (path, value, back)
    if isinstance(value, BaseModel) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    ):
        return _object_difference(value, back, path)
    return None if value == back else (path, value, back)


def _object_difference(value: Any, back: Any, path: str) -> tuple[str, Any, Any] | None:
    """``first_difference`` of two models, or two dataclasses, of the same class."""
    names = (
        list(value.__dict__)
        if isinstance(value, BaseModel)
        else [f.name for f in dataclasses.fields(value)]  # a slotted one has no __dict__
    )
    for name in names:
        item = getattr(value, name)
        hit = _difference(item, getattr(back, name, MISS), f"{path}.{name}")
        if hit is not None:
            return hit
    if not isinstance(value, BaseModel):
        return None
    extra = value.__pydantic_extra__
    hit = _difference(extra, back.__pydantic_extra__, path) if extra else None
    if hit is not None:
        return hit
    # What the fields do not show, and a JSON form leaves out: private attributes.
    same = value.__pydantic_private__ == back.__pydantic_private__
    return None if same else (path, value, back)


MISS: Any = object()
"""What a dumper (``exact_dump``) returns for a value it does not take, and what
``first_difference`` reports for a part that is missing."""
