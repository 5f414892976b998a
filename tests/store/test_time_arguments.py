"""A store's time arguments refuse an integer too large for a float with a clear error.

``prune(older_than=)`` and ``list_threads(active_after=, active_before=)`` take a
``time.time()`` timestamp; ``10**400`` (valid JSON in a request, valid text in a script's
config) is no timestamp, and is refused as ``inf`` is: a ``GraphConfigError`` naming the
argument, not a raw ``OverflowError`` from ``math.isfinite``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from nodestep import GraphConfigError, InMemoryStateStore

BIG = 10**400


@pytest.mark.parametrize(
    "value",
    [BIG, -BIG, float("inf"), float("nan"), True, "1"],
    ids=["10**400", "-10**400", "inf", "nan", "True", "str"],
)
def test_prune_refuses_older_than_that_is_no_finite_timestamp(value: Any) -> None:
    store = InMemoryStateStore()
    with pytest.raises(GraphConfigError, match=r"prune got older_than=.*time\.time"):
        asyncio.run(store.prune(older_than=value))


@pytest.mark.parametrize("name", ["active_after", "active_before"])
def test_list_threads_refuses_a_time_too_large_for_a_float(name: str) -> None:
    store = InMemoryStateStore()
    with pytest.raises(GraphConfigError, match=f"list_threads got {name}=an integer") as caught:
        asyncio.run(store.list_threads(**{name: BIG}))
    assert "0" * 100 not in str(caught.value)
