"""An item of the memory store, and the checks of the namespaces, keys and values it takes.

A namespace is a tuple of labels, such as ``("users", "u-1", "notes")``: each a non-empty
string without ``"."`` (the SQL back ends keep a namespace as its labels joined by dots,
so a prefix match is a text match). A key is a non-empty string. Neither holds a NUL
character or a lone surrogate, which no back end can keep; a lookup (``get``, ``delete``,
a search's prefix) takes a NUL, as an older nodestep wrote such keys and labels to the
SQLite and file stores, so that those items can be read and deleted. A value is a JSON object: a
dict with string keys whose values are JSON (dicts, lists, strings of Unicode text,
finite numbers, booleans, ``None``); anything else is refused before anything is written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from nodestep._display.text import fields_repr
from nodestep._errors import GraphConfigError
from nodestep._numbers import is_finite_number, shown_number

__all__ = [
    "Item",
    "Row",
    "SearchItem",
    "check_key",
    "check_namespace",
    "check_prefix",
    "check_ttl",
    "check_value",
    "join_namespace",
    "split_namespace",
]


@dataclass(frozen=True, slots=True)
class Item:
    """One stored value: where it lives, what it holds, and when it was written.

    Attributes:
        namespace: The item's namespace, a tuple of labels.
        key: The item's key within its namespace.
        value: The stored JSON object (a copy: changing it changes nothing stored).
        created_at: When the key was first written (UTC).
        updated_at: When it was last written (UTC).
    """

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime

    def __repr__(self) -> str:
        return fields_repr(self, ("namespace", "key", "value", "updated_at"), width=100)

    def to_json(self) -> dict[str, Any]:
        """Return the item as JSON data; the times as ISO 8601 text in UTC."""
        return {
            "namespace": list(self.namespace),
            "key": self.key,
            "value": self.value,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class SearchItem(Item):
    """An item found by ``search``, with its score.

    Attributes:
        score: The cosine similarity of the item's best indexed field to the query, from
            -1 to 1; ``None`` without a query, or for an item with no indexed text.
    """

    score: float | None = None

    def __repr__(self) -> str:
        return fields_repr(self, ("namespace", "key", "value", "score"), width=100)

    def to_json(self) -> dict[str, Any]:
        """Return the item as JSON data, with its ``score``."""
        out = Item.to_json(self)
        out["score"] = self.score
        return out


@dataclass(slots=True)
class Row:
    """An item as a back end keeps it: times as epoch seconds, with its TTL and vectors.

    Attributes:
        namespace: The namespace.
        key: The key.
        value: The JSON object.
        created_at: Epoch seconds of the first write.
        updated_at: Epoch seconds of the last write.
        ttl: Seconds the item lives after a write (or a read that refreshes it); ``None``
            for ever.
        expires_at: Epoch seconds after which it is gone; ``None`` for ever.
        vectors: The embeddings of its indexed fields; empty when it has none.
    """

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: float
    updated_at: float
    ttl: float | None = None
    expires_at: float | None = None
    vectors: list[list[float]] = field(default_factory=list)

    def live(self, now: float) -> bool:
        """Return whether the row has not expired at ``now``."""
        return self.expires_at is None or self.expires_at > now

    def item(self) -> Item:
        """Return the public item."""
        created = datetime.fromtimestamp(self.created_at, UTC)
        updated = datetime.fromtimestamp(self.updated_at, UTC)
        return Item(self.namespace, self.key, self.value, created, updated)

    def found(self, score: float | None) -> SearchItem:
        """Return the public item as ``search`` found it, with its ``score``."""
        created = datetime.fromtimestamp(self.created_at, UTC)
        updated = datetime.fromtimestamp(self.updated_at, UTC)
        return SearchItem(self.namespace, self.key, self.value, created, updated, score)


def join_namespace(namespace: tuple[str, ...]) -> str:
    """Return the namespace as one text, its labels joined by dots."""
    return ".".join(namespace)


def split_namespace(text: str) -> tuple[str, ...]:
    """Return the namespace ``join_namespace`` gave as ``text``."""
    return tuple(text.split("."))


def check_namespace(
    namespace: Any, *, what: str = "namespace", lookup: bool = False
) -> tuple[str, ...]:
    """Return ``namespace`` as a tuple of labels, or refuse it.

    Raises:
        GraphConfigError: Not a non-empty tuple (or list) of labels, or a label that is
            not a non-empty string without ``"."``.
    """
    if isinstance(namespace, str) or not isinstance(namespace, tuple | list):
        raise GraphConfigError(
            f"A memory {what} is a tuple of labels, such as ('users', 'u-1'), got "
            f"{type(namespace).__name__} {namespace!r}."
        )
    if not namespace and what == "namespace":
        raise GraphConfigError(
            "A memory namespace needs at least one label, such as ('users', 'u-1'); got ()."
        )
    for label in namespace:
        if not isinstance(label, str) or not label or "." in label:
            shown = (
                f"{type(label).__name__} {label!r}" if not isinstance(label, str) else repr(label)
            )
            raise GraphConfigError(
                f"The memory {what} {tuple(namespace)!r} has the label {shown}; a label is a "
                f"non-empty string without '.' (the stores join labels with dots). Split "
                f"'a.b' into two labels: ('a', 'b')."
            )
        problem = _unstorable_name(label, lookup)
        if problem:
            raise GraphConfigError(
                f"The memory {what} {tuple(namespace)!r} has the label {label!r}, which "
                f"{problem}; no store can keep it. Remove that character from the label."
            )
    return tuple(namespace)


def check_prefix(prefix: Any, what: str = "namespace prefix") -> tuple[str, ...]:
    """Return a namespace prefix (``()`` matches every namespace), or refuse it."""
    return check_namespace(prefix, what=what, lookup=True)


def check_key(key: Any, *, lookup: bool = False) -> str:
    """Return ``key``, or refuse it.

    Args:
        key: The key.
        lookup: The key is looked up or deleted, not written: a NUL is taken (see the
            module docstring).

    Raises:
        GraphConfigError: Not a non-empty string, or a key no store can keep.
    """
    if not isinstance(key, str) or not key:
        raise GraphConfigError(
            f"A memory key is a non-empty string, got {type(key).__name__} {key!r}."
        )
    problem = _unstorable_name(key, lookup)
    if problem:
        raise GraphConfigError(
            f"The memory key {key!r} {problem}; no store can keep it. Remove that character "
            f"from the key."
        )
    return key


def _unstorable_name(text: str, lookup: bool = False) -> str:
    """Return why a key or label cannot be stored on every back end, or ``""``.

    Why: the SQL stores keep keys and labels as database text, which holds neither NUL
    (PostgreSQL refuses it) nor a lone surrogate (no UTF-8 encodes one), and the file
    store's JSON holds no lone surrogate either; the checks are here so that every back
    end refuses the same names before anything is written. A ``lookup`` takes a NUL: the
    SQLite and file stores of an older nodestep kept such names, and a user who finds
    those items (in a search) must be able to read and delete them.
    """
    if "\x00" in text and not lookup:
        return "holds the NUL character '\\x00'"
    return _lone_surrogate(text)


def _lone_surrogate(text: str) -> str:
    """Return what in ``text`` is a lone surrogate (not Unicode text), or ``""``."""
    if text.isascii():  # the common case, without an encode
        return ""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return f"holds the lone surrogate {text[e.start]!r} (at index {e.start})"
    return ""


def check_ttl(ttl: Any, what: str = "ttl") -> float | None:
    """Return ``ttl`` in seconds, or refuse it.

    Raises:
        GraphConfigError: Neither ``None`` nor a finite number above 0.
    """
    if ttl is None:
        return None
    if not (is_finite_number(ttl) and ttl > 0):
        raise GraphConfigError(
            f"{what}= takes seconds, a number above 0 (or None: kept until deleted); got "
            f"{shown_number(ttl)}."
        )
    return float(ttl)


def check_value(key: str, value: Any) -> dict[str, Any]:
    """Return ``value`` if it is a JSON object, or refuse it before anything is written.

    Raises:
        GraphConfigError: Not a dict with string keys, or it holds something JSON cannot
            (the message names the key, the place in the value and the type found).
    """
    if not isinstance(value, dict):
        raise GraphConfigError(
            f"The memory value of key {key!r} is a {type(value).__name__}; a memory value is "
            f"a JSON object, a dict such as {{'text': ...}}. Wrap it: {{'value': ...}}."
        )
    problem = _not_json(value, "value")
    if problem:
        raise GraphConfigError(
            f"The memory value of key {key!r} is not JSON: {problem}. Store JSON data "
            f"(dicts with string keys, lists, strings, finite numbers, booleans, None; "
            f"integers within 64 bits, bigger ones as strings): convert the value first, "
            f"e.g. a model with .model_dump(mode='json')."
        )
    return value


_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1  # orjson's range: signed or unsigned 64 bits


def _not_json(value: Any, path: str) -> str:
    """Return what in ``value`` (at ``path``) is not JSON, or ``""``."""
    if isinstance(value, str):
        # The file store's JSON (orjson) writes no lone surrogate, nor would a database.
        problem = _lone_surrogate(value)
        return f"{path} is a string that {problem}" if problem else ""
    if value is None or isinstance(value, bool):
        return ""
    if isinstance(value, int):
        # Within what every back end keeps exactly: the file store's JSON (orjson) writes
        # no int beyond 64 bits, and would read one back as a float.
        return "" if _INT_MIN <= value <= _INT_MAX else f"{path} is the int {value}, beyond 64 bits"
    if isinstance(value, float):
        return "" if math.isfinite(value) else f"{path} is the float {value!r}"
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                return f"{path} has the key {k!r} of type {type(k).__name__}, not a string"
            problem = _lone_surrogate(k)
            if problem:
                return f"{path} has the key {k!r}, which {problem}"
            problem = _not_json(v, f"{path}[{k!r}]")
            if problem:
                return problem
        return ""
    if isinstance(value, list):
        for i, v in enumerate(value):
            problem = _not_json(v, f"{path}[{i}]")
            if problem:
                return problem
        return ""
    return f"{path} is of type {type(value).__name__}"
