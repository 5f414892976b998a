"""Every setting given in seconds (or a price) refuses a number too large for a float.

``math.isfinite(10**400)`` raises ``OverflowError``; each check asks ``is_finite_number``
(``nodestep._numbers``, tested in ``tests/test_finite_numbers.py``) instead, and its message shows
such a value by what it is, not by its 400 digits.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from nodestep import (
    END,
    START,
    BaseState,
    CachePolicy,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    node,
)

BIG = 10**400
SHOWN = "an integer larger than a float holds"


class S(BaseState):
    n: int = 0


def step(state: S) -> dict[str, Any]:
    return {}


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda v: node(step, timeout=v), TypeError, "@node(timeout=...) takes a positive"),
        (lambda v: CachePolicy(ttl=v), TypeError, "CachePolicy(ttl=...) takes a positive"),
        (lambda v: Graph(S, timeout=v), GraphConfigError, "timeout must be a positive"),
        (lambda v: Graph(S, lease_ttl=v), GraphConfigError, "lease_ttl must be a positive"),
    ],
)
def test_a_number_too_large_for_a_float_is_refused_naming_the_setting(
    make: Callable[[Any], Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=re.escape(message)) as caught:
        make(BIG)
    assert SHOWN in str(caught.value)
    assert "0" * 100 not in str(caught.value)
    make(30)  # a plain number is taken


def test_wait_for_thread_refuses_a_number_too_large_for_a_float() -> None:
    a = node(step, name="a")
    graph = Graph(S, state_store=InMemoryStateStore()).flow(START >> a, a >> END)
    with pytest.raises(GraphConfigError, match=f"wait_for_thread takes .*got {SHOWN}"):
        graph.invoke({}, thread_id="t", wait_for_thread=BIG)
