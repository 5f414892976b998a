"""The stored form of a whole model kept beside the state: a private state, a task input.

A state field's value is checked by its ``FieldSpec``. A node's private state and the
input model of a ``Send`` task are stored as one model each; the next task, a resume and a
new process get the model validated from that JSON form, so the form is checked here, when
it is made, to read back as the same value.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, SecretBytes, SecretStr, ValidationError
from pydantic_core import PydanticSerializationError

from nodestep._errors import StateStoreError
from nodestep._state.json import first_at, first_line, unencodable
from nodestep._state.read_back import (
    MISS,
    first_difference,
    may_read_back_as_base,
    read_back_check,
)
from nodestep._state.set_order import may_hold_set, sets_in_order

__all__ = ["model_json_form", "stored_dump", "validate_stored", "validator"]

# By field name, read back by name or alias (``validate_stored``): a dump by alias would
# use a serialization_alias, which validation does not take, and lose the value. Without
# computed fields, which the model's validation may refuse (``extra="forbid"``). Silent:
# a value of the wrong type is reported by the validation that follows.
_DUMP: dict[str, Any] = {
    "by_alias": False,
    "round_trip": True,
    "exclude_computed_fields": True,
    "warnings": False,
}

M = TypeVar("M", bound=BaseModel)

_MODEL_DUMP = BaseModel.model_dump
_MODEL_VALIDATE = getattr(BaseModel.model_validate, "__func__", None)


def stored_dump(instance: BaseModel, mode: str = "json") -> dict[str, Any]:
    """Return ``instance`` dumped as it is stored (``mode="python"``: before JSON).

    By the model's serializer itself, as pydantic's ``model_dump`` calls it, unless the
    model has a ``model_dump`` of its own: that Python frame passes 15 keywords on, most
    of them defaults (about 8k instructions; a task input is dumped once a turn of W10's
    agent).
    """
    if type(instance).model_dump is _MODEL_DUMP:
        data: dict[str, Any] = instance.__pydantic_serializer__.to_python(
            instance, mode=mode, **_DUMP
        )
        return data
    return instance.model_dump(mode=mode, **_DUMP)


def validator(model: type[M]) -> Callable[..., M]:
    """Return the function validating data into ``model``, which takes ``model_validate``'s
    arguments: its validator's own, as ``model_validate`` calls it, unless the model has a
    ``model_validate`` of its own.

    Why: that Python frame passes its 7 arguments on, most of them ``None`` (about 4k
    instructions a call; three a turn of W10's agent, whose tool calls are task inputs).
    """
    found = getattr(model.model_validate, "__func__", None)
    if found is not None and found is _MODEL_VALIDATE:
        validate: Callable[..., M] = model.__pydantic_validator__.validate_python
        return validate
    return model.model_validate


def validate_stored(model: type[M], data: Any) -> M:
    """Return ``model`` validated from its stored form ``data``.

    By field name, as ``stored_dump`` writes it, or by alias, as older releases did.

    Raises:
        ValidationError: ``data`` does not fit the model.
    """
    return validator(model)(data, by_alias=True, by_name=True)


def model_json_form(instance: BaseModel, what: str) -> dict[str, Any]:
    """Return the JSON form of ``instance``, checked to read back as the same value.

    Why: a value the form does not keep (a nan stored as null, an ``IntEnum`` member in an
    ``Any`` field read back as its int, a ``SecretStr`` masked, a tuple read back as a
    list) or cannot be read back from (a word appended to a ``list[int]``) is refused
    now, rather than changed without a word or failing every later read.

    Args:
        instance: The model.
        what: What the model is, the subject of the error's message, e.g. ``"The private
            state of node 'a' (Memory)"``.

    Raises:
        StateStoreError: a value has no JSON form, does not fit the model, or reads back
            different; the message says where in the model.
    """
    model = type(instance)
    data = _json_form(what, instance)
    quick = _provable(model)
    if quick is not None and quick(instance):  # reads back equal by its types alone
        return data
    if _reads_back_as_it_is(model, instance, data):
        return data
    # The values once validated (a 0 set on a float field is 0.0, a "7" appended to a
    # list[int] is 7): what is stored then, and what must read back. From the values
    # themselves, not a dump, so that what a dump leaves out or changes (an excluded
    # field, a serializer's mask) shows as a difference rather than passing for the value.
    values = {name: getattr(instance, name) for name in model.model_fields}
    values.update(instance.__pydantic_extra__ or {})
    try:
        expected = validate_stored(model, values)
    except ValidationError as error:
        first = error.errors()[0]
        raise StateStoreError(
            f"{what} holds a value that does not fit the model: {first['msg']} at "
            f"{_where(first['loc'])}. Assign values of the declared types (a stored copy "
            f"that does not fit could not be read back)."
        ) from None
    data = _json_form(what, expected)
    back = _read_back(model, data)
    found = ("", expected, back) if back is MISS else first_difference(expected, back)
    if found is not None:
        where, was, again = found
        if isinstance(was, SecretStr | SecretBytes):
            change = f": a {type(was).__name__} is stored masked, as '**********'"
        else:
            change = "" if again is MISS else f": {_kind(was)} comes back as {_kind(again)}"
        raise StateStoreError(
            f"{what} does not survive a JSON round trip{f' at {where}' if where else ''}"
            f"{change}. Keep only values whose JSON form reads back the same (no nan or "
            f"infinite floats, no secrets, nothing in a Field(exclude=True) field; an enum "
            f"member where its field's type is the enum, not Any or a union with int or str)."
        )
    return data


def _reads_back_as_it_is(model: type[BaseModel], instance: BaseModel, data: Any) -> bool:
    """Tell whether ``data``, the JSON form of ``instance``, validates back to it.

    ``==`` is the whole check where no field admits a plain builtin for a subclass of it
    (an ``IntEnum`` member in an ``Any`` field); else the type-by-type walk, which costs
    several times more.
    """
    back = _read_back(model, data)
    if back is MISS:
        return False
    if not _loose(model):
        return bool(back == instance)
    return first_difference(instance, back) is None


def _json_form(what: str, instance: BaseModel) -> dict[str, Any]:
    """Return the JSON form of a model, refusing one the store cannot write."""
    try:
        data = stored_dump(instance)
        if _holds_sets(type(instance)):  # in one order for every process (set_order)
            data = sets_in_order(instance, data, by_alias=False)
        encoded = orjson.dumps(data)
    except (PydanticSerializationError, TypeError, ValueError) as error:
        culprit = first_at(stored_dump(instance, "python"), "", unencodable)
        place = f" at {culprit[0]}" if culprit and culprit[0] else ""
        raise StateStoreError(
            f"{what} cannot be stored as JSON{place}: {first_line(error)}. Keep only JSON "
            f"data in it (integers within 64 bits, text without lone surrogates); pass "
            f"clients and handles through context=."
        ) from None
    # JSON writes a nan or an infinity as null: what is stored is what it reads back as.
    return orjson.loads(encoded) if b"null" in encoded else data


def _read_back(model: type[BaseModel], data: dict[str, Any]) -> Any:
    """Return ``model`` validated from its JSON form ``data``, or ``MISS``."""
    try:
        return validate_stored(model, data)
    except ValidationError:
        return MISS


def _kind(value: Any) -> str:
    name = type(value).__name__
    return f"{value!r:.60} ({'an' if name[:1].lower() in 'aeiou' else 'a'} {name})"


def _where(loc: tuple[int | str, ...]) -> str:
    return "".join(f".{part}" if isinstance(part, str) else f"[{part}]" for part in loc)


_loose = functools.cache(may_read_back_as_base)
"""``may_read_back_as_base`` of a model class, worked out once per class."""

_provable = functools.cache(read_back_check)
"""The check of a model class whose JSON form provably reads back equal (the rule state
fields follow, ``read_back.read_back_check``), or ``None``: then it is read back. Why:
a task input is sent with every tool call, and reading it back costs a validation."""


@functools.cache
def _holds_sets(model: type[BaseModel]) -> bool:
    """Tell whether a model's values may hold a set (``set_order.may_hold_set``), once per
    model class."""
    return may_hold_set(model.__pydantic_core_schema__)
