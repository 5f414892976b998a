"""The types a condition checks at load time, read from the state's annotations.

A ``Ty`` is a set of kinds (``bool``, ``number``, ``str``, ``null``, ``list``, ``dict``,
``model``, ``any``); ``str | None`` is ``{str, null}``. Only what the checker needs to
refuse a comparison that can never hold or a name that does not exist: anything it
cannot read (a custom class, a ``Decimal``) is ``any`` and is checked at run time.
"""

from __future__ import annotations

import collections.abc
import enum
import types
import typing
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

__all__ = ["ANY", "BOOL", "NULL", "NUMBER", "STR", "Ty", "member", "of_annotation", "of_value"]


@dataclass(frozen=True, slots=True)
class Ty:
    """A static type: its kinds, and the model class when one of them is ``model``.

    ``items`` is the type of what ``x in value`` can find in a list or dict value (a
    list's items, a dict's keys), or ``None`` when it is not known.
    """

    kinds: frozenset[str]
    model: type[BaseModel] | None = None
    items: Ty | None = None

    @property
    def is_any(self) -> bool:
        """Whether nothing is known about the value."""
        return "any" in self.kinds

    def known(self) -> frozenset[str]:
        """The kinds other than ``null``."""
        return self.kinds - {"null"}

    def describe(self, items: bool = False) -> str:
        """Name the type for a message: ``a string``, ``a number or null``.

        Args:
            items: Name a list's items too, where they are known: ``a list (items: a
                number)``, for a message about what is inside.
        """
        names = {
            "bool": "true/false",
            "number": "a number",
            "str": "a string",
            "null": "null",
            "list": "a list",
            "dict": "a dict",
            "any": "any value",
            "model": f"a {self.model.__name__ if self.model else 'model'} object",
        }
        if items and self.items is not None and not self.items.is_any and "list" in self.kinds:
            names["list"] = f"a list (items: {self.items.describe(items=True)})"
        return " or ".join(names[k] for k in sorted(self.kinds, key=_ORDER.index))

    def __or__(self, other: Ty) -> Ty:
        model = self.model or other.model
        if self.model and other.model and self.model is not other.model:
            return ANY  # two models: fields are checked at run time
        return Ty(self.kinds | other.kinds, model, _items(self, other))


def _items(a: Ty, b: Ty) -> Ty | None:
    """Return what ``in`` finds in a value of ``a | b``: one side's items when only it is a
    container, both sides' when both are and both are known."""
    if not a.kinds & _CONTAINERS:
        return b.items
    if not b.kinds & _CONTAINERS:
        return a.items
    return a.items | b.items if a.items is not None and b.items is not None else None


_ORDER = ["bool", "number", "str", "list", "dict", "model", "any", "null"]
_CONTAINERS = frozenset({"list", "dict"})

ANY = Ty(frozenset({"any"}))
BOOL = Ty(frozenset({"bool"}))
NUMBER = Ty(frozenset({"number"}))
STR = Ty(frozenset({"str"}))
NULL = Ty(frozenset({"null"}))
_LIST = Ty(frozenset({"list"}))
_DICT = Ty(frozenset({"dict"}))

_SEQUENCES = (list, tuple, set, frozenset, collections.abc.Sequence, collections.abc.Set)
_MAPPINGS = (dict, collections.abc.Mapping)


def of_value(value: Any) -> Ty:
    """Return the type of a literal."""
    if value is None:
        return NULL
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int | float):
        return NUMBER
    if isinstance(value, str):
        return STR
    return _LIST if isinstance(value, list) else ANY


def of_annotation(annotation: Any) -> Ty:
    """Return the type of a field annotated ``annotation``."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return of_annotation(typing.get_args(annotation)[0])
    if annotation is None or annotation is type(None):
        return NULL
    if origin in (typing.Union, types.UnionType):
        out: Ty | None = None
        for arg in typing.get_args(annotation):
            t = of_annotation(arg)
            out = t if out is None else out | t
        return out or ANY
    if origin is typing.Literal:
        out = None
        for value in typing.get_args(annotation):
            t = of_value(value.value if isinstance(value, enum.Enum) else value)
            out = t if out is None else out | t
        return out or ANY
    base = origin or annotation
    if not isinstance(base, type):
        return ANY
    ty = _of_class(base)
    args = typing.get_args(annotation)
    if ty.kinds & _CONTAINERS and args:
        # list[X], set[X], tuple[X, ...], dict[K, V]: ``in`` finds an X, or a key K.
        if issubclass(base, tuple) and not (len(args) == 2 and args[1] is Ellipsis):
            return ty
        return Ty(ty.kinds, items=of_annotation(args[0]))
    return ty


def _of_class(cls: type) -> Ty:
    if issubclass(cls, bool):
        return BOOL
    if issubclass(cls, str):
        return STR
    if issubclass(cls, enum.Enum):
        return ANY
    if issubclass(cls, int | float):
        return NUMBER
    if issubclass(cls, BaseModel):
        return Ty(frozenset({"model"}), cls)
    if issubclass(cls, str | bytes):
        return ANY
    if issubclass(cls, _MAPPINGS):
        return _DICT
    if issubclass(cls, _SEQUENCES):
        return _LIST
    return ANY


def member(ty: Ty, name: str) -> Ty | None:
    """Return the type of ``value.name`` for a value of type ``ty``; ``None``: no such field.

    Reading through ``null`` gives ``null`` (``user.tier`` is null when ``user`` is), so
    a nullable parent makes the member nullable.
    """
    if ty.is_any or "dict" in ty.kinds:
        return ANY
    if ty.model is None:
        return None
    field = ty.model.model_fields.get(name)
    if field is None:
        return None
    t = of_annotation(field.annotation)
    return t | NULL if "null" in ty.kinds else t


def fields_of(ty: Ty) -> list[str]:
    """Return the field names of a model type, for a message (empty for other types)."""
    return sorted(ty.model.model_fields) if ty.model is not None else []
