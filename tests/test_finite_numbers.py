"""``is_finite_number`` tells a finite setting from any other value without raising, and
``shown_number`` shows an integer too large for a float by what it is, not by its digits."""

from __future__ import annotations

from typing import Any

import pytest

from nodestep._numbers import is_finite_number, shown_number

BIG = 10**400


@pytest.mark.parametrize(
    ("value", "finite"),
    [(1, True), (0.5, True), (BIG, False), (float("inf"), False), (float("nan"), False),
     (True, False), ("1", False), (None, False)],
)  # fmt: skip
def test_is_finite_number(value: Any, finite: bool) -> None:
    assert is_finite_number(value) is finite
    shown = "an integer larger than a float holds (at most 1.8e+308)"
    assert shown_number(value) == (shown if value is BIG else repr(value))
