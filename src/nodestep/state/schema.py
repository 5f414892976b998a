"""Compile a state class into channels, validators and JSON converters, one per field.

The schema is the only place that knows the state class. The rest of the engine works on a
plain ``dict`` of field values, which is cheap to copy and to fold; the schema turns input and
updates into validated values, values into their stored JSON form and back, and values into
an instance of the declared class for nodes and results.
"""

from __future__ import annotations

import copy
import inspect
import math
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, cast

import orjson
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

from nodestep.errors import GraphConfigError, StateStoreError, StateUpdateError
from nodestep.state.channels import Channel, FieldWrite, channel_for
from nodestep.state.field_types import is_immutable, is_json_native, type_name
from nodestep.state.reducers import Replace, field_reducer, is_reducer_candidate
from nodestep.state.view import make_view_class, new_view

__all__ = ["FieldSpec", "StateSchema"]

_SIMPLE = (int, str, bool)
_INT_MIN, _UINT_MAX = -(2**63), 2**64 - 1

# The model_config keys that also govern one field validated on its own.
_FIELD_CONFIG_KEYS = frozenset(
    {
        "arbitrary_types_allowed",
        "strict",
        "str_strip_whitespace",
        "str_to_lower",
        "str_to_upper",
        "str_min_length",
        "str_max_length",
        "coerce_numbers_to_str",
        "use_enum_values",
        "ser_json_timedelta",
        "ser_json_bytes",
        "val_json_bytes",
        "ser_json_inf_nan",
        "regex_engine",
    }
)


# BaseModel's own attributes, set past its validating __setattr__ (the slots' setters are
# the fastest way; ``instance`` runs for every snapshot and result).
_set_attr = object.__setattr__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def _first_error(error: ValidationError) -> str:
    detail = error.errors(include_url=False)[0]
    where = ".".join(str(p) for p in detail.get("loc", ()))
    message = str(detail.get("msg", "invalid value"))
    return f"{message} (at {where})" if where else message


@dataclass(slots=True)
class FieldSpec:
    """One state field: its channel, its validator and its JSON form."""

    name: str
    annotation: Any
    channel: Channel
    immutable: bool
    simple: type | None
    adapter: TypeAdapter[Any]
    model_field: Any
    json_native: bool = False
    _factory_takes_data: bool | None = None

    def default(self) -> Any:
        """Return a fresh default value.

        pydantic's ``FieldInfo.get_default`` inspects the factory's signature on every call
        (about 2 µs a field); a new thread needs every default, so the factory is called here.
        """
        info = self.model_field
        factory = info.default_factory
        if factory is None:
            return info.default if self.immutable else copy.deepcopy(info.default)
        if self._factory_takes_data is None:
            self._factory_takes_data = _takes_argument(factory)
        return factory({}) if self._factory_takes_data else factory()

    def validate(self, value: Any, writer: str) -> Any:
        """Return ``value`` validated against the field's type."""
        if self.simple is not None and type(value) is self.simple:
            return value
        try:
            return self.adapter.validate_python(value)
        except ValidationError as error:
            raise StateUpdateError(
                f"Field '{self.name}' got an invalid value from '{writer}': "
                f"{_first_error(error)}. Expected {type_name(self.annotation)}.",
                field=self.name,
                writer=writer,
            ) from None

    def to_json(self, value: Any) -> Any:
        """Return the JSON form of ``value``, checking that it reads back equal.

        Raises:
            StateStoreError: the value has no JSON form, or comes back different.
        """
        if self.simple is not None and type(value) is self.simple:
            if type(value) is int and not _INT_MIN <= value <= _UINT_MAX:
                raise StateStoreError(
                    f"Field '{self.name}' holds an int beyond 64 bits, which the stores cannot "
                    f"write. Keep integers within 64 bits, or store bigger ones as strings."
                )
            return value
        if type(value) is float and self.annotation is float:
            if math.isfinite(value):
                return value
            raise StateStoreError(
                f"Field '{self.name}' holds a float that JSON cannot store (nan or infinity)."
            )
        try:
            data = self.adapter.dump_python(value, mode="json", warnings="error")
        except (PydanticSerializationError, TypeError, ValueError) as error:
            raise StateStoreError(
                f"Field '{self.name}' cannot be stored as JSON: a value of type "
                f"{type(value).__name__} has no JSON form for {type_name(self.annotation)} "
                f"({str(error).splitlines()[0]}). Keep only JSON data in the state; pass "
                f"clients and handles through context=."
            ) from None
        try:
            orjson.dumps(data)
        except TypeError as error:  # e.g. an int beyond 64 bits inside a list
            raise StateStoreError(
                f"Field '{self.name}' cannot be stored as JSON: {error}. Keep integers within "
                f"64 bits (store bigger ones as strings)."
            ) from None
        if self.json_native and type(data) is type(value) and data == value:
            return data
        try:
            back = self.adapter.validate_python(data, strict=False)
            same = back == value
        except (ValidationError, TypeError, ValueError):
            same = False
        if not same:
            raise StateStoreError(
                f"Field '{self.name}' does not survive a JSON round trip: a value of type "
                f"{type(value).__name__} comes back different as {type_name(self.annotation)}. "
                f"Use JSON-friendly types (no nan, no private or excluded model fields)."
            )
        return data

    def dump(self, value: Any) -> Any:
        """Return the JSON form of a value already checked by ``to_json``."""
        if self.simple is not None and type(value) is self.simple:
            return value
        return self.adapter.dump_python(value, mode="json")

    def from_json(self, data: Any) -> Any:
        """Turn a stored JSON form back into the field's type."""
        if self.simple is not None and type(data) is self.simple:
            return data
        return self.adapter.validate_python(data, strict=False)


def _takes_argument(factory: Any) -> bool:
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return False
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return any(p.kind in kinds and p.default is inspect.Parameter.empty for p in params)


class StateSchema:
    """A state class compiled into one channel, validator and JSON converter per field.

    Attributes:
        cls: The declared state class.
        fields: The fields, in declaration order.
        channels: One channel per field.
    """

    _cache: typing.ClassVar[dict[type, StateSchema]] = {}

    def __init__(self, cls: type[BaseModel]) -> None:
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
            raise GraphConfigError(
                f"The state type must be a pydantic model (a BaseState subclass), got "
                f"{cls!r}. Declare class MyState(BaseState) with typed fields."
            )
        self.cls = cls
        field_config = cast(
            ConfigDict, {k: v for k, v in cls.model_config.items() if k in _FIELD_CONFIG_KEYS}
        )
        self.fields: dict[str, FieldSpec] = {}
        for name, info in cls.model_fields.items():
            if info.is_required():
                raise GraphConfigError(
                    f"Field '{name}' of {cls.__name__} has no default. A new thread starts from "
                    f"the defaults, so every state field needs one, e.g. '{name}: str = \"\"' "
                    f"or Field(default_factory=list)."
                )
            reducer = field_reducer(name, info, cls)
            pydantic_meta = [m for m in info.metadata if not is_reducer_candidate(m)]
            annotation = info.annotation
            target: Any = Annotated[(annotation, *pydantic_meta)] if pydantic_meta else annotation
            is_model = isinstance(annotation, type) and issubclass(annotation, BaseModel)
            config = field_config if field_config and not is_model else None
            self.fields[name] = FieldSpec(
                name=name,
                annotation=annotation,
                channel=channel_for(name, reducer),
                immutable=is_immutable(annotation),
                simple=cast(type, annotation)
                if annotation in _SIMPLE and not pydantic_meta
                else None,
                adapter=TypeAdapter(target, config=config),
                model_field=info,
                json_native=not pydantic_meta and is_json_native(annotation),
            )
        self.channels: dict[str, Channel] = {n: f.channel for n, f in self.fields.items()}
        self._private = bool(cls.__private_attributes__)
        self.private_defaults: dict[str, Any] = {
            n: a.get_default() for n, a in cls.__private_attributes__.items()
        }
        self.view_cls = make_view_class(cls, [n for n, f in self.fields.items() if not f.immutable])

    @classmethod
    def of(cls, state_cls: type[BaseModel]) -> StateSchema:
        """Return the compiled schema of ``state_cls``, compiling it once."""
        schema = cls._cache.get(state_cls)
        if schema is None:
            schema = cls._cache[state_cls] = StateSchema(state_cls)
        return schema

    def view(self, originals: dict[str, Any]) -> BaseModel:
        """Return the task's copy of the state over ``originals`` (see ``state.view``)."""
        return new_view(self.view_cls, originals, self.private_defaults or None)

    # -- values -------------------------------------------------------------------------

    def defaults(self) -> dict[str, Any]:
        """Return the schema defaults as a fresh values dict."""
        values: dict[str, Any] = {}
        for name, spec in self.fields.items():
            values[name] = spec.default()
        return values

    def instance(self, values: Mapping[str, Any], *, copy: bool = True) -> BaseModel:
        """Return the declared class holding ``values`` (no validation: they are valid).

        ``copy=False`` hands the instance ``values`` itself, a dict the caller gives up.
        """
        if self._private:
            return self.cls.model_construct(**values)
        inst = object.__new__(self.cls)
        _set_attr(inst, "__dict__", dict(values) if copy else values)
        _set_fields_set(inst, set(values))
        _set_extra(inst, None)
        _set_private(inst, None)
        return inst

    def validate_update(
        self, update: Mapping[str, Any] | BaseModel, writer: str
    ) -> list[FieldWrite]:
        """Validate an update; return ``(field, value, replace)`` triples in update order.

        A dict sets the fields it names; ``Replace(v)`` bypasses the field's reducer. A model
        instance of the state class is the full state: it replaces every field.
        """
        if isinstance(update, BaseModel):
            if not isinstance(update, self.cls):
                raise StateUpdateError(
                    f"'{writer}' passed a {type(update).__name__} where a dict or a "
                    f"{self.cls.__name__} was expected.",
                    writer=writer,
                )
            return [(n, getattr(update, n), True) for n in self.fields]
        if not isinstance(update, Mapping):
            raise StateUpdateError(
                f"'{writer}' passed {type(update).__name__} as an update; pass a dict of "
                f"field values.",
                writer=writer,
            )
        out: list[FieldWrite] = []
        fields = self.fields
        for key, value in update.items():
            spec = fields.get(key)
            if spec is None:
                known = ", ".join(fields) or "(none)"
                raise StateUpdateError(
                    f"'{writer}' wrote '{key}', which is not a field of "
                    f"{self.cls.__name__}. Its fields are: {known}.",
                    field=str(key),
                    writer=writer,
                )
            if type(value) is Replace:
                out.append((key, spec.validate(value.value, writer), True))
            else:
                out.append((key, spec.validate(value, writer), False))
        return out

    # -- JSON ---------------------------------------------------------------------------

    def writes_to_json(self, writes: list[FieldWrite]) -> tuple[dict[str, Any], list[str]]:
        """Return the stored form of validated writes: JSON values, and the replaced fields."""
        data: dict[str, Any] = {}
        replaced: list[str] = []
        fields = self.fields
        for key, value, replace in writes:
            data[key] = fields[key].to_json(value)
            if replace:
                replaced.append(key)
        return data, replaced

    def writes_from_json(
        self, data: Mapping[str, Any], replaced: list[str] | None
    ) -> list[FieldWrite]:
        """Turn a stored update back into validated writes."""
        fields = self.fields
        marks = set(replaced or ())
        out = []
        for key, raw in data.items():
            spec = fields.get(key)
            if spec is None:
                raise StateStoreError(
                    f"The stored update writes '{key}', which is not a field of "
                    f"{self.cls.__name__}; the history was written with another schema."
                )
            out.append((key, spec.from_json(raw), key in marks))
        return out

    def values_to_json(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Return the JSON form of a full values dict."""
        return {k: self.fields[k].to_json(v) for k, v in values.items()}

    def values_from_json(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """Turn a stored full state back into values; fields added since get defaults."""
        values = {}
        for name, spec in self.fields.items():
            values[name] = spec.from_json(data[name]) if name in data else spec.default()
        return values
