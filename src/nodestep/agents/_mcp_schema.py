"""The input schema of an MCP tool: checked once, shown to the model, used on every call.

An MCP tool's ``inputSchema`` is a JSON Schema (2020-12 unless its ``$schema`` says
otherwise) whose top level is an object. The model is shown it nearly as it is, since
chat models take JSON Schema too: only ``$schema`` and ``title`` are dropped, and an
empty ``properties`` added where there is none (some providers require it). Arguments
are checked against the schema itself with ``jsonschema`` (a dependency of the ``mcp``
SDK), so what the model is told and what is checked cannot differ.

A schema that cannot be used is refused when the tools are listed, naming the server,
the tool and the part: one that is not a valid JSON Schema, or that ``$ref``\\s outside
itself (a reference to a URL would be fetched from the network at call time, or fail).
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Iterator, Mapping
from typing import Any, NoReturn

from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError

from nodestep._errors import MCPSchemaError

__all__ = ["ArgumentsSchema"]

_SHOWN_ERRORS = 5  # the model is told this many problems of one call's arguments


def _refused(server: str, tool: str, where: str, problem: str) -> MCPSchemaError:
    at = f"at {where!r}" if where else "at its top"
    return MCPSchemaError(
        f"MCP server {server!r}: the input schema of tool {tool!r} cannot be used {at}: "
        f"{problem}. Fix the server's schema, or leave the tool out: "
        f"tools(skip_unmappable=True) skips such tools, tools(only=[...]) names the ones "
        f"to use.",
        server=server,
        tool=tool,
        where=where,
    )


def _jsonschema() -> Any:
    # jsonschema comes with the mcp SDK, which the caller has already imported.
    return importlib.import_module("jsonschema")


def _pointer(path: Iterator[Any] | list[Any] | tuple[Any, ...]) -> str:
    return "".join(f"/{str(part).replace('~', '~0').replace('/', '~1')}" for part in path)


def _refs(schema: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Yield every ``$ref`` in ``schema`` with the path of the object that holds it."""
    stack = [(path, schema)]
    while stack:
        where, part = stack.pop()
        if isinstance(part, Mapping):
            if "$ref" in part:
                yield where, part["$ref"]
            stack.extend(((*where, key), value) for key, value in part.items())
        elif isinstance(part, list):
            stack.extend(((*where, index), value) for index, value in enumerate(part))


def _follow(schema: Mapping[str, Any], ref: str) -> bool:
    """Whether the local reference ``ref`` (``#/...``) points at something in ``schema``."""
    found: Any = schema
    for raw in ref[2:].split("/") if ref != "#" else ():
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(found, Mapping) and part in found:
            found = found[part]
        elif isinstance(found, list) and part.isdigit() and int(part) < len(found):
            found = found[int(part)]
        else:
            return False
    return True


class ArgumentsSchema:
    """One MCP tool's input schema: its form for the model and the check of arguments.

    Args:
        server: The server's name, for errors.
        tool: The tool's name as the server lists it, for errors.
        schema: The tool's ``inputSchema``.

    Raises:
        MCPSchemaError: the schema is not an object schema, not valid JSON Schema,
            or has a ``$ref`` that does not point inside it.
    """

    def __init__(self, server: str, tool: str, schema: Any) -> None:
        self.server, self.tool = server, tool
        if not isinstance(schema, Mapping) or schema.get("type") != "object":
            self._refuse("", 'a tool\'s arguments are an object ("type": "object")')
        jsonschema = _jsonschema()
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError as error:
            self._refuse(
                _pointer(error.absolute_path), f"it is not valid JSON Schema ({error.message})"
            )
        except RecursionError:
            self._refuse("", "it nests too deeply to read")
        for where, ref in _refs(schema):
            if not isinstance(ref, str) or not ref.startswith("#"):
                self._refuse(
                    _pointer((*where, "$ref")),
                    f"$ref {ref!r} points outside the schema, and only references inside "
                    f"it ('#/$defs/...') are followed",
                )
            if not _follow(schema, ref):
                self._refuse(_pointer((*where, "$ref")), f"$ref {ref!r} points at nothing")
        self._validator = cls(schema)
        shown = {k: copy.deepcopy(v) for k, v in schema.items() if k not in ("$schema", "title")}
        shown.setdefault("properties", {})
        self.shown: dict[str, Any] = shown

    def _refuse(self, where: str, problem: str) -> NoReturn:
        raise _refused(self.server, self.tool, where, problem)

    def check(self, args: Any, title: str) -> dict[str, Any]:
        """Return ``args`` if they fit the schema.

        Args:
            args: The arguments, as the model wrote them.
            title: The name the errors are reported under (the tool's).

        Raises:
            pydantic.ValidationError: they do not fit; one entry per problem (the first
                few), each at the path of the value at fault. The tool node tells the
                model, as it does for any tool's bad arguments.
        """
        try:
            if self._validator.is_valid(args):  # the common case, without collecting
                return dict(args)
            errors = sorted(self._validator.iter_errors(args), key=lambda e: list(e.path))
        except RecursionError:  # arguments nested deeper than Python's stack
            problem = "the arguments nest too deeply"
            raise ValidationError.from_exception_data(title, [_detail((), problem, args)]) from None
        if errors:
            details = [
                _detail(tuple(e.absolute_path), e.message, e.instance)
                for e in errors[:_SHOWN_ERRORS]
            ]
            raise ValidationError.from_exception_data(title, details)
        return dict(args)


def _detail(loc: tuple[Any, ...], problem: str, value: Any) -> InitErrorDetails:
    kind = PydanticCustomError("mcp_arguments", "{problem}", {"problem": problem})
    return InitErrorDetails(type=kind, loc=loc, input=value)
