"""Fixtures every test directory shares: the event loop back ends, the stores, and closing
the file stores a test opened.

Async tests are marked ``pytest.mark.anyio`` (most modules set ``pytestmark``); anyio's
pytest plugin then runs each of them once per back end in ``anyio_backend``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from backends import BACKENDS, STORES
from nodestep.store import StateStore
from store_helpers import opened


@pytest.fixture(params=BACKENDS)
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The event loop an async test runs on: once asyncio, once trio."""
    return str(request.param)


@pytest.fixture(params=list(STORES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
    """The store a test runs against: once of each kind in ``STORES``."""
    store = STORES[request.param](tmp_path)
    yield store
    anyio.run(store.aclose)


@pytest.fixture(autouse=True)
def close_opened_stores() -> Iterator[None]:
    """Close the file stores a test opened besides its fixture's (each holds a descriptor)."""
    yield
    while opened:
        anyio.run(opened.pop().aclose)


@pytest.fixture
def spans() -> Iterator[Any]:
    """Tracing on, into ``span_capture``'s in-memory exporter, while the test runs; the
    test is skipped without the OpenTelemetry SDK."""
    from nodestep.tracing import disable_tracing, enable_tracing
    from span_capture import EXPORTER, PROVIDER

    EXPORTER.clear()
    enable_tracing(PROVIDER)
    yield EXPORTER
    disable_tracing()
