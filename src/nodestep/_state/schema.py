"""Compile a state class into channels, validators and JSON converters, one per field.

The schema is the only place that knows the state class. The rest of the engine works on a
plain ``dict`` of field values, which is cheap to copy and to fold; the schema turns input and
updates into validated values, values into their stored JSON form and back, and values into
an instance of the declared class for nodes and results.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any, cast

from pydantic import BaseModel, ConfigDict

from nodestep._errors import GraphConfigError, StateStoreError, StateUpdateError
from nodestep._state.channels import Channel, FieldWrite
from nodestep._state.field_spec import FieldSpec, compile_field
from nodestep._state.field_types import has_exact_form, is_frozen_value
from nodestep._state.reducers import Replace
from nodestep._state.schema_rules import FIELD_CONFIG_KEYS, check_state_class
from nodestep._state.view import make_view_class, new_view

__all__ = ["FieldSpec", "StateSchema", "StoredFieldsMismatch"]

# The writers whose values come from the caller, who keeps the objects: their mutable values
# are copied, so that changing them after the call cannot change the state.
_CALLER_WRITERS = frozenset({"input", "update_state"})


# BaseModel's own attributes, set past its validating __setattr__ (the slots' setters are
# the fastest way; ``instance`` runs for every snapshot and result).
_set_attr = object.__setattr__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


class StoredFieldsMismatch(ValueError):
    """Stored values name fields the state class does not have.

    The ``__cause__`` of the ``StateStoreError`` a load raises, so that the code that knows
    the thread and the record (``_engine.writer``) can say which ones hold them.

    Attributes:
        fields: The stored fields the class does not have, sorted.
    """

    def __init__(self, fields: list[str]) -> None:
        super().__init__(", ".join(fields))
        self.fields = fields


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
        check_state_class(cls)
        self.cls = cls
        field_config = cast(
            ConfigDict, {k: v for k, v in cls.model_config.items() if k in FIELD_CONFIG_KEYS}
        )
        self.fields: dict[str, FieldSpec] = {}
        for name, info in cls.model_fields.items():
            if info.is_required():
                raise GraphConfigError(
                    f"Field '{name}' of {cls.__name__} has no default. A new thread starts from "
                    f"the defaults, so every state field needs one, e.g. '{name}: str = \"\"' "
                    f"or Field(default_factory=list)."
                )
            self.fields[name] = compile_field(cls, name, info, field_config)
        self.channels: dict[str, Channel] = {n: f.channel for n, f in self.fields.items()}
        self._private = bool(cls.__private_attributes__)
        self.private_defaults: dict[str, Any] = {
            n: a.get_default() for n, a in cls.__private_attributes__.items()
        }
        self.view_cls = make_view_class(
            cls,
            {n: f.copied for n, f in self.fields.items() if not f.immutable},
            frozenset(n for n, f in self.fields.items() if has_exact_form(f.annotation)),
        )

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
        instance of the state class is the full state: it replaces every field. The values
        of the input and of ``update_state`` are copied where they can change in place, so
        the caller's objects are never part of the state.
        """
        if type(update) is not dict:  # a dict, the usual update, needs no ABC check
            if isinstance(update, BaseModel):
                return self._model_update(update, writer)
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
            elif spec.list_only and type(value) is not list:
                out.append((key, spec.validate_write(value, writer), False))
            else:
                out.append((key, spec.validate(value, writer, merged=True), False))
        return self._own(out, writer, validated=True) if writer in _CALLER_WRITERS else out

    def _model_update(self, update: BaseModel, writer: str) -> list[FieldWrite]:
        """Return the writes of a model instance of the state class: every field replaced."""
        if not isinstance(update, self.cls):
            raise StateUpdateError(
                f"'{writer}' passed a {type(update).__name__} where a dict or a "
                f"{self.cls.__name__} was expected.",
                writer=writer,
            )
        writes = [(n, getattr(update, n), True) for n in self.fields]
        return self._own(writes, writer) if writer in _CALLER_WRITERS else writes

    def _own(
        self, writes: list[FieldWrite], writer: str, validated: bool = False
    ) -> list[FieldWrite]:
        # Values the caller may still hold: a model instance's, or what validation handed
        # back as it was (an Any value, a nested model); a validated list[str] is new.
        fields = self.fields
        out = []
        for key, value, replace in writes:
            spec = fields[key]
            shared = not spec.immutable and (spec.shares_input or not validated)
            out.append((key, spec.copied(value, writer) if shared else value, replace))
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
                raise self.unknown_fields(data, "update writes")
            out.append((key, spec.from_json(raw), key in marks))
        return out

    def fields_from_json(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """Turn stored field values (a ``Send`` payload) back into values."""
        fields = self.fields
        if not fields.keys() >= data.keys():
            raise self.unknown_fields(data, "payload holds")
        return {k: fields[k].from_json(v) for k, v in data.items()}

    def unknown_fields(self, data: Mapping[str, Any], what: str) -> StateStoreError:
        """Return the error for stored values ``data`` that name fields the class lacks.

        ``what`` says what holds them, e.g. ``"update writes"``.

        Why one rule for every record: a checkpoint holds every field and an update only
        the fields it writes, so refusing only some of them would make a load drop a
        field or refuse it depending on where the last checkpoint falls.
        """
        unknown = sorted(str(k) for k in data if k not in self.fields)
        name = self.cls.__name__
        shown = ", ".join(f"'{k}'" for k in unknown)
        fields = "is not a field" if len(unknown) == 1 else "are not fields"
        error = StateStoreError(
            f"The stored {what} {shown}, which {fields} of {name}: the thread was stored "
            f"with another version of the state class, and loading it with {name} "
            f"would drop the stored values. Migrate the thread to {name} with "
            f"graph.migrate(thread_id, fn, from_state=OldState), or add {shown} back to "
            f"{name}. Events before a migration are read with the class they were stored "
            f"with."
        )
        error.__cause__ = StoredFieldsMismatch(unknown)
        return error

    def values_to_json(
        self, values: Mapping[str, Any], *, frozen_checked: bool = False
    ) -> dict[str, Any]:
        """Return the JSON form of a full values dict, checking that each reads back equal.

        ``frozen_checked=True``: frozen values (``is_frozen_value``) are only dumped, not
        checked, since what they hold was checked when it was written.
        """
        fields = self.fields
        if not frozen_checked:
            return {k: fields[k].to_json(v) for k, v in values.items()}
        return {
            k: fields[k].dump(v) if is_frozen_value(v) else fields[k].to_json(v)
            for k, v in values.items()
        }

    def values_dumped(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Return the JSON form of a values dict without the read-back check: for values
        checked when they were written (a cached position, an unchecked checkpoint)."""
        fields = self.fields
        return {k: fields[k].dump(v) for k, v in values.items()}

    def values_from_json(
        self, data: Mapping[str, Any], given: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Turn a stored full state back into values; fields added since get defaults.

        ``given``: values of fields ``data`` leaves out, taken as they are instead of a
        default (a cached position's shared values: a default made only to be replaced
        cost a turn of W10's agent four calls).

        Raises:
            StateStoreError: ``data`` holds a field the class does not have (its cause is
                a ``StoredFieldsMismatch``).
        """
        if not self.fields.keys() >= data.keys():
            raise self.unknown_fields(data, "state holds")
        values = {}
        for name, spec in self.fields.items():
            if name in data:
                values[name] = spec.from_json(data[name])
            elif given is not None and name in given:
                values[name] = given[name]
            else:
                values[name] = spec.default()
        return values
