"""The copy of the state that a node receives: each field is copied the first time it is read.

Tasks of a superstep run concurrently on their own copy of the state, so a node that changes
its copy in place affects no other task. Copying every field for every task would make a step
cost grow with the size of fields the node never touches (a long message list, say), so the
view is lazy: immutable fields are shared, and each mutable field is copied on first read
(deeply, or for a plain dict or list of immutable items only its container). Afterwards the
engine compares only the fields that were read or assigned with the values the task started
from, to find in-place changes.

A change counts when the value would be stored differently, not only when it compares
unequal: ``1`` and ``1.0``, ``0.0`` and ``-0.0``, one instant at two UTC offsets are equal
but not the same stored value. That second look costs something only for a value that
compares equal, and is skipped for fields whose type cannot tell equal values apart (such
as ``list[str]``; see ``field_types.has_exact_form``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import orjson
from pydantic import BaseModel

__all__ = ["ORIGINALS", "make_view_class", "new_view", "same_stored_form", "touched_fields"]

# Key of the task's starting values in the view's __pydantic_private__: outside __dict__, so
# it never shows in dumps, reprs or iteration.
ORIGINALS = "\x00nodestep_originals"


class _LazyField:
    """Data descriptor that copies a shared value on first read, with the field's copier."""

    __slots__ = ("copier", "name")

    def __init__(self, name: str, copier: Callable[[Any], Any]) -> None:
        self.name = name
        self.copier = copier

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        d = obj.__dict__
        value = d[self.name]
        if value is obj.__pydantic_private__[ORIGINALS].get(self.name, _MISSING):
            value = self.copier(value)
            d[self.name] = value
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.name] = value
        obj.__pydantic_fields_set__.add(self.name)


_MISSING = object()


def _view_eq(self: BaseModel, other: object) -> bool:
    if not isinstance(other, BaseModel):
        return NotImplemented  # type: ignore[no-any-return]
    base = type(self).__mro__[1]
    if not isinstance(other, base):
        return False
    names = type(self).model_fields
    return all(bool(getattr(self, n) == getattr(other, n)) for n in names)


def _rebuild(cls: type[BaseModel], values: dict[str, Any]) -> BaseModel:
    return cls.model_construct(**values)


def _view_reduce(self: BaseModel) -> tuple[Any, ...]:
    # The view class is made at run time and cannot be found by name, so a view pickles as
    # an instance of the declared class holding the view's current values.
    base: type[BaseModel] = type(self).__mro__[1]
    return (_rebuild, (base, {n: getattr(self, n) for n in base.model_fields}))


def _view_iter(self: BaseModel) -> Iterator[tuple[str, Any]]:
    for name in type(self).model_fields:
        yield name, getattr(self, name)


def make_view_class(
    cls: type[BaseModel],
    lazy_fields: dict[str, Callable[[Any], Any]],
    exact_fields: frozenset[str] = frozenset(),
) -> type[BaseModel]:
    """Return a subclass of ``cls`` whose mutable fields copy themselves on first read.

    ``lazy_fields`` maps each mutable field to the function that copies its value, a deep
    copy where the field's items can change in place (``FieldSpec.copied``).

    The subclass keeps the name of ``cls``, so ``str()``, ``repr()`` and ``isinstance``
    behave as the declared class does. ``exact_fields`` are those whose equal values are
    always stored alike, so ``touched_fields`` need not compare their stored forms.
    """
    namespace = {
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__doc__": cls.__doc__,
        "__eq__": _view_eq,
        "__iter__": _view_iter,
        "__reduce__": _view_reduce,
        "__hash__": None,
    }
    view = type(cls.__name__, (cls,), namespace)
    view._nodestep_exact = exact_fields  # type: ignore[attr-defined]
    for name, copier in lazy_fields.items():
        setattr(view, name, _LazyField(name, copier))
    return view


def new_view(
    view_cls: type[BaseModel], originals: dict[str, Any], private: dict[str, Any] | None
) -> BaseModel:
    """Return a view over ``originals`` (a dict the view never changes)."""
    inst = object.__new__(view_cls)
    object.__setattr__(inst, "__dict__", dict(originals))
    object.__setattr__(inst, "__pydantic_fields_set__", set(originals))
    object.__setattr__(inst, "__pydantic_extra__", None)
    priv = dict(private) if private else {}
    priv[ORIGINALS] = originals
    object.__setattr__(inst, "__pydantic_private__", priv)
    return inst


def touched_fields(view: BaseModel, originals: dict[str, Any]) -> list[tuple[str, Any]]:
    """Return ``(field, new value)`` for fields the node changed, read-and-changed or set.

    A value that compares equal to the original still counts as changed when its stored
    form differs (``1`` set to ``1.0``, say).
    """
    d = view.__dict__
    changed = []
    for name, old in originals.items():
        new = d[name]
        if new is old:
            continue
        try:
            same = bool(new == old)
        except Exception:
            same = False
        if same and name not in getattr(type(view), "_nodestep_exact", _NONE):
            same = same_stored_form(new, old)
        if not same:
            changed.append((name, new))
    return changed


_NONE: frozenset[str] = frozenset()
_PLAIN = (str, int, bool, type(None))
_FORM_OPTIONS = orjson.OPT_NON_STR_KEYS


def same_stored_form(a: Any, b: Any) -> bool:
    """Tell whether two equal values are also stored alike (same types, same JSON form).

    A value orjson cannot write (an arbitrary object) counts as stored alike: equality is
    all that is known of it.
    """
    if type(a) is not type(b):
        return False
    if type(a) in _PLAIN:
        return True
    try:
        return orjson.dumps(a, default=_form, option=_FORM_OPTIONS) == orjson.dumps(
            b, default=_form, option=_FORM_OPTIONS
        )
    except TypeError:  # orjson.JSONEncodeError included
        return True


def _form(obj: Any) -> Any:
    # What orjson does not write itself, written so that types and forms stay apart.
    if isinstance(obj, BaseModel):
        return [type(obj).__qualname__, obj.__dict__]
    if isinstance(obj, Decimal):
        return ["Decimal", str(obj)]
    if isinstance(obj, (set, frozenset)):
        return [type(obj).__name__, sorted(repr(item) for item in obj)]
    raise TypeError(type(obj).__name__)
