"""One compiled state field: its channel, its validator and its stored JSON form."""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass
from typing import Annotated, Any, cast, is_typeddict

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
)
from pydantic_core import PydanticSerializationError

from nodestep._errors import StateStoreError, StateUpdateError
from nodestep._state.channels import Channel, channel_for, validation_summary
from nodestep._state.deep_copy import deep_copy_dict, too_deep
from nodestep._state.exact_dump import Dumper, exact_dumper, own_dumper
from nodestep._state.field_types import (
    PLAIN_TYPES,
    builds_new_values,
    has_exact_form,
    is_frozen_value,
    is_immutable,
    is_json_native,
    keeps_instances,
    shallow_container,
    type_name,
)
from nodestep._state.json import INT_MIN, UINT_MAX, unencodable
from nodestep._state.json_refusals import (
    cannot_encode,
    no_json_form,
    none_refused,
    refuse_read_back,
    round_trip_error,
)
from nodestep._state.read_back import (
    MISS,
    ValueCheck,
    changes_values,
    first_difference,
    is_json_data,
    may_read_back_as_base,
    read_back_check,
)
from nodestep._state.reducers import (
    add,
    field_reducer,
    is_reducer_candidate,
    keeps_field_type,
)
from nodestep._state.schema_rules import check_adapter, check_default_factory, check_field_info
from nodestep._state.set_order import may_hold_set, sets_in_order

__all__ = ["REDUCER_CONTEXT", "FieldSpec", "compile_field"]

REDUCER_CONTEXT = "nodestep_reducer"
"""The key of pydantic's validation context under which a state write names its reducer.

A write that the field's reducer merges is validated with ``{REDUCER_CONTEXT: reducer}``;
one stored as it is (a field without a reducer, a ``Replace``, a ``Send`` payload) with
``{REDUCER_CONTEXT: None}``. So a type that is an instruction to one reducer, never a value
(``RemoveMessage`` for ``add_messages``), can refuse the write that would store it. Values
read back from a store are validated without it.
"""

_STORED_AS_IS: dict[str, Any] = {REDUCER_CONTEXT: None}

_SIMPLE = (int, str, bool)

# The model_config keys that change how a str is validated: with any of them, a str value
# must go through the validator, not the fast path that returns it as it is.
_STR_CONFIG_KEYS = frozenset(
    {"str_strip_whitespace", "str_to_lower", "str_to_upper", "str_min_length", "str_max_length"}
)

# The stored form of a value: by alias and with Json[...] fields as JSON text, so that it
# validates back into the same value; computed fields left out, as validation does not take
# them (a model with extra="forbid" refuses them).
_DUMP_OPTIONS: dict[str, Any] = {
    "mode": "json",
    "by_alias": True,
    "round_trip": True,
    "exclude_computed_fields": True,
}
# The same in Python mode, and silent: a value changed in place is dumped only to be
# validated again, and its validation says what is wrong with it.
_REVALIDATE_DUMP: dict[str, Any] = {**_DUMP_OPTIONS, "mode": "python", "warnings": False}


@dataclass(slots=True)
class FieldSpec:
    """One state field: its channel, its validator and its JSON form.

    Attributes:
        list_only: The field has the ``add`` reducer, so a write (but a ``Replace``) must be
            a list: pydantic's lax mode would turn a tuple, a set or a generator into one.
        shares_input: A validated value of the field may hold objects of the value given
            (a model instance, anything in an ``Any``); ``False`` when validation builds
            every container anew around immutable items, as for ``list[str]``.
        floats: A value of the field may hold a float (``False`` for types such as
            ``list[str]`` whose values cannot), so ``to_json`` reads its JSON form back to
            find a nan or an infinity, which JSON stores as ``null``.
        merged: The validation context of a write the field's reducer merges (see
            ``REDUCER_CONTEXT``).
        reads_back: For a type whose JSON form provably reads back equal (see
            ``read_back``), the walk left for a dumped value before ``to_json`` may skip
            validating it back; ``None`` for every other type.
        exact_dump: For such a type with models, literals or ``Any`` in it, the JSON form
            built in Python (``exact_dump.exact_dumper``), or ``MISS`` for a value that
            takes the full path.
        shallow: ``dict`` or ``list`` for a container of immutable items, whose copy need
            only copy the container (``field_types.shallow_container``), else ``None``.
        keeps_instances: A value may hold a model or dataclass instance, which validation
            hands back unchecked (``field_types.keeps_instances``), so a value a node
            changed in place is validated again in full (``revalidate``).
        loose: A value may read back as a plain builtin where it held a subclass, ``==``
            to it (``read_back.may_read_back_as_base``), so reading it back is compared
            type by type, not by ``==``.
        takes_none: ``None`` validates as ``None`` for the field's type. A field whose
            type does not take it can still hold it, as an unvalidated default
            (``items: list[str] = None``); ``to_json`` refuses it then.
        stored_default: The plain default (not a factory's) as a load reads it back: ``0.0``
            for ``x: float = 0``. pydantic leaves a default unvalidated, so ``0`` would
            stay an int in a live run and come back from a store as ``0.0``, the float
            every write of the field gives; this way a run and a load see the same value.
            A default without a JSON form is kept as it is (a store refuses it when it
            first stores it, naming the field).
        sets: A value may hold a set or frozenset, whose JSON form is put in one order
            for every process (``set_order``); ``False`` for other types, which skip it.
    """

    name: str
    annotation: Any
    channel: Channel
    immutable: bool
    simple: type | None
    adapter: TypeAdapter[Any]
    model_field: Any
    json_native: bool = False
    list_only: bool = False
    shares_input: bool = True
    floats: bool = True
    merged: dict[str, Any] = dataclasses.field(default_factory=lambda: _STORED_AS_IS)
    reads_back: ValueCheck | None = None
    exact_dump: Dumper | None = None
    shallow: type | None = None
    keeps_instances: bool = False
    takes_none: bool = True
    loose: bool = True
    stored_default: Any = None
    sets: bool = False

    def default(self) -> Any:
        """Return a fresh default value.

        pydantic's ``FieldInfo.get_default`` inspects the factory's signature on every call
        (about 2 µs a field); a new thread needs every default, so the factory is called here
        (one that takes the other fields' values is refused when the schema compiles). A
        plain default is the one a load gives back (``stored_default``).
        """
        factory = self.model_field.default_factory
        if factory is None:
            value = self.stored_default
            return value if self.immutable else copy.deepcopy(value)
        return factory()

    def shares(self, value: Any) -> bool:
        """Tell whether ``value``, a value of this field, can be shared as it is, never copied.

        So can a value of an immutable type, and a frozen value (``is_frozen_value``): the
        conversation of a ``Messages`` field, whose type is a list.
        """
        return self.immutable or is_frozen_value(value)

    def copied(self, value: Any, writer: str | None = None) -> Any:
        """Return a copy of ``value`` that shares nothing a node could change in place.

        A plain dict or list of immutable items is copied as a container only; any other
        value (a subclass of either, say) is deep-copied.

        Raises:
            StateUpdateError: ``value`` (from ``writer``, or ``None``: the state's, as a
                node reads it) is nested too deeply to copy.
        """
        shallow = self.shallow
        if shallow is not None and type(value) is shallow:
            return shallow(value)
        kind = type(value)
        if kind not in PLAIN_TYPES and getattr(kind, "__nodestep_frozen__", False) is True:
            # A frozen value (``is_frozen_value``, inline) is shared, as its own
            # ``__deepcopy__`` would: without deepcopy's two calls on each read of a
            # conversation (two a turn of W10's agent).
            return value
        # Inline, not deep_copy(): a node's first read of a field runs this, and a try
        # costs nothing until it catches.
        try:
            return deep_copy_dict(value) if kind is dict else copy.deepcopy(value)
        except RecursionError:
            raise too_deep(writer, self.name) from None

    def validate(self, value: Any, writer: str, *, merged: bool = False) -> Any:
        """Return ``value`` validated against the field's type.

        Args:
            value: The value written.
            writer: Who wrote it, for the error.
            merged: The field's reducer merges it (a plain write); ``False`` when it is
                stored as it is (a ``Replace``, a ``Send`` payload).
        """
        if self.simple is not None and type(value) is self.simple:
            return value
        try:
            # The adapter's validator itself, as ``TypeAdapter.validate_python`` calls it
            # with these options: its Python frame was one more call for each field of
            # each update (11 a turn of W10's agent).
            return self.adapter.validator.validate_python(
                value, context=self.merged if merged else _STORED_AS_IS
            )
        except ValidationError as error:
            summary = validation_summary(error)
            raise StateUpdateError(
                f"Field '{self.name}' got an invalid value from '{writer}': "
                f"{summary}. Expected {type_name(self.annotation)}.{_write_hint(error, summary)}",
                field=self.name,
                writer=writer,
            ) from error

    def revalidate(self, value: Any, writer: str, *, merged: bool = False, at: int = 0) -> Any:
        """Return ``value``, validated, of a field a node changed in place, checked in full.

        Why: pydantic hands a model instance back from validation as it is, trusting that it
        was checked when made; a node that changes a nested model in place
        (``state.ship_to.zip = "x"``) breaks that trust, and so does a dict it appends to a
        model's ``list[Model]``. So for a type that may hold instances (``keeps_instances``)
        the value is dumped to its Python form and validated from it, which checks every
        instance again. The cost, a dump and a validation of the value written, is paid only
        by a field a node changed in place; ``validate`` has checked it once already. A value
        whose dump validation leaves as it was keeps the node's objects (with their private
        attributes and excluded fields); one it converted (``"5"`` or ``5.0`` to ``5``, a
        dict to a model) is the converted one, as for any write.

        Args:
            value: The value written, already through ``validate``.
            writer: The node that changed it, for the error.
            merged: As for ``validate``.
            at: Where ``value``, the items appended to a list, start in it, for the error.

        Raises:
            StateUpdateError: a part of the value does not fit its type; the error names
                the field, where in it, and the node.
        """
        if not self.keeps_instances:
            return value
        try:
            data = self.adapter.dump_python(value, **_REVALIDATE_DUMP)
        except (PydanticSerializationError, TypeError, ValueError):
            return value  # no Python form: ``to_json`` refuses it if a store keeps it
        try:
            back = self.adapter.validate_python(
                data, context=self.merged if merged else _STORED_AS_IS
            )
        except ValidationError as error:
            raise StateUpdateError(
                f"Field '{self.name}' was changed in place by '{writer}' to an invalid value: "
                f"{validation_summary(error, at)}. Expected {type_name(self.annotation)}. Assign a "
                f"value of the declared type; pydantic checks an assignment to a nested "
                f"model's field only when that model sets validate_assignment=True.",
                field=self.name,
                writer=writer,
            ) from error
        # Kept unless validation changed what the dump holds: the node's objects keep what
        # a dump leaves out (private attributes, Field(exclude=True) fields), which the
        # rebuilt value would lose.
        again = self.adapter.dump_python(back, **_REVALIDATE_DUMP)
        return value if _same_dump(again, data) else back

    def validate_write(self, value: Any, writer: str) -> Any:
        """Return a write's value validated, refusing a non-list for an ``add`` field."""
        if self.list_only and not isinstance(value, list):
            raise StateUpdateError(
                f"Field '{self.name}' got a {type(value).__name__} from '{writer}', but its "
                f"reducer add appends lists only. Write a list, e.g. {{'{self.name}': [item]}} "
                f"(or Replace(value) to set the field).",
                field=self.name,
                writer=writer,
            )
        return self.validate(value, writer, merged=True)

    def to_json(self, value: Any) -> Any:
        """Return the JSON form of ``value``, checking that it reads back equal.

        For a type whose JSON form provably reads back equal (``reads_back``), the check is
        the dump, which refuses a value of the wrong type at any position, plus a walk of
        the few positions it lets through (``exact_dump`` does both in one pass); a value
        that fails the walk gets the full check.

        Raises:
            StateStoreError: the value has no JSON form, or comes back different.
        """
        if self.simple is not None and type(value) is self.simple:
            if type(value) is int and not INT_MIN <= value <= UINT_MAX:
                raise StateStoreError(
                    f"Field '{self.name}' holds an int beyond 64 bits, which the stores cannot "
                    f"write. Keep integers within 64 bits, or store bigger ones as strings."
                )
            # ASCII text (the flag CPython keeps on every str: no scan) cannot hold a
            # surrogate; other text is encoded once, as the store will encode it.
            if type(value) is str and not value.isascii() and unencodable(value) is not None:
                raise cannot_encode(self.name, value, None)
            return value
        if value is None and not self.takes_none:
            raise none_refused(self.name, self.annotation)
        # The exact dumper's form, inline: a call less for about every field of every
        # update (13 a turn of W10's agent, ~0.5% of its instructions).
        exact = self.exact_dump
        if exact is not None and (data := exact(value)) is not MISS:
            try:
                orjson.dumps(data)  # what the store cannot write: an int beyond 64 bits, ...
            except TypeError:
                pass  # ... which the full check refuses, with its message
            else:
                return data
        return self._checked_json(value)

    def _checked_json(self, value: Any) -> Any:
        """Return the JSON form of ``value`` by the field's adapter, checked to read back
        equal: ``to_json`` for a value that no exact dumper took.

        Raises:
            StateStoreError: the value has no JSON form, or comes back different.
        """
        if type(value) is float and self.annotation is float:
            if math.isfinite(value):
                return value
            raise StateStoreError(
                f"Field '{self.name}' holds a float that JSON cannot store (nan or infinity)."
            )
        try:
            data = self.adapter.dump_python(value, warnings="error", **_DUMP_OPTIONS)
        except (PydanticSerializationError, TypeError, ValueError) as error:
            raise no_json_form(self.name, self.annotation, value, error) from None
        try:
            encoded = orjson.dumps(data)
        except TypeError as error:  # an int beyond 64 bits, a lone surrogate in a str
            raise cannot_encode(self.name, data, error) from None
        # JSON writes a nan or an infinity as null, which loads back as None, or not at all.
        # `data == value` cannot tell: a list compares its items by identity first, so
        # [nan] == [nan]. What was written is read back instead, and only when it holds a
        # null, which a memchr finds in a fraction of the encoding's cost.
        if self.floats and b"null" in encoded and orjson.loads(encoded) != data:
            refuse_read_back(self.name, self.annotation, data)
        if self.sets:  # after the check above, which compares with what was encoded
            data = sets_in_order(value, data, by_alias=True)
        reads_back = self.reads_back
        if reads_back is not None and reads_back(value):
            return data
        # == takes an IntEnum member for its int: the value must be plain JSON data too.
        if not (
            self.json_native and type(data) is type(value) and data == value and is_json_data(value)
        ):
            self._check_read_back(value, data)
        return data

    def _check_read_back(self, value: Any, data: Any) -> None:
        """Validate ``data``, the JSON form of ``value``, back; refuse it if it differs."""
        try:
            back = self.adapter.validate_python(data, strict=False)
            if not self.loose and back == value:  # == is the whole check here
                return
            found = first_difference(value, back)
        except (ValidationError, TypeError, ValueError):
            found = ("", value, MISS)
        if found is not None:
            raise round_trip_error(self.name, self.annotation, value, found)

    def dump(self, value: Any) -> Any:
        """Return the JSON form of a value already checked by ``to_json``."""
        if self.simple is not None and type(value) is self.simple:
            return value
        # The adapter's serializer itself, as ``TypeAdapter.dump_python`` calls it: that
        # Python frame passes 15 keywords on, most of them defaults (about 6k instructions;
        # a position cached at each run's end dumps every field not shared so).
        data = self.adapter.serializer.to_python(value, **_DUMP_OPTIONS)
        return sets_in_order(value, data, by_alias=True) if self.sets else data

    def from_json(self, data: Any) -> Any:
        """Turn a stored JSON form back into the field's type.

        Raises:
            StateStoreError: the stored value does not fit the field's type (any more), with
                pydantic's ``ValidationError`` as ``__cause__``.
        """
        if self.simple is not None and type(data) is self.simple:
            return data
        try:
            return self.adapter.validator.validate_python(data, strict=False)  # see validate
        except ValidationError as error:
            raise StateStoreError(
                f"The stored value of field '{self.name}' does not fit its type "
                f"{type_name(self.annotation)}: {validation_summary(error)}. It was stored "
                f"under another version of the state class: change the field's type back (or "
                f"to one that accepts both forms), or migrate the stored history."
            ) from error


def _same_dump(a: Any, b: Any) -> bool:
    """Tell whether two Python dumps hold the same data, of the same types throughout.

    Not ``==`` alone: ``0.0 == 0`` and ``True == 1``, which a value converted by
    validation would pass for.
    """
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_dump(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(map(_same_dump, a, b))
    try:
        return bool(a == b)
    except Exception:  # an Any value whose == gives no bool (an array, say)
        return False


def _write_hint(error: ValidationError, summary: str) -> str:
    """Return what the value that failed says of where it belongs, or ``""``.

    A class whose objects are instructions to one reducer, not values of any type
    (``RemoveMessage``), sets ``state_write_hint``: written where a type has no place for
    it, the error says where it works instead of only what the type expected.
    """
    found = error.errors(include_url=False)[0].get("input")
    hint = getattr(type(found), "state_write_hint", None)
    return f" {hint}" if isinstance(hint, str) and hint not in summary else ""


def _has_own_config(annotation: Any) -> bool:
    # pydantic refuses a config for these: they carry their own.
    return isinstance(annotation, type) and (
        issubclass(annotation, BaseModel)
        or dataclasses.is_dataclass(annotation)
        or is_typeddict(annotation)
    )


def _is_constraint(item: object) -> bool:
    module = getattr(type(item), "__module__", "") or ""
    return module.startswith(("pydantic", "annotated_types"))


def compile_field(cls: type[BaseModel], name: str, info: Any, config: ConfigDict) -> FieldSpec:
    """Return the compiled form of field ``name`` of ``cls``.

    ``config`` holds the class's ``model_config`` keys that apply to one field.

    Raises:
        GraphConfigError: the field cannot be compiled (see ``field_reducer``,
            ``check_adapter``, ``check_default_factory``).
    """
    check_default_factory(cls, name, info)
    check_field_info(cls, name, info)
    reducer = field_reducer(name, info, cls)
    pydantic_meta = [m for m in info.metadata if not is_reducer_candidate(m)]
    annotation = info.annotation
    # What pydantic applies to a field besides its type: the metadata (constraints, strict,
    # union_mode, ...) and, kept apart from it by pydantic, a discriminator, applied last
    # as pydantic does. It changes which member of a union validates a value, never a
    # value's JSON form, so the flags below ignore it.
    checks = pydantic_meta
    if info.discriminator is not None:
        checks = [*pydantic_meta, Field(discriminator=info.discriminator)]
    target: Any = Annotated[(annotation, *checks)] if checks else annotation
    own = config if config and not _has_own_config(annotation) else None
    adapter = check_adapter(
        cls, name, annotation, lambda: TypeAdapter(target, config=cast(Any, own))
    )
    str_config = annotation is str and own is not None and bool(_STR_CONFIG_KEYS & own.keys())
    fast = annotation in _SIMPLE and not pydantic_meta and not str_config
    plain = not pydantic_meta and not (own is not None and changes_values(own))
    spec = FieldSpec(
        name=name,
        annotation=annotation,
        channel=_channel(name, reducer, annotation, pydantic_meta, adapter, fast),
        immutable=is_immutable(annotation),
        simple=cast(type, annotation) if fast else None,
        adapter=adapter,
        model_field=info,
        json_native=not pydantic_meta and is_json_native(annotation),
        list_only=reducer is add,
        shares_input=not builds_new_values(annotation),
        floats=not has_exact_form(annotation),
        merged={REDUCER_CONTEXT: reducer},
        reads_back=read_back_check(annotation) if plain else None,
        exact_dump=own_dumper(pydantic_meta) or (exact_dumper(annotation) if plain else None),
        shallow=shallow_container(annotation),
        keeps_instances=keeps_instances(annotation),
        takes_none=_takes_none(adapter),
        loose=may_read_back_as_base(annotation),
        sets=may_hold_set(adapter.core_schema),
    )
    if info.default_factory is None:
        spec.stored_default = _as_loaded(spec, info.default)
    return spec


def _channel(
    name: str,
    reducer: Any,
    annotation: Any,
    pydantic_meta: list[Any],
    adapter: TypeAdapter[Any],
    fast: bool,
) -> Channel:
    """Return a field's channel, with the check of its merged value where it may not fit.

    A plain field's value is one validated write. A reducer field's merged value is
    validated as a write is where its constraints could break in the merge, or where the
    reducer may return another type (``keeps_field_type``); ``add`` and the other
    trusted reducers on fields without constraints pay nothing.
    """
    if reducer is None:
        return channel_for(name, None)
    trusted = keeps_field_type(reducer, annotation)
    if trusted and not any(_is_constraint(m) for m in pydantic_meta):
        return channel_for(name, reducer)
    validate = adapter.validate_python
    simple = annotation if fast else None

    def check(value: Any) -> Any:
        # A result of the field's own simple type (an int of operator.add) is valid as
        # it is, as for a write; anything else is validated as stored as it is.
        if type(value) is simple:
            return value
        return validate(value, context=_STORED_AS_IS)

    return channel_for(name, reducer, check, None if trusted else type_name(annotation))


def _as_loaded(spec: FieldSpec, default: Any) -> Any:
    """Return ``default`` as a store gives it back: its JSON form, read back."""
    try:
        return spec.from_json(spec.to_json(default))
    except Exception:  # no JSON form: see FieldSpec.stored_default
        return default


def _takes_none(adapter: TypeAdapter[Any]) -> bool:
    """Tell whether ``None`` validates as ``None`` for a field's type (a validator may
    raise anything, or turn it into another value)."""
    try:
        return adapter.validate_python(None, context=_STORED_AS_IS) is None
    except Exception:
        return False
