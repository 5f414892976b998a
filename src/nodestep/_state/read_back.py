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
lists, str-keyed dicts; no float, whose nan reads back as None). A value that fails the
walk is not refused: it gets the full check, with its error.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

__all__ = ["ValueCheck", "always", "changes_values", "is_plain_json", "read_back_check"]

ValueCheck = Callable[[Any], bool]
"""Tell whether a dumped value of a field provably reads back equal."""

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
    if origin is list and len(args) == 1:
        return _list_check(_check(args[0], seen))
    if origin is dict and len(args) == 2 and args[0] is str:
        return _dict_check(_check(args[1], seen))
    if origin in (Union, types.UnionType):
        return _union_check(args, seen)
    return None


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


def _json_kind(annotation: Any) -> object:
    """Return what a value of ``annotation`` is in JSON (str, list, object, ...)."""
    if get_origin(annotation) is Literal:
        kinds = {type(a) for a in get_args(annotation)}
        return kinds.pop() if len(kinds) == 1 else None
    if annotation is Any:
        return None
    origin = get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return dict
    return origin if origin in (list, dict) else annotation


def _union_check(args: tuple[Any, ...], seen: frozenset[type]) -> ValueCheck | None:
    """Return the check of a union whose members are apart in JSON, or ``None``.

    ``str | list[str] | None`` reads back as it was: a JSON string can only be the str. Two
    members of one JSON kind (two models, ``int | bool``'s 1 and True in a lax read) could
    swap, so such a union is outside the rule.
    """
    rest = [a for a in args if a is not type(None)]
    kinds = [_json_kind(a) for a in rest]
    if None in kinds or len(set(kinds)) != len(kinds) or {int, bool} <= set(kinds):
        return None
    checks = [(_json_kind(a), _check(a, seen)) for a in rest]
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
        and not any(getattr(decorators, name, None) for name in _DECORATORS)
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
        if info.exclude or info.metadata or info.discriminator is not None:
            return None
        if info.validation_alias not in (None, alias) or info.serialization_alias not in (
            None,
            alias,
        ):
            return None
        check = _check(info.annotation, seen)
        if check is None:
            return None
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
