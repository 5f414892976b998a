"""Numbers a setting takes: finite ones, told apart without an ``OverflowError``.

A setting given as a number (a timeout, a wait, a ttl, a price, a store's time bound)
may come from a manifest, a config file or a request, where an integer of thousands of
digits is valid text. Every check of such a setting asks ``is_finite_number``, and its
message shows the value with ``shown_number``.

Why a module of the bottom layer: the graph's settings (``_flow``, ``_graph``) and the
stores' arguments (``store``) check numbers alike, and a store may import nothing above
``_errors``; one check for both keeps their messages the same.
"""

from __future__ import annotations

import math
import sys
from typing import Any

__all__ = ["is_finite_number", "shown_number"]


def is_finite_number(value: Any) -> bool:
    """Tell whether ``value`` is an int or float (not a bool) that a finite float can hold.

    Why not ``math.isfinite`` alone: it raises ``OverflowError`` for an int past a float's
    range (``10**400``, a 4,000-digit number in a manifest), which every wait and time
    limit becomes.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def shown_number(value: Any) -> str:
    """Return how a message shows a setting's value: its repr, but an int too large for
    a float by what it is, since its thousands of digits would bury the message."""
    if isinstance(value, int) and not isinstance(value, bool) and not is_finite_number(value):
        return f"an integer larger than a float holds (at most {sys.float_info.max:.2g})"
    return repr(value)
