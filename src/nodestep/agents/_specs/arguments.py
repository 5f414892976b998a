"""A ToolNode's declared arguments: the JSON schema the model is shown, the model that checks.

Each argument has a ``type`` (``string|str``, ``integer|int``, ``number|float``,
``boolean|bool``, ``object``, ``array``, or a list of them), and an ``object`` may declare
its ``properties``, themselves arguments. The same declaration makes both the schema
and a pydantic model, so what the model is told and what is checked cannot drift apart:
a call's arguments are validated and converted by their declared type (``"7"`` for an
``integer`` becomes ``7``, but ``true`` is no number) before the tool's function runs,
and an argument the model made up, or one missing, is refused by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, create_model
from pydantic_core import PydanticCustomError

from nodestep.agents._specs.bundles import flatten, in_language

__all__ = ["TYPES", "ArgSpec", "args_model", "parameters_schema", "to_kwargs"]

TYPES: dict[str, tuple[str, Any]] = {
    "string": ("string", str),
    "str": ("string", str),
    "integer": ("integer", int),
    "int": ("integer", int),
    "number": ("number", float),
    "float": ("number", float),
    "boolean": ("boolean", bool),
    "bool": ("boolean", bool),
    "object": ("object", dict[str, Any]),
    "array": ("array", list[Any]),
}
"""Each type name a manifest may write, with its JSON schema type and its Python type."""


@dataclass(frozen=True)
class ArgSpec:
    """One declared argument.

    Attributes:
        name: The argument's name, as the model writes it and the function takes it.
        types: Its type names, as written (one, or several for "any of").
        description: Its description bundle (``{lang: text}``), possibly empty.
        optional: Whether the model may leave it out.
        properties: An ``object``'s declared properties.
    """

    name: str
    types: tuple[str, ...]
    description: dict[str, Any] = field(default_factory=dict)
    optional: bool = False
    properties: tuple[ArgSpec, ...] = ()


def parameters_schema(args: tuple[ArgSpec, ...], lang: str) -> dict[str, Any]:
    """Return the JSON schema of a call's arguments, with descriptions in ``lang``."""
    return {
        "type": "object",
        "properties": {arg.name: _schema(arg, lang) for arg in args},
        "required": [arg.name for arg in args if not arg.optional],
        "additionalProperties": False,
    }


def _schema(arg: ArgSpec, lang: str) -> dict[str, Any]:
    kinds = [TYPES[t][0] for t in arg.types]
    out: dict[str, Any] = {"type": kinds[0]} if len(kinds) == 1 else {"anyOf": []}
    if len(kinds) > 1:
        out["anyOf"] = [{"type": k} for k in kinds]
    text = flatten(in_language(arg.description, lang)) if arg.description else ""
    if text:
        out["description"] = text
    if arg.properties:
        out.update(parameters_schema(arg.properties, lang))
    return out


def args_model(name: str, args: tuple[ArgSpec, ...]) -> type[BaseModel]:
    """Return the pydantic model that checks and converts a call's arguments.

    A field is named by its position and takes the argument's name as its alias (the only
    name it accepts): a tool's argument may be named as a model's own members are
    (``model_config``, ``model_dump``, ``_private``), which no field of a model may be.
    """
    fields: dict[str, Any] = {}
    for i, arg in enumerate(args):
        default = None if arg.optional else ...
        fields[f"a{i}"] = (_python_type(name, arg), Field(default, alias=arg.name))
    config = ConfigDict(extra="forbid")
    model: type[BaseModel] = create_model(f"{name}_arguments", __config__=config, **fields)
    return model


def _python_type(owner: str, arg: ArgSpec) -> Any:
    if arg.properties and arg.types == ("object",):
        return args_model(f"{owner}_{arg.name}", arg.properties)
    kinds = [TYPES[t][1] for t in arg.types]
    out = kinds[0]
    for kind in kinds[1:]:
        out = out | kind
    if bool not in kinds and (int in kinds or float in kinds):
        # A lax int or float takes a bool (true becomes 1): a model's true for a number is
        # a mistake to answer, not a value to pass on.
        out = Annotated[out, BeforeValidator(_NotABoolean(arg.types))]
    return out | None if arg.optional else out


class _NotABoolean:
    """Refuses a boolean for an argument of number types, naming the types it takes."""

    def __init__(self, types: tuple[str, ...]) -> None:
        names = [TYPES[t][0] for t in types]
        self.expected = " or ".join(f"a valid {n}" for n in dict.fromkeys(names))

    def __call__(self, value: Any) -> Any:
        if isinstance(value, bool):
            expected = {"expected": self.expected}
            raise PydanticCustomError(
                "bool_type", "Input should be {expected}, not a boolean", expected
            )
        return value


def to_kwargs(checked: BaseModel) -> dict[str, Any]:
    """Return the checked arguments as plain values, by their names, leaving out optional
    ones not given."""
    # The serializer itself, as model_dump calls it: the model is the agent's own
    # (``args_model``), and model_dump's frame passes 15 keywords on (about 8k instructions).
    data: dict[str, Any] = checked.__pydantic_serializer__.to_python(
        checked, by_alias=True, exclude_unset=True
    )
    return data
