"""A memory store's ``ttl=`` refuses an integer too large for a float with a clear error.

``10**400`` passes ``0 < ttl < math.inf`` (Python compares an int with a float exactly),
and then ``float(ttl)`` raised a raw ``OverflowError``; now it is refused as ``inf`` is.
"""

from __future__ import annotations

from typing import Any

import pytest

from nodestep import GraphConfigError
from nodestep.memory import InMemoryMemoryStore

BIG = 10**400


@pytest.mark.parametrize("value", [BIG, float("inf"), 0, True], ids=["10**400", "inf", "0", "True"])
def test_store_ttl_refuses_what_is_no_positive_finite_number(value: Any) -> None:
    with pytest.raises(GraphConfigError, match="ttl= takes seconds") as caught:
        InMemoryMemoryStore(ttl=value)
    assert "0" * 100 not in str(caught.value)


def test_put_ttl_refuses_an_integer_too_large_for_a_float() -> None:
    store = InMemoryMemoryStore()
    with pytest.raises(GraphConfigError, match="got an integer larger than a float holds"):
        store.put_sync(("a",), "k", {"v": 1}, ttl=BIG)
