"""JSON schemas of an OpenAPI document as pydantic types, to validate a tool's arguments.

Only what arguments need is read: ``type`` (string, integer, number, boolean, array,
object, and a list of types with ``"null"``), ``enum``, ``properties`` with ``required``,
``additionalProperties: false``, ``items``, ``anyOf``/``oneOf``, ``nullable``, ``default``,
``description`` and local ``$ref``s (``#/components/schemas/...``). Keywords that only
narrow a value (``format``, ``minimum``, ``pattern``) are left to the server, which
answers a value it refuses with a 4xx, and that answer goes back to the model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

from nodestep._errors import GraphConfigError

__all__ = ["SchemaReader", "field_name"]

MAX_DEPTH = 64
"""How deeply an argument's schema may nest (objects, arrays, anyOf, $refs)."""

MAX_PARTS = 10_000
"""How many schema parts one argument's type may be built from, every use of a ``$ref``
or a YAML alias counted: a few dozen references used twice each would otherwise expand to
billions of parts while nesting well within ``MAX_DEPTH``."""
_SCALARS: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool}
_NOT_NAME = re.compile(r"[^A-Za-z0-9_]")  # ASCII: "¼" is \w, and no identifier


def field_name(name: str) -> str:
    """Return a Python identifier for a parameter's name (``page-size`` -> ``page_size``)."""
    out = _NOT_NAME.sub("_", name)
    return f"p_{out}" if not out or out[0].isdigit() or out.startswith("_") else out


class SchemaReader:
    """Turns the schemas of one OpenAPI document into pydantic types.

    Args:
        document: The whole OpenAPI document, where ``$ref``s point.
    """

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.document = document
        self._resolving: set[str] = set()
        self._done: dict[str, Any] = {}
        self._cuts = 0
        self._depth = 0
        self._parts = 0

    def resolve(self, schema: Any, where: str) -> Any:
        """Return ``schema`` with a top-level ``$ref`` followed (through several hops)."""
        seen: set[str] = set()
        while isinstance(schema, Mapping) and "$ref" in schema:
            ref = schema["$ref"]
            if not isinstance(ref, str) or not ref.startswith("#/") or ref in seen:
                raise GraphConfigError(
                    f"OpenAPI {where}: $ref {ref!r} cannot be followed; only references "
                    f"inside the document ('#/components/...') without cycles are read."
                )
            seen.add(ref)
            schema = self._pointer(ref, where)
        return schema

    def _pointer(self, ref: str, where: str) -> Any:
        found: Any = self.document
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(found, Mapping) or part not in found:
                raise GraphConfigError(
                    f"OpenAPI {where}: $ref {ref!r} points at nothing in the document; "
                    f"check the name under components."
                )
            found = found[part]
        return found

    def annotation(self, schema: Any, where: str) -> Any:
        """Return the Python type that validates values of ``schema``.

        Raises:
            GraphConfigError: the schema nests deeper than ``MAX_DEPTH`` (a hostile
                document would otherwise exhaust Python's stack).
        """
        if self._depth == 0:
            self._parts = 0
        self._parts += 1
        if self._parts > MAX_PARTS:
            raise GraphConfigError(
                f"OpenAPI {where}: the schema expands to more than {MAX_PARTS:,} parts "
                f"($refs or YAML aliases used over and over); an argument's schema is far "
                f"smaller. Fix the document, or leave the operation out with operations=[...]."
            )
        if self._depth >= MAX_DEPTH:
            raise GraphConfigError(
                f"OpenAPI {where}: the schema nests deeper than {MAX_DEPTH} levels; an "
                f"argument's schema is far shallower. Fix the document, or leave the "
                f"operation out with operations=[...]."
            )
        self._depth += 1
        try:
            return self._annotation(schema, where)
        finally:
            self._depth -= 1

    def _annotation(self, schema: Any, where: str) -> Any:
        if isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str):
            ref = schema["$ref"]
            if ref in self._done:
                return self._done[ref]
            if ref in self._resolving:  # a recursive schema: the inner level is left open
                self._cuts += 1
                return dict[str, Any]
            self._resolving.add(ref)
            cuts = self._cuts
            try:
                found = self.annotation(self.resolve(schema, where), where)
            finally:
                self._resolving.discard(ref)
            # A type built without leaving a recursion open is the same wherever the $ref is
            # used: build it once. One that left its cycle open depends on where it was entered.
            if self._cuts == cuts:
                self._done[ref] = found
            return found
        if not isinstance(schema, Mapping):
            return Any
        found = self._plain(schema, where)
        return Optional[found] if schema.get("nullable") is True else found  # noqa: UP045

    def _plain(self, schema: Mapping[str, Any], where: str) -> Any:
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return Literal[tuple(schema["enum"])]
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list) and schema[key]:
                members = tuple(self.annotation(s, where) for s in schema[key])
                return Union[members]  # noqa: UP007 -- a tuple of types made at run time
        kind = schema.get("type")
        if isinstance(kind, list):
            members = tuple(self._plain({**schema, "type": k}, where) for k in kind if k != "null")
            found = Union[members] if members else Any  # noqa: UP007
            return Optional[found] if "null" in kind else found  # noqa: UP045
        if kind in _SCALARS:
            return _SCALARS[kind]
        if kind == "null":
            return type(None)
        if kind == "array":
            return list[self.annotation(schema.get("items", {}), where)]  # type: ignore[misc]
        if kind == "object" or "properties" in schema:
            return self.model(schema, where) if schema.get("properties") else dict[str, Any]
        return Any

    def model(self, schema: Mapping[str, Any], where: str) -> type[BaseModel]:
        """Return a pydantic model of an object schema with ``properties``."""
        required = set(schema.get("required") or ())
        fields: dict[str, Any] = {}
        for name, prop in schema["properties"].items():
            fields[field_name(name)] = self.field(prop, name, name in required, where)
        closed = schema.get("additionalProperties") is False
        config = ConfigDict(extra="forbid" if closed else "allow", populate_by_name=True)
        title = field_name(str(schema.get("title") or where.replace(" ", "_")))
        return create_model(title, __config__=config, **fields)

    def field(self, schema: Any, name: str, required: bool, where: str) -> tuple[Any, Any]:
        """Return a ``(type, Field)`` pair for ``create_model``."""
        plain = self.resolve(schema, where) if isinstance(schema, Mapping) else {}
        annotation = self.annotation(schema, f"{where}.{name}")
        default: Any = ...
        if not required:
            default = plain.get("default")
            annotation = Optional[annotation]  # noqa: UP045 -- absent is None, not sent
        alias = name if field_name(name) != name else None
        return annotation, Field(default, alias=alias, description=plain.get("description"))
