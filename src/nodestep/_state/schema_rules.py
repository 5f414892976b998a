"""What a state class may declare: checks that run once, when its schema is compiled.

The schema validates each field on its own (a write names a few fields, never the whole
state) and builds instances without validation (the values are valid already). So the
parts of a pydantic model that act on the whole model, or that validation would have to
run, never run for a state class: validators and serializers, most of ``model_config``,
``model_post_init``. Rather than accept such a class and silently ignore them, the schema
refuses it here, naming what it found and why; the checks cost nothing per step.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from typing import Any

from pydantic import BaseModel, PydanticUserError, TypeAdapter

from nodestep._errors import GraphConfigError

__all__ = [
    "FIELD_CONFIG_KEYS",
    "check_adapter",
    "check_default_factory",
    "check_field_info",
    "check_state_class",
]

FIELD_CONFIG_KEYS = frozenset(
    {
        "allow_inf_nan",
        "arbitrary_types_allowed",
        "coerce_numbers_to_str",
        "regex_engine",
        "ser_json_bytes",
        "ser_json_inf_nan",
        "ser_json_temporal",
        "ser_json_timedelta",
        "str_max_length",
        "str_min_length",
        "str_strip_whitespace",
        "str_to_lower",
        "str_to_upper",
        "strict",
        "url_preserve_empty_path",
        "use_enum_values",
        "val_json_bytes",
        "val_temporal_unit",
    }
)
"""The ``model_config`` keys that also govern one field validated on its own: the schema
applies them to every field (a nested model keeps its own configuration)."""

# Keys that change nothing about the values a state holds: titles, JSON schema, build and
# error-message details, alias handling (state fields are always named by their names).
# And two that the state instance a node gets applies itself: ``frozen`` refuses an
# assignment in place, ``validate_assignment`` validates it.
_NEUTRAL_CONFIG_KEYS = frozenset(
    {
        "frozen",
        "validate_assignment",
        "cache_strings",
        "defer_build",
        "field_title_generator",
        "from_attributes",
        "hide_input_in_errors",
        "ignored_types",
        "json_schema_extra",
        "json_schema_mode_override",
        "json_schema_serialization_defaults_required",
        "loc_by_alias",
        "model_title_generator",
        "plugin_settings",
        "populate_by_name",
        "protected_namespaces",
        "schema_generator",
        "serialize_by_alias",
        "title",
        "use_attribute_docstrings",
        "validate_by_alias",
        "validate_by_name",
        "validate_return",
        "validation_error_cause",
    }
)

# Keys with a value the schema cannot honour: each allowed value, and why others cannot be.
_LIMITED_CONFIG_KEYS: dict[str, tuple[tuple[Any, ...], str]] = {
    "extra": (
        ("ignore", "forbid"),
        "a state holds only its declared fields (a write to another key is refused)",
    ),
    "revalidate_instances": (
        ("never",),
        "values are validated once, when written, and not again when a node gets the state",
    ),
    "validate_default": (
        (False, None),
        "defaults are not validated; give each field a default of its type",
    ),
    "alias_generator": (
        (None,),
        "inputs and updates name state fields by their names, never by aliases",
    ),
    "json_encoders": (
        (None,),
        "stored values take the JSON form of their field types",
    ),
}

_DECORATOR_KINDS = (
    ("field_validators", "@field_validator"),
    ("model_validators", "@model_validator"),
    ("validators", "@validator"),
    ("root_validators", "@root_validator"),
    ("field_serializers", "@field_serializer"),
    ("model_serializers", "@model_serializer"),
)


def check_state_class(cls: type[BaseModel]) -> None:
    """Refuse a state class that declares what the schema would silently ignore.

    Raises:
        GraphConfigError: the class has validators or serializers, a ``model_config`` key
            the schema cannot honour, a ``model_post_init``, or a type that does not
            resolve.
    """
    _check_decorators(cls)
    _check_config(cls)
    # pydantic puts its own model_post_init on a class with private attributes.
    post_init = getattr(cls.model_post_init, "__module__", None) or ""
    if cls.model_post_init is not BaseModel.model_post_init and not post_init.startswith(
        "pydantic"
    ):
        raise GraphConfigError(
            f"State class {cls.__name__} defines model_post_init, which nodestep does not "
            f"run for the state a node gets: a state is built from stored and merged values, "
            f"not through the model's __init__. Compute the values in a node instead."
        )
    _resolve_forward_references(cls)


def _check_decorators(cls: type[BaseModel]) -> None:
    infos = cls.__pydantic_decorators__
    for attribute, label in _DECORATOR_KINDS:
        found = getattr(infos, attribute, None)
        if found:
            names = ", ".join(sorted(found))
            raise GraphConfigError(
                f"State class {cls.__name__} has {label} ({names}), which nodestep never "
                f"runs: each field is validated on its own when written, and the state is "
                f"stored in each field's JSON form. Put the rule in the field's type instead "
                f"(Annotated[str, AfterValidator(fn)], or a nested model with its own "
                f"validators), or check it in a node."
            )


def _check_config(cls: type[BaseModel]) -> None:
    for key, value in cls.model_config.items():
        if key in FIELD_CONFIG_KEYS or key in _NEUTRAL_CONFIG_KEYS:
            continue
        allowed, why = _LIMITED_CONFIG_KEYS.get(key, ((), "nodestep does not apply it"))
        # By type as well as value, so that True does not pass for 1 (nor 0 for False).
        if any(value is a or (type(value) is type(a) and value == a) for a in allowed):
            continue
        raise GraphConfigError(
            f"State class {cls.__name__} sets model_config {key}={value!r}, which nodestep "
            f"cannot honour: {why}. Remove the setting from the state class (a nested model "
            f"may keep it)."
        )


def _resolve_forward_references(cls: type[BaseModel]) -> None:
    if cls.__pydantic_complete__:
        return
    # On failure, check_adapter names the field at fault.
    with contextlib.suppress(PydanticUserError, NameError):
        cls.model_rebuild(raise_errors=True)


def check_adapter(cls: type[BaseModel], name: str, annotation: Any, make: Any) -> TypeAdapter[Any]:
    """Return the field's ``TypeAdapter`` from ``make()``, built now, or refuse the field.

    A type that names something undefined (a forward reference that does not resolve) or
    that pydantic cannot validate would otherwise fail at the first write, far from its
    cause.

    Raises:
        GraphConfigError: naming the class, the field and the type.
    """
    try:
        adapter: TypeAdapter[Any] = make()
        if not adapter.pydantic_complete:
            module = sys.modules.get(cls.__module__)
            namespace = dict(vars(module)) if module is not None else {}
            adapter.rebuild(raise_errors=True, _types_namespace=namespace)
    except NameError as error:
        missing = getattr(error, "name", None) or str(error)
        raise GraphConfigError(
            f"Field '{name}' of {cls.__name__} names the type '{missing}', which is not "
            f"defined where {cls.__name__} is (a forward reference that does not resolve). "
            f"Define or import '{missing}' in the module of {cls.__name__} before the graph "
            f"is built."
        ) from error
    except (PydanticUserError, TypeError) as error:
        first = str(error).strip().splitlines()[0]
        raise GraphConfigError(
            f"Field '{name}' of {cls.__name__} has a type pydantic cannot validate on its "
            f"own ({annotation!r}): {first} Give the field a type pydantic supports, or "
            f"allow it with model_config = ConfigDict(arbitrary_types_allowed=True)."
        ) from error
    return adapter


def check_default_factory(cls: type[BaseModel], name: str, info: Any) -> None:
    """Refuse a ``default_factory`` that takes the other fields' values.

    A new thread starts from the defaults before the input is merged, so such a factory
    would never see the values it is written to read.

    Raises:
        GraphConfigError: naming the class and the field.
    """
    factory = info.default_factory
    if factory is None or not _takes_argument(factory):
        return
    raise GraphConfigError(
        f"Field '{name}' of {cls.__name__} has a default_factory that takes the other "
        f"fields' values, which nodestep does not support: a new thread starts from the "
        f"defaults before the input is merged, so the factory could not see the input. Give "
        f"the field a default of its own (a factory without arguments), and compute the "
        f"value from other fields in a node."
    )


def check_field_info(cls: type[BaseModel], name: str, info: Any) -> None:
    """Refuse a ``Field(validate_default=True)``, as ``model_config`` refuses the key.

    A new thread takes each default as it is, unvalidated (a default is copied for every
    thread; validating it each time would cost every new thread for a value that never
    changes), so the setting would be silently ignored.

    Raises:
        GraphConfigError: naming the class and the field.
    """
    if info.validate_default:
        raise GraphConfigError(
            f"Field '{name}' of {cls.__name__} sets Field(validate_default=True), which "
            f"nodestep cannot honour: defaults are not validated. Remove the setting and "
            f"give the field a default of its type (e.g. 5, not '5')."
        )


def _takes_argument(factory: Any) -> bool:
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return False
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return any(p.kind in kinds and p.default is inspect.Parameter.empty for p in params)
