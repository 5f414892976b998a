"""What a failed run stores of its error: the message without secrets, always storable.

A node's exception message is stored in ``run_failed`` (and shown by ``get_state``), so a
message such as ``f"key={ctx.context.api_key.get_secret_value()}"`` would write the key to
disk. Before the message is stored:

1. every pydantic ``SecretStr`` / ``SecretBytes`` value found in the run's context (its
   fields, items and their fields, a few levels deep, in models, dataclasses, containers
   and any other object's attributes), and every credential the run's nodes got from its
   ``credentials=`` provider (strings, bytes and secrets in it), is replaced by ``MASK``
   in every form a message may show it (``_forms``): as it is, in any letter case,
   URL-quoted (``quote``, ``quote_plus``), JSON- or ``repr``-escaped, in base64, and the
   password alone of a ``user:password`` secret; and any base64 text whose decoded form
   holds one of these (an HTTP Basic header, ``base64("user:password")``) is masked whole;
2. the graph's ``redact=`` function, if any, gets the message and returns what to store;
3. the message is cut to ``MAX_MESSAGE`` characters, and characters that UTF-8 cannot
   encode (lone surrogates) are escaped, so storing the failure cannot fail.

All of it runs only when a failure is recorded, never on the per-task path. The exception
the caller gets is the node's own, unchanged.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import re
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

from pydantic import BaseModel, SecretBytes, SecretStr

__all__ = [
    "MASK",
    "MAX_MESSAGE",
    "Redact",
    "mask",
    "parts_of",
    "secret_texts",
    "stored_error",
    "stored_text",
]

MASK = "**********"
"""What stands in a stored message for a secret (pydantic shows secrets the same way)."""

MAX_MESSAGE = 2000
"""The longest message stored, in characters; a longer one is cut."""

Redact = Callable[[str], str]
"""A graph's ``redact=``: takes a failure message, returns the message to store."""

_DEPTH = 3  # the context, its fields, their fields: where settings objects keep keys
_BUDGET = 1000  # values looked at, at most: a context holding a large list stays cheap


def secret_texts(context: Any, *, plain: bool = False) -> list[str]:
    """Return the texts of the secrets in ``context``, longest first.

    Looks into pydantic models, dataclass instances, mappings, lists, tuples and sets,
    ``_DEPTH`` levels deep; a ``SecretBytes`` gives its UTF-8 text and its ``repr`` form.
    ``plain=True`` counts every string and bytes value as a secret too (for credentials,
    where everything is).
    """
    found: set[str] = set()
    todo: list[tuple[Any, int]] = [(context, 0)]
    seen = 0
    while todo and seen < _BUDGET:
        value, depth = todo.pop()
        seen += 1
        if isinstance(value, SecretStr) or (plain and isinstance(value, str)):
            found.add(value if isinstance(value, str) else value.get_secret_value())
        elif isinstance(value, SecretBytes) or (plain and isinstance(value, bytes)):
            raw = value if isinstance(value, bytes) else value.get_secret_value()
            found.update((raw.decode("utf-8", "backslashreplace"), repr(raw)[2:-1]))
        elif depth < _DEPTH and not isinstance(value, str | bytes | int | float | type):
            todo.extend((item, depth + 1) for item in parts_of(value))
    found.discard("")
    return sorted(found, key=len, reverse=True)


_NOT_HOLDERS = (
    type,
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.CodeType,
    types.FrameType,
)
"""Objects whose attributes hold no run data, never walked for texts: classes, modules, code."""


def parts_of(value: Any, *, public: bool = False) -> list[Any]:
    """Return the values ``value`` holds, for a walk that looks for texts in them.

    A mapping's values, a collection's items, a pydantic model's fields and extras, a
    dataclass's fields, and any other object's attributes, read from its ``__dict__`` and
    slots directly, never through ``getattr``: a property or ``__getattr__`` of a context
    object must not run because a run failed. Classes, modules and code hold nothing.
    ``public``: leave an object's ``_`` attributes out (an agent's context masks: a client
    in the context keeps its machinery there).
    """
    if isinstance(value, BaseModel):
        parts = [value.__dict__.get(name) for name in type(value).model_fields]
        return parts + list((value.__pydantic_extra__ or {}).values())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [getattr(value, f.name, None) for f in dataclasses.fields(value)]
    if isinstance(value, Mapping):
        return list(value.values())
    if isinstance(value, list | tuple | set | frozenset):
        return list(value)
    if isinstance(value, _NOT_HOLDERS):
        return []
    return _attributes(value, public)


def _attributes(value: Any, public: bool) -> list[Any]:
    parts: list[Any] = []
    try:
        found = object.__getattribute__(value, "__dict__")
    except Exception:  # no __dict__ (slots only), or a type that refuses the lookup
        found = None
    if isinstance(found, dict):
        parts.extend(
            v for k, v in found.items() if not public or (isinstance(k, str) and k[:1] != "_")
        )
    for klass in type(value).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name in ("__dict__", "__weakref__") or (public and name[:1] == "_"):
                continue
            try:
                parts.append(object.__getattribute__(value, name))
            except Exception:  # an unset slot, or a mangled name not found
                continue
    return parts


_BASE64 = re.compile(r"[A-Za-z0-9+/_-]{8,}={0,2}")
"""Text that may be base64: decoded and masked whole if it holds a secret."""


def _forms(secret: str) -> set[str]:
    """Return the forms in which a message may show ``secret`` (see the module docstring).

    The letter case is left to the matching, which ignores it.
    """
    texts = {secret}
    user, colon, password = secret.partition(":")
    if colon and user and password:
        texts.add(password)  # a user:password secret: the password alone, too
    forms: set[str] = set()
    for text in texts:
        raw = text.encode("utf-8", "backslashreplace")
        forms.update((text, quote(text), quote(text, safe=""), quote_plus(text)))
        forms.update((json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]))
        forms.update((repr(text)[1:-1], base64.b64encode(raw).decode().rstrip("=")))
        forms.add(base64.urlsafe_b64encode(raw).decode().rstrip("="))
    forms.discard("")
    return forms


def _decoded(token: str) -> str:
    """Return what the base64 text ``token`` decodes to, as text; ``""`` if it is none."""
    padded = token + "=" * (-len(token.rstrip("=")) % 4)
    decode = base64.urlsafe_b64decode if "-" in token or "_" in token else base64.b64decode
    try:
        return decode(padded.encode()).decode("utf-8", "ignore")
    except (binascii.Error, ValueError):
        return ""


def mask(message: str, secrets: Iterable[str]) -> str:
    """Return ``message`` with every form of every secret in ``secrets`` replaced by ``MASK``.

    Longer forms first, so a secret that holds another is masked whole.
    """
    forms: set[str] = set()
    for secret in secrets:
        forms |= _forms(secret)
    if not forms:
        return message
    ordered = sorted(forms, key=len, reverse=True)
    pattern = re.compile("|".join(re.escape(f) for f in ordered), re.IGNORECASE)

    def base64_holding(found: re.Match[str]) -> str:
        token = found.group(0)
        return MASK if pattern.search(_decoded(token)) else token

    return pattern.sub(MASK, _BASE64.sub(base64_holding, message))


def stored_error(
    error: BaseException, context: Any, redact: Redact | None, credentials: Any = ()
) -> tuple[str, str]:
    """Return the type name and the message to store for ``error``; never raises.

    Args:
        error: The exception the run failed with.
        context: The run's ``context=`` (any object; an unset sentinel holds nothing).
        redact: The graph's ``redact=`` function, or ``None``.
        credentials: The secrets the run's credentials provider gave its nodes.
    """
    return _storable(type(error).__name__), stored_text(_text(error), context, redact, credentials)


def stored_text(message: str, context: Any, redact: Redact | None, credentials: Any = ()) -> str:
    """Return ``message``, the text of a failure, as ``stored_error`` stores it; never raises.

    For a failure stored as data rather than as ``run_failed``: a tool node's error tool
    message, say, which a run keeps in its state.
    """
    texts = set(secret_texts(context)) | set(secret_texts(credentials, plain=True))
    message = mask(message, texts)
    if redact is not None:
        message = _redacted(message, redact)
    return _storable(message[:MAX_MESSAGE])


def _text(error: BaseException) -> str:
    try:
        return str(error)
    except Exception as broken:  # a __str__ that raises must not hide the node's error
        return f"(no message: str() of the {type(error).__name__} raised {type(broken).__name__})"


def _redacted(message: str, redact: Redact) -> str:
    # Storing the message unredacted is what redact= is there to prevent, so a hook that
    # fails withholds the message instead; the run's own error still reaches the caller.
    try:
        out = redact(message)
    except Exception as broken:
        return f"(message withheld: the graph's redact= raised {type(broken).__name__})"
    if not isinstance(out, str):
        return f"(message withheld: the graph's redact= returned {type(out).__name__}, not str)"
    return out


def _storable(text: str) -> str:
    """Return ``text`` with what UTF-8 cannot encode (lone surrogates) escaped as ``\\udc80``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text
