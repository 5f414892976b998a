"""Why a state field's value has no stored JSON form: where in the value, and the fix.

``FieldSpec.to_json`` finds that a value cannot be stored (pydantic's dump or orjson
refuses it, or it reads back different); the errors here say what is wrong (bytes that are
not UTF-8, an int beyond 64 bits, a lone surrogate, a nan, a secret, a subclass that reads
back as its builtin) and where, by walking the value once more, on the error path only.
"""

from __future__ import annotations

from typing import Any, NoReturn

from pydantic import SecretBytes, SecretStr

from nodestep._errors import StateStoreError
from nodestep._state.deep_copy import FLATTEN
from nodestep._state.field_types import type_name
from nodestep._state.json import first_at, non_finite, unencodable
from nodestep._state.read_back import MISS

__all__ = [
    "cannot_encode",
    "no_json_form",
    "none_refused",
    "refuse_read_back",
    "round_trip_error",
]

# The builtins whose subclass (an IntEnum or StrEnum member) reads back as the builtin.
_BUILTINS = (int, str, bool)


def none_refused(name: str, annotation: Any) -> StateStoreError:
    """Return the error for a None the field's type does not take.

    Only an unvalidated default gets here (every write is validated), and the checks
    of ``to_json`` assume a value of the type: a dump lets None through, and a load
    would refuse it, later, as if stored by another version of the class.
    """
    shown = type_name(annotation)
    return StateStoreError(
        f"Field '{name}' holds None, which its type {shown} does not take, so it "
        f"could not be loaded back (a default of None?). Declare the field as "
        f"{shown} | None, or give it a default of its type."
    )


def no_json_form(name: str, annotation: Any, value: Any, error: Exception) -> StateStoreError:
    """Return the error for a value of field ``name`` pydantic's dump refused with ``error``."""
    if "serialization depth" in str(error):  # before the walk, which recurses too
        return StateStoreError(
            f"Field '{name}' cannot be stored as JSON: its value is nested too "
            f"deeply ({str(error).splitlines()[0]}). {FLATTEN}"
        )
    binary = first_at(value, "", _not_utf8)
    if binary is not None:  # the usual fix is a setting, not another type
        held = f"the bytes at {binary[0]}" if binary[0] else "its bytes"
        return StateStoreError(
            f"Field '{name}' cannot be stored as JSON: {held} are not "
            f"UTF-8 text, which is how JSON stores bytes unless told otherwise. Store "
            f"them as base64: set model_config = ConfigDict(ser_json_bytes='base64', "
            f"val_json_bytes='base64') on the class that declares them (the state class, "
            f"or the nested model)."
        )
    return StateStoreError(
        f"Field '{name}' cannot be stored as JSON: a value of type "
        f"{type(value).__name__} has no JSON form for {type_name(annotation)} "
        f"({str(error).splitlines()[0]}). Keep only JSON data in the state; pass "
        f"clients and handles through context=."
    )


def cannot_encode(name: str, data: Any, error: TypeError | None) -> StateStoreError:
    """Return the error for JSON data ``data`` that orjson refused with ``error``
    (``None``: a str the caller found a lone surrogate in)."""
    found = first_at(data, "", unencodable)
    if found is None:  # pragma: no cover - orjson refuses only what the walk finds
        return StateStoreError(
            f"Field '{name}' cannot be stored as JSON: {error}. Keep only JSON data in the state."
        )
    where, problem = found
    place = f"at {where}" if where else "at its top level"
    if isinstance(problem, int):
        return StateStoreError(
            f"Field '{name}' cannot be stored as JSON: the int {problem} {place} is "
            f"beyond 64 bits. Keep integers within 64 bits (store bigger ones as strings)."
        )
    if where:
        held = f"the str {place} holds the lone surrogate {problem!r}"
    else:  # the field's value is the str: where in the text
        held = f"its str holds the lone surrogate {problem!r} at index {data.index(problem)}"
    return StateStoreError(
        f"Field '{name}' cannot be stored as JSON: {held} (half of a UTF-16 pair, "
        f"such as a cut emoji), which UTF-8 cannot encode. Repair the text where it comes "
        f"in, e.g. text.encode('utf-8', 'replace').decode() turns it into '?'."
    )


def refuse_read_back(name: str, annotation: Any, data: Any) -> NoReturn:
    """Raise the error for a value whose JSON form reads back different from ``data``."""
    found = first_at(data, "", non_finite)
    if found is not None:
        where = found[0]
        raise StateStoreError(
            f"Field '{name}' holds a float that JSON cannot store (nan or infinity) "
            f"at {where or 'its top level'}: it would be stored as null, which does not "
            f"load back as {type_name(annotation)}. Keep floats finite (store a "
            f"missing number as None, with a type such as list[float | None])."
        )
    raise StateStoreError(  # pragma: no cover - pydantic's JSON mode gives JSON data
        f"Field '{name}' does not survive a JSON round trip: its JSON form reads "
        f"back different. Use JSON-friendly types."
    )


def round_trip_error(
    name: str, annotation: Any, value: Any, found: tuple[str, Any, Any]
) -> StateStoreError:
    """Return the error for a value of field ``name`` that reads back different, where
    ``first_difference`` ``found`` it."""
    return StateStoreError(
        f"Field '{name}' does not survive a JSON round trip: a value of type "
        f"{type(value).__name__} comes back different as {type_name(annotation)}"
        f"{_difference(*found)}. {_round_trip_fix(value, found)}"
    )


def _not_utf8(value: Any) -> bytes | None:
    """Return ``value`` if it is bytes that are not UTF-8 text, else ``None``."""
    if isinstance(value, bytes | bytearray):
        try:
            bytes(value).decode()
        except UnicodeDecodeError:
            return bytes(value)
    return None


def _secret(value: Any) -> str | None:
    """Return the type name of a pydantic secret, whose JSON form masks it; else ``None``."""
    return type(value).__name__ if isinstance(value, SecretStr | SecretBytes) else None


def _difference(where: str, was: Any, back: Any) -> str:
    """Return where a value read back as another type, e.g. `` (at ['k']: a Color comes
    back as int)``; ``""`` when the types match or it did not read back at all."""
    if back is MISS or type(was) is type(back):
        return ""
    name = type(was).__name__
    article = "an" if name[:1].lower() in "aeiou" else "a"
    return (
        f" ({f'at {where}' if where else 'its value'}: {article} {name} comes back as "
        f"{type(back).__name__})"
    )


def _round_trip_fix(value: Any, found: tuple[str, Any, Any] | None = None) -> str:
    """Return the fix for a value whose JSON form reads back different.

    A secret gets the way to pass one: its JSON form is the mask, and a secret has no
    place in a stored state anyway. A subclass of a builtin (an ``IntEnum`` or
    ``StrEnum`` member), which reads back as the builtin where the type takes one, gets
    the way to keep its type.
    """
    if found is not None:
        was, back = type(found[1]), type(found[2])
        if back in _BUILTINS and back in was.__mro__[1:]:
            return (
                f"A {was.__name__} is stored as its {back.__name__} value, and where the "
                f"type also takes a plain {back.__name__} (Any, or a union such as "
                f"{back.__name__} | {was.__name__}) that is what it reads back as: declare "
                f"that place as {was.__name__} alone, or store the plain {back.__name__}."
            )
    secret = first_at(value, "", _secret)
    if secret is None:
        return "Use JSON-friendly types (no nan, no private or excluded model fields)."
    where, kind = secret
    held = f" (at {where})" if where else ""
    return (
        f"A {kind}{held} is masked in its JSON form, so a store would keep '**********': keep "
        f"secrets out of the state and pass them with context= (never stored) or a "
        f"credentials provider (credentials=)."
    )
