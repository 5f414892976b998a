"""Short text forms of values, for reprs and table cells: a few items, a few dozen
characters, never the whole of a big state."""

from __future__ import annotations

import math
import reprlib
import time
from collections.abc import Iterable
from typing import Any

__all__ = ["fields_repr", "model_repr", "plural", "readable_time", "short_repr"]


class _Short(reprlib.Repr):
    """``reprlib`` that also shortens pydantic models (a state, a message) field by field.

    Why not ``repr`` cut at a width: a cut ``repr`` of a state with a 10,000-item list
    builds the whole text first and shows only its start; this shows every field, each
    short, at a cost bound by the limits, not by the value's size.
    """

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxlist = self.maxtuple = self.maxset = self.maxfrozenset = self.maxdeque = 6
        self.maxdict = 6
        self.maxstring = 60
        self.maxother = 200
        self.maxlong = 40

    def repr1(self, x: Any, level: int) -> str:
        if isinstance(x, list) and type(x) is not list:  # a list subclass reads as a list
            return self.repr_list(x, level)
        return super().repr1(x, level)

    def repr_int(self, x: int, level: int) -> str:
        try:
            return super().repr_int(x, level)
        except ValueError:
            # repr() of an int of more digits than sys.get_int_max_str_digits() (4,300 by
            # default) raises, so a state holding one could not be shown at all: say how
            # long it is instead.
            digits = int(x.bit_length() * math.log10(2)) + 1
            return f"<{'negative ' if x < 0 else ''}int of about {digits:,} digits>"

    def repr_instance(self, obj: Any, level: int) -> str:
        fields = getattr(type(obj), "model_fields", None)
        if isinstance(fields, dict) and hasattr(obj, "__dict__"):
            if level <= 0:
                return f"{type(obj).__name__}(...)"
            shown = list(fields)[: self.maxdict + 2]
            parts = [f"{name}={self.repr1(getattr(obj, name, None), level - 1)}" for name in shown]
            if len(fields) > len(shown):
                parts.append("...")
            return f"{type(obj).__name__}({', '.join(parts)})"
        return super().repr_instance(obj, level)


_SHORT = _Short()


def short_repr(value: Any, width: int = 120) -> str:
    """Return a ``repr`` of ``value`` that stays short: at most ``width`` characters.

    Containers show their first items and ``...``; strings their start and end; a
    pydantic model each field so; anything else its own ``repr`` (cut to ``width``).
    """
    text = _SHORT.repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def fields_repr(obj: Any, names: Iterable[str], width: int = 60) -> str:
    """Return ``Class(name=value, ...)`` with each value's ``short_repr`` (``width`` each).

    A class whose fields may hold a whole state or a big payload uses it as its
    ``__repr__``: the same form as a dataclass's, but every line stays short.
    """
    parts = ", ".join(f"{n}={short_repr(getattr(obj, n), width)}" for n in names)
    return f"{type(obj).__name__}({parts})"


def model_repr(model: Any, width: int = 60) -> str:
    """Return a pydantic model as ``Class(field=value, ...)``, every field, each short.

    For small values it reads as pydantic's own ``repr``; a 10,000-item list shows its
    first items and ``...``.
    """
    return fields_repr(model, type(model).model_fields, width)


def plural(count: int, word: str) -> str:
    """Return ``"1 step"``, ``"2 steps"``, ``"10,000 steps"``."""
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def readable_time(timestamp: float) -> str:
    """Return a ``time.time()`` stamp as ``2026-12-05 21:34:37.120 UTC``.

    UTC, so that the same history reads the same on every machine and in every test.
    """
    whole = int(timestamp // 1)
    millis = round((timestamp - whole) * 1000)
    if millis == 1000:
        whole, millis = whole + 1, 0
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(whole)) + f".{millis:03d} UTC"
