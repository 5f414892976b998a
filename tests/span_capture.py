"""Spans the tests read: one OpenTelemetry SDK provider writing into an in-memory exporter.

The ``spans`` fixture (tests/conftest.py) turns nodestep's tracing on into it for one test.
Importing this module skips the importing test module when the SDK is not installed.
"""

from __future__ import annotations

from typing import Any

import pytest

otel_sdk = pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402  (after the skip)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

PROVIDER = otel_sdk.TracerProvider()
EXPORTER = InMemorySpanExporter()
PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTER))


def by_name(exporter: InMemorySpanExporter) -> dict[str, list[Any]]:
    """Return the finished spans by their names, each name's in the order they ended."""
    out: dict[str, list[Any]] = {}
    for span in exporter.get_finished_spans():
        out.setdefault(span.name, []).append(span)
    return out
