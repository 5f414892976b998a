"""The stores the command line's tests write threads to: each local kind, and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from postgres_server import throwaway_database


@pytest.fixture(params=["file", "sqlite"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store URL of each local kind, for a store in ``tmp_path``."""
    if request.param == "file":
        return f"file://{tmp_path}/history.jsonl"
    return f"sqlite://{tmp_path}/history.db"


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A new, empty database of the tests' PostgreSQL server (skips without one)."""
    with throwaway_database() as url:
        yield url
