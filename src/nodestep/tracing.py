"""Seeing a run from outside: OpenTelemetry spans, and what a thread's model calls cost.

``enable_tracing`` turns on spans for every run (it needs the ``otel`` extra); the log
records of the logger ``nodestep`` need nothing but ``logging``'s own configuration.
``Graph.usage`` returns a ``Usage``: a thread's tokens per node and per model, and their
cost by a price table. See ``docs/tracing.md``.
"""

from nodestep._engine.observe import disable_tracing, enable_tracing
from nodestep._graph.usage import Usage, UsageTotals
from nodestep._public import publish as _publish

__all__ = ["Usage", "UsageTotals", "disable_tracing", "enable_tracing"]

_publish(__name__, __all__, globals())
