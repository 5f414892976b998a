"""What a run shows outside itself: ``logging`` records and OpenTelemetry spans.

Records go to the logger ``nodestep`` (``nodestep.run`` for runs, supersteps and tasks,
``nodestep.store`` for commits): INFO when a run starts and ends (completed, paused,
stopped or failed), DEBUG for each superstep and task. Each record carries the ids as
``extra`` fields (``thread_id``, ``branch_id``, ``run_id``, and ``step``, ``node``,
``task_id``, ``event_id`` where they apply), and never a state or context value: a
failure is named by its type and its stored message, with the context's secrets masked
as the history masks them.

Spans come when tracing is on (``enable_tracing``, which needs the ``otel`` extra): one
per run, with a child per superstep, each with a child per task (``nodestep.node``), and
the model and tool calls of the agent layer inside their node's span
(``model_span``/``tool_span``), whose failures are masked as the run's stored ones are (the
task's span context carries the run's masking). A task of a plain ``def`` node runs on a
worker thread, where the loop's context is not: its span names its superstep's span as its
parent, so the nesting holds on any thread.

Why a run pays nothing when both are off: the run asks the logger and the tracer once,
when it starts, and keeps ``None`` for its ``RunWatch``; the loop and the tasks then test
one attribute per superstep and per task.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import anyio

from nodestep._errors import GraphConfigError

__all__ = [
    "ModelCall",
    "RunWatch",
    "TaskWatch",
    "disable_tracing",
    "enable_tracing",
    "model_span",
    "run_watch",
    "tool_span",
    "tracer",
]

run_log = logging.getLogger("nodestep.run")
store_log = logging.getLogger("nodestep.store")

Masked = Callable[[BaseException], tuple[str, str]]
"""Gives the stored type name and message of an error, secrets masked."""

_tracer: Any = None  # the OpenTelemetry tracer while tracing is on, else None
_trace: Any = None  # opentelemetry.trace, once tracing was turned on
_context: Any = None  # opentelemetry.context, the same


def _otel_trace() -> Any:
    try:
        return importlib.import_module("opentelemetry.trace")
    except ImportError:
        raise GraphConfigError(
            "Tracing needs the OpenTelemetry API, which is not installed. Install the "
            "extra: pip install 'nodestep[otel]'"
        ) from None


def enable_tracing(tracer_provider: Any = None) -> None:
    """Turn on OpenTelemetry spans for every run in this process.

    Each run is a span (``nodestep.run <graph>``) with a child per superstep
    (``nodestep.superstep <n>``), each with a child per task (``nodestep.node <name>``);
    a model node's call (``chat <model>``) and a tool call (``execute_tool <tool>``) are
    children of their node's span. The ids of the thread, branch, run and events are span
    attributes, and model spans follow the GenAI semantic conventions (see
    ``docs/tracing.md``).

    Args:
        tracer_provider: The OpenTelemetry ``TracerProvider`` to make spans with; ``None``
            takes the global one (``opentelemetry.trace.set_tracer_provider``).

    Raises:
        GraphConfigError: the ``opentelemetry-api`` package is not installed (the
            ``otel`` extra).
    """
    global _tracer, _trace, _context
    _trace = _otel_trace()
    _context = importlib.import_module("opentelemetry.context")
    _tracer = _trace.get_tracer("nodestep", _version(), tracer_provider=tracer_provider)


def _version() -> str | None:
    try:
        return importlib.metadata.version("nodestep")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a source tree
        return None


def disable_tracing() -> None:
    """Turn spans off again; runs already under way finish their spans."""
    global _tracer
    _tracer = None


def tracer() -> Any:
    """Return the tracer while tracing is on, else ``None``."""
    return _tracer


def _ids(thread_id: str, branch_id: str, run_id: str) -> dict[str, Any]:
    return {"thread_id": thread_id, "branch_id": branch_id, "run_id": run_id}


_MASKED = "nodestep.masked"  # the OpenTelemetry context key of the running task's ``Masked``


def _call_failed(span: Any, error: Exception) -> None:
    """Record a model or tool call's failure on ``span``, masked as its run stores errors:
    the message may quote the call's context or credentials (a tool that read them)."""
    masked: Masked | None = _context.get_value(_MASKED)
    kind, message = (type(error).__name__, str(error)) if masked is None else masked(error)
    _failed(span, kind, message)


def _failed(span: Any, kind: str, message: str) -> None:
    """Record a failure on ``span`` from its stored (masked) form, never the exception.

    ``record_exception`` would store ``str(error)`` and the traceback's locals-free text,
    which may hold a secret the stored form masks.
    """
    span.add_event("exception", {"exception.type": kind, "exception.message": message})
    span.set_status(_trace.Status(_trace.StatusCode.ERROR, f"{kind}: {message}"))


class TaskWatch:
    """One task's span, made current on the thread the task runs on."""

    __slots__ = ("failure", "span", "token")

    def __init__(self, span: Any, token: object) -> None:
        self.span = span
        self.token = token
        self.failure: tuple[str, str] | None = None


class RunWatch:
    """The records and spans of one run; ``None`` on a run when both are off.

    Args:
        masked: Returns the stored type name and message of an error (secrets masked).
    """

    def __init__(
        self,
        graph: str,
        ids: dict[str, Any],
        masked: Masked,
        tracer: Any,
        debug: bool,
    ) -> None:
        self.graph = graph
        self.ids = ids
        self.masked = masked
        self.tracer = tracer
        self.debug = debug
        self.run_span: Any = None
        self.step_span: Any = None
        self.step_context: Any = None
        if tracer is not None:
            attributes = {f"nodestep.{k}": v for k, v in ids.items()}
            attributes["nodestep.graph"] = graph
            # The caller's current span, if any, is its parent (a subgraph's: its node's).
            self.run_span = tracer.start_span(f"nodestep.run {graph}", attributes=attributes)

    def started(self, continuing: bool) -> None:
        """Say the run started (INFO)."""
        how = "continues" if continuing else "starts"
        ids = self.ids
        run_log.info(
            "graph %r %s a run on thread %r, branch %r",
            self.graph,
            how,
            ids["thread_id"],
            ids["branch_id"],
            extra=ids,
        )

    def superstep(self, step: int, nodes: list[str]) -> None:
        """Open superstep ``step`` (closing the one before): its span and DEBUG record."""
        self._close_step()
        if self.debug:
            extra = {**self.ids, "step": step}
            run_log.debug("superstep %d runs %s", step, ", ".join(nodes), extra=extra)
        if self.tracer is not None:
            trace = _trace
            attributes = {f"nodestep.{k}": v for k, v in self.ids.items()}
            attributes["nodestep.step"] = step
            self.step_span = self.tracer.start_span(
                f"nodestep.superstep {step}",
                context=trace.set_span_in_context(self.run_span),
                attributes=attributes,
            )
            self.step_context = trace.set_span_in_context(self.step_span)

    def step_done(self, step: int, event_id: str | None) -> None:
        """Record that superstep ``step`` completed as event ``event_id``."""
        if self.debug:
            extra = {**self.ids, "step": step, "event_id": event_id}
            run_log.debug("superstep %d completed, event %s", step, event_id, extra=extra)
        if self.step_span is not None and event_id is not None:
            self.step_span.set_attribute("nodestep.event_id", event_id)
        self._close_step()

    def _close_step(self) -> None:
        if self.step_span is not None:
            self.step_span.end()
            self.step_span = self.step_context = None

    def task(self, node: str, task_id: str, step: int, attempt: int) -> TaskWatch | None:
        """Open a task's span and make it current on this thread; DEBUG record."""
        if self.debug:
            extra = {**self.ids, "step": step, "node": node, "task_id": task_id}
            run_log.debug("step %d: node %r starts (task %s)", step, node, task_id, extra=extra)
        if self.tracer is None:
            return None
        trace = _trace
        attributes = {f"nodestep.{k}": v for k, v in self.ids.items()}
        attributes |= {
            "nodestep.node": node,
            "nodestep.task_id": task_id,
            "nodestep.step": step,
            "nodestep.attempt": attempt,
        }
        parent = self.step_context or trace.set_span_in_context(self.run_span)
        span = self.tracer.start_span(f"nodestep.node {node}", parent, attributes=attributes)
        # The run's masking travels with the span: a model or tool call inside the task
        # records its failure as the run would store it (``_call_failed``).
        current = _context.set_value(_MASKED, self.masked, trace.set_span_in_context(span))
        return TaskWatch(span, _context.attach(current))

    def task_failed(self, seen: TaskWatch | None, error: BaseException) -> None:
        """Note that the task raised ``error`` (recorded when its span ends)."""
        if seen is not None:
            seen.failure = self.masked(error)

    def task_done(self, seen: TaskWatch | None, node: str, task_id: str, step: int) -> None:
        """Close the task's span, on the thread that opened it."""
        if self.debug:
            extra = {**self.ids, "step": step, "node": node, "task_id": task_id}
            run_log.debug("step %d: node %r ended (task %s)", step, node, task_id, extra=extra)
        if seen is None:
            return
        _context.detach(seen.token)
        if seen.failure is not None:
            _failed(seen.span, *seen.failure)
        seen.span.end()

    def raised(self, error: BaseException) -> None:
        """Say that the run ended by raising ``error``: stopped (a cancellation, an
        interrupt of the process) or failed."""
        if isinstance(error, anyio.get_cancelled_exc_class() | KeyboardInterrupt | SystemExit):
            self.ended("stopped")
        else:
            self.ended("failed", error)

    def ended(self, how: str, error: BaseException | None = None) -> None:
        """Say how the run ended (INFO) and close its spans.

        Args:
            how: ``"completed"``, ``"paused"``, ``"stopped"`` or ``"failed"``.
            error: What failed the run.
        """
        self._close_step()
        extra = {**self.ids, "outcome": how}
        where = (self.graph, extra["thread_id"], extra["branch_id"])
        if error is None:
            run_log.info("graph %r: the run on thread %r, branch %r %s", *where, how, extra=extra)
        else:
            kind, message = self.masked(error)
            extra |= {"error_type": kind}
            run_log.info(
                "graph %r: the run on thread %r, branch %r failed: %s: %s",
                *where,
                kind,
                message,
                extra=extra,
            )
        if self.run_span is not None:
            self.run_span.set_attribute("nodestep.outcome", how)
            if error is not None:
                _failed(self.run_span, *self.masked(error))
            self.run_span.end()


def _unmasked(error: BaseException) -> tuple[str, str]:  # pragma: no cover - replaced
    return type(error).__name__, ""


def run_watch(graph: str, thread_id: str, branch_id: str, run_id: str) -> RunWatch | None:
    """Return a run's ``RunWatch``, or ``None`` when its logger and tracing are off.

    A span of the caller's (current) context becomes the run span's parent. The caller
    sets ``masked``, which gives the stored (masked) form of an error.
    """
    tracer = _tracer
    if tracer is None and not run_log.isEnabledFor(logging.INFO):
        return None
    ids = _ids(thread_id, branch_id, run_id)
    debug = run_log.isEnabledFor(logging.DEBUG)
    return RunWatch(graph, ids, _unmasked, tracer, debug)


class ModelCall:
    """A model call's span: the reply's usage and finish reason are set on it."""

    __slots__ = ("span",)

    def __init__(self, span: Any) -> None:
        self.span = span

    def replied(
        self,
        model: str | None,
        input_tokens: int | None,
        output_tokens: int | None,
        finish_reason: str | None,
    ) -> None:
        """Set the reply's attributes (GenAI semantic conventions) on the span."""
        span = self.span
        if span is None:
            return
        if model:
            span.set_attribute("gen_ai.response.model", model)
        if input_tokens is not None:
            span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
        if output_tokens is not None:
            span.set_attribute("gen_ai.usage.output_tokens", output_tokens)
        if finish_reason:
            span.set_attribute("gen_ai.response.finish_reasons", (finish_reason,))


class _Untraced:
    """What ``model_span`` and ``tool_span`` give while tracing is off: one shared object
    whose ``with`` yields a ``ModelCall`` that records nothing.

    Why not the generator's own ``with``: an agent's turn makes three such calls (W10),
    and a ``contextmanager`` costs a generator and its object on each.
    """

    __slots__ = ()

    def __enter__(self) -> ModelCall:
        return _NO_CALL

    def __exit__(self, *exc: object) -> None:
        return None


_NO_CALL = ModelCall(None)
_UNTRACED = _Untraced()


def model_span(
    model: str, provider: str | None, streamed: bool
) -> AbstractContextManager[ModelCall]:
    """Trace one chat model call as a child of the current span (the node's).

    Without tracing, yields a ``ModelCall`` that records nothing.
    """
    tracer = _tracer
    if tracer is None:
        return _UNTRACED
    return _model_span(tracer, model, provider, streamed)


@contextmanager
def _model_span(
    tracer: Any, model: str, provider: str | None, streamed: bool
) -> Iterator[ModelCall]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        "nodestep.streamed": streamed,
    }
    if provider:
        attributes["gen_ai.provider.name"] = provider
        attributes["gen_ai.system"] = provider  # the older convention's name, still read
    with tracer.start_as_current_span(
        f"chat {model}",
        kind=_trace.SpanKind.CLIENT,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield ModelCall(span)
        except Exception as error:
            _call_failed(span, error)
            raise


def tool_span(name: str, call_id: str) -> AbstractContextManager[object]:
    """Trace one tool call as a child of the current span (the tool node's)."""
    tracer = _tracer
    if tracer is None:
        return _UNTRACED
    return _tool_span(tracer, name, call_id)


@contextmanager
def _tool_span(tracer: Any, name: str, call_id: str) -> Iterator[None]:
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
    }
    with tracer.start_as_current_span(
        f"execute_tool {name}",
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield
        except Exception as error:
            _call_failed(span, error)
            raise
