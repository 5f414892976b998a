"""Reducers: how a write to a field merges with the value the field already holds.

A field's reducer comes from ``Annotated[T, reducer]``. A field without one is replaced by
each write (``replace``). Reducers run when a superstep's writes are merged, in a fixed order
(node name, then task index), so a reducer that is not commutative still gives the same
result on every run.
"""

from __future__ import annotations

import inspect
import operator
import types
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Generic, Literal, TypeVar, Union, get_args, get_origin

from nodestep._display.text import short_repr
from nodestep._errors import GraphConfigError
from nodestep._state.field_types import holds_only, type_name

__all__ = [
    "Replace",
    "add",
    "checks_field_type",
    "field_reducer",
    "is_reducer_candidate",
    "keeps_field_type",
    "merge_dict",
    "reducer_arity_ok",
    "replace",
]

T = TypeVar("T")
R = TypeVar("R", bound=Callable[..., Any])

FieldTypeCheck = Callable[[Any], str | None]
"""Tells what is wrong with a field's type for a reducer, with the fix, or returns ``None``."""

_TYPE_CHECKS: list[tuple[Callable[..., Any], FieldTypeCheck]] = []


def checks_field_type(check: FieldTypeCheck) -> Callable[[R], R]:
    """Return a decorator that gives a reducer ``check``, run on each field it is put on.

    A reducer that works on one kind of value only (``add_messages``: chat messages) is
    refused on a field of another type when the state class compiles, instead of on the
    first write, or never. ``check(annotation)`` returns ``None`` when the type fits, or a
    sentence saying what is wrong and the fix.

    Such a reducer is nodestep's own, written for the types its check lets through: it
    promises to return a value of the field's type, so its merged value is not validated
    again (``keeps_field_type``).
    """

    def mark(reducer: R) -> R:
        _TYPE_CHECKS.append((reducer, check))
        return reducer

    return mark


def replace(current: Any, update: T) -> T:
    """Return the update: the default for fields without a reducer.

    A plain field takes one writer per superstep; two nodes writing it in the same superstep
    raise ``InvalidUpdateError``.
    """
    return update


def add(current: list[Any] | None, update: list[Any]) -> list[Any]:
    """Append the items of a list update to the current list.

    Only lists are taken: a string, tuple, set, dict or generator is refused rather than
    spread into items (``add([1], "ab")`` would otherwise give ``[1, "a", "b"]``). The first
    write of a field with no value gets ``None`` as ``current``. A new list is returned;
    neither argument is changed.

    Raises:
        TypeError: ``update`` is not a list, or ``current`` is neither a list nor ``None``.
    """
    if not isinstance(update, list):
        raise TypeError(
            f"add appends a list, got a {type(update).__name__} as the update; write a list, "
            f"e.g. [item]"
        )
    if current is None:
        return list(update)
    if not isinstance(current, list):
        raise TypeError(
            f"add appends to a list, but the current value is a {type(current).__name__}; "
            f"give the field a list type, or use another reducer"
        )
    return [*current, *update]


def merge_dict(current: Mapping[Any, Any] | None, update: Mapping[Any, Any]) -> dict[Any, Any]:
    """Merge the top-level keys of a dict update into the current dict (shallow).

    It cannot remove a key: write ``Replace(new_dict)`` for that.
    """
    if current is None:
        return dict(update)
    return {**current, **update}


class Replace(Generic[T]):
    """Set a field to ``value`` for one write, bypassing the field's reducer.

    Works in node updates, ``Command(update=...)``, ``update_state`` and run input. A
    ``Replace`` does not merge, so two writers of the field in one superstep still conflict.
    """

    __slots__ = ("value",)
    __match_args__ = ("value",)

    def __init__(self, value: T) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"Replace({short_repr(self.value)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Replace) and other.value == self.value

    def __hash__(self) -> int:
        # Equal Replaces hash alike; like a tuple, one holding an unhashable value (a list)
        # raises TypeError.
        return hash(("Replace", self.value))


def is_reducer_candidate(item: object) -> bool:
    """Tell whether an ``Annotated`` metadata item is meant as a reducer.

    Pydantic's own metadata (validators, constraints, ``Field``) is not; any other callable
    is, so ``operator.add`` and user functions both work.
    """
    if not callable(item) or isinstance(item, type):
        return False
    module = getattr(type(item), "__module__", "") or ""
    return not module.startswith(("pydantic", "annotated_types"))


def reducer_arity_ok(fn: Callable[..., Any]) -> bool:
    """Tell whether ``fn`` can be called with two positional arguments."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return True  # builtins without a signature: trust them, as Python would
    try:
        signature.bind(None, None)
    except TypeError:
        return False
    return True


def field_reducer(name: str, info: Any, owner: type) -> Any:
    """Return the reducer in a field's ``Annotated[...]`` metadata, or ``None``.

    Args:
        name: The field's name, for messages.
        info: The field's pydantic ``FieldInfo``.
        owner: The state class, for messages.

    Raises:
        GraphConfigError: the field has two reducers, or one that cannot be called with
            ``(current, update)``, or ``add``/``merge_dict`` on a field of another type
            (or any reducer on a type its ``checks_field_type`` check refuses), or
            a reducer inside the type (``Annotated[list, add] | None``), where it would
            never run.
    """
    _refuse_nested_reducer(name, info.annotation, owner)
    reducers = [m for m in info.metadata if is_reducer_candidate(m)]
    if len(reducers) > 1:
        raise GraphConfigError(
            f"Field '{name}' of {owner.__name__} has {len(reducers)} reducers; a field takes "
            f"one. Keep one in its Annotated[...]."
        )
    if not reducers:
        return None
    reducer = reducers[0]
    if not reducer_arity_ok(reducer):
        raise GraphConfigError(
            f"The reducer of field '{name}' of {owner.__name__} cannot be called with two "
            f"positional arguments (current, update). Give it the signature "
            f"def reducer(current, update) -> new_value."
        )
    _check_reducer_fits(name, info.annotation, reducer, owner)
    return reducer


def _nested_reducer(annotation: Any) -> Any:
    """Return a reducer found inside a type expression (a union member, an item type)."""
    origin = get_origin(annotation)
    if origin is Literal:
        return None
    args = get_args(annotation)
    if origin is Annotated:
        found = [m for m in args[1:] if is_reducer_candidate(m)]
        return found[0] if found else _nested_reducer(args[0])
    for arg in args:
        found = _nested_reducer(arg)
        if found is not None:
            return found
    return None


def _refuse_nested_reducer(name: str, annotation: Any, owner: type) -> None:
    # Only the field's own Annotated[...] names its reducer; one inside a union or an item
    # type would be silently ignored, giving the field replace semantics.
    reducer = _nested_reducer(annotation)
    if reducer is None:
        return
    label = getattr(reducer, "__name__", None) or repr(reducer)
    raise GraphConfigError(
        f"Field '{name}' of {owner.__name__} has the reducer {label} inside its type (in a "
        f"union or an item type), where it never runs: only the field's own Annotated[...] "
        f"names its reducer. Put it around the whole type, e.g. "
        f"Annotated[list[str] | None, {label}] instead of Annotated[list[str], {label}] | None."
    )


_CONTAINER_REDUCERS: dict[Any, tuple[type, str, str]] = {
    add: (list, "appends lists", "list[str]"),
    merge_dict: (dict, "merges dicts", "dict[str, int]"),
}


def keeps_field_type(reducer: Any, annotation: Any) -> bool:
    """Tell whether ``reducer``'s result provably fits a field of type ``annotation``.

    A reducer's result is stored as the field's value, so it is validated against the
    field's type as a plain write is (``ReducerChannel``'s ``check``), except where it
    cannot be wrong: ``add`` and ``operator.add`` on a field of one list type, whose
    current value and write are both lists of its items, and ``merge_dict`` on one of one
    dict type, likewise; and a reducer given a field-type check (``checks_field_type``),
    which promises it. So the common reducers pay nothing for the check.
    """
    if any(marked is reducer for marked, _ in _TYPE_CHECKS):
        return True
    if reducer is add or reducer is operator.add:
        return _one_container(annotation) is list
    return reducer is merge_dict and _one_container(annotation) is dict


def _one_container(annotation: Any) -> Any:
    """Return ``list`` or ``dict`` for a type that is one of them (``list[str]``, ``dict``,
    ``list[int] | None``), else ``None``: a union of two list types is neither, since
    appending a list of one to a list of the other mixes them."""
    if get_origin(annotation) in (Union, types.UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        if len(members) != 1:
            return None
        annotation = members[0]
    for container in (list, dict):
        if annotation is container or get_origin(annotation) is container:
            return container
    return None


def _check_reducer_fits(name: str, annotation: Any, reducer: Any, owner: type) -> None:
    """Refuse ``add`` on a field that is not a list, and ``merge_dict`` on one not a dict."""
    for marked, check in _TYPE_CHECKS:
        problem = check(annotation) if marked is reducer else None
        if problem:
            raise GraphConfigError(
                f"Field '{name}' of {owner.__name__} uses the "
                f"{getattr(reducer, '__name__', reducer)} reducer, but {problem}."
            )
    known = _CONTAINER_REDUCERS.get(reducer)
    if known is None:
        return
    container, does, example = known
    if not holds_only(annotation, container):
        raise GraphConfigError(
            f"Field '{name}' of {owner.__name__} uses the {reducer.__name__} reducer, which "
            f"{does}, but its type is {type_name(annotation)}. Give the field a "
            f"{container.__name__} type (e.g. {example}), or another reducer (operator.add "
            f"adds numbers and joins strings)."
        )
