"""Fixtures of the engine tests: closing the file stores a test opened."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest
from engine_helpers import opened


@pytest.fixture(autouse=True)
def close_opened_stores() -> Iterator[None]:
    """Close the file stores a test opened besides its fixture's (each holds a descriptor)."""
    yield
    while opened:
        anyio.run(opened.pop().aclose)
