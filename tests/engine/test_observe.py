"""A run's log records and OpenTelemetry spans: what they say, how spans nest, no secrets."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel, Field, SecretStr

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    NodeContext,
    Send,
    interrupt,
    node,
)
from nodestep._engine.observe import model_span, run_watch, tool_span
from nodestep.testing import sequential_ids
from nodestep.tracing import disable_tracing, enable_tracing

otel_sdk = pytest.importorskip("opentelemetry.sdk.trace")  # the module is skipped without it
from opentelemetry import trace  # noqa: E402  (after the skip)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from span_capture import PROVIDER  # noqa: E402

KEY = "sk-live-7e2b94d1"


class S(BaseState):
    count: int = 0
    seen: list[str] = Field(default_factory=list)


class Deps(BaseModel):
    api_key: SecretStr


@node
def count(state: S) -> dict[str, Any]:
    return {"count": state.count + 1}


@node
def leak(state: S, ctx: NodeContext) -> dict[str, Any]:
    raise PermissionError(f"key={ctx.context.api_key.get_secret_value()} refused")


@pytest.fixture
def records() -> Iterator[list[logging.LogRecord]]:
    """Every record of the logger ``nodestep`` at DEBUG while the test runs."""
    got: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            got.append(record)

    logger = logging.getLogger("nodestep")
    keep = Keep()
    logger.addHandler(keep)
    logger.setLevel(logging.DEBUG)
    yield got
    logger.removeHandler(keep)
    logger.setLevel(logging.NOTSET)


TEST_TRACER = PROVIDER.get_tracer("tests")  # a user's own spans, beside nodestep's


def _graph(*flow: Any) -> Graph[S]:
    return Graph(S, name="g", state_store=InMemoryStateStore(), id_factory=sequential_ids()).flow(
        *flow
    )


def test_a_run_logs_its_start_and_end_at_info_and_its_steps_at_debug(
    records: list[logging.LogRecord],
) -> None:
    graph = _graph(START >> count, count >> END)
    graph.invoke({}, thread_id="t1")
    info = [(r.name, r.getMessage()) for r in records if r.levelno == logging.INFO]
    assert info == [
        ("nodestep.run", "graph 'g' starts a run on thread 't1', branch 'main'"),
        ("nodestep.run", "graph 'g': the run on thread 't1', branch 'main' completed"),
    ]
    debug = [r for r in records if r.levelno == logging.DEBUG]
    assert {r.name for r in debug} == {"nodestep.run", "nodestep.store"}
    task = next(r for r in debug if "node 'count' starts" in r.getMessage())
    assert (task.thread_id, task.branch_id, task.step, task.node) == ("t1", "main", 0, "count")  # type: ignore[attr-defined]
    done = next(r for r in debug if "superstep 0 completed" in r.getMessage())
    stored = [e.id for e in graph.history_sync("t1") if e.type == "superstep_completed"]
    assert done.event_id == stored[0]  # type: ignore[attr-defined]
    assert all(r.run_id == task.run_id for r in records if hasattr(r, "run_id"))  # type: ignore[attr-defined]


def test_a_paused_run_and_a_failed_one_say_so_at_info(records: list[logging.LogRecord]) -> None:
    @node
    def ask(state: S) -> dict[str, Any]:
        return {"seen": [interrupt("ok?", id="ok")]}

    _graph(START >> ask, ask >> END).invoke({}, thread_id="p")
    with pytest.raises(PermissionError):
        _graph(START >> leak, leak >> END).invoke(
            {}, thread_id="f", context=Deps(api_key=SecretStr(KEY))
        )
    ends = [r for r in records if getattr(r, "outcome", None)]
    assert [(r.thread_id, r.outcome) for r in ends] == [("p", "paused"), ("f", "failed")]  # type: ignore[attr-defined]
    assert ends[1].error_type == "PermissionError"  # type: ignore[attr-defined]


def test_no_record_holds_a_context_secret_or_a_state_value(
    records: list[logging.LogRecord],
) -> None:
    graph = _graph(START >> leak, leak >> END)
    with pytest.raises(PermissionError):
        graph.invoke(
            {"seen": ["private-note"]}, thread_id="s", context=Deps(api_key=SecretStr(KEY))
        )
    assert records
    for record in records:
        text = record.getMessage() + repr(record.__dict__)
        assert KEY not in text
        assert "private-note" not in text
    failed = records[-1].getMessage()
    assert "PermissionError: key=" in failed and "refused" in failed  # masked, not dropped


def test_nothing_is_logged_or_watched_when_the_level_is_off() -> None:
    got: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            got.append(record)

    logger = logging.getLogger("nodestep")
    keep = Keep()
    logger.addHandler(keep)
    logger.setLevel(logging.WARNING)
    try:
        _graph(START >> count, count >> END).invoke({}, thread_id="quiet")
        # A run keeps no watch at all: its supersteps and tasks test one attribute.
        assert run_watch("g", "quiet", "main", "run-1") is None
    finally:
        logger.removeHandler(keep)
        logger.setLevel(logging.NOTSET)
    assert got == []


def test_untraced_model_and_tool_calls_record_nothing_and_let_errors_pass() -> None:
    with model_span("m", "p", streamed=False) as call:
        assert call.span is None
        call.replied("m", 1, 2, "stop")  # records nothing, and does not fail
    with pytest.raises(ValueError, match="the tool's own"), tool_span("t", "call-1"):
        raise ValueError("the tool's own")
    with pytest.raises(KeyError), model_span("m", None, streamed=True):
        raise KeyError("the model's own")


def _tree(exporter: InMemorySpanExporter) -> list[tuple[int, str]]:
    """The finished spans as (depth, name), parents before children, by start time."""
    finished = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    depth: dict[int, int] = {}
    out = []
    for span in finished:
        assert span.context is not None
        parent = span.parent.span_id if span.parent else None
        depth[span.context.span_id] = depth.get(parent, -1) + 1 if parent else 0
        out.append((depth[span.context.span_id], span.name))
    return out


def test_spans_nest_run_superstep_node_and_carry_the_ids(spans: InMemorySpanExporter) -> None:
    graph = _graph(START >> count, count >> END)
    graph.invoke({}, thread_id="t1")
    assert _tree(spans) == [
        (0, "nodestep.run g"),
        (1, "nodestep.superstep 0"),
        (2, "nodestep.node count"),
    ]
    by_name = {s.name: s for s in spans.get_finished_spans()}
    run = by_name["nodestep.run g"].attributes or {}
    assert (run["nodestep.thread_id"], run["nodestep.branch_id"]) == ("t1", "main")
    assert run["nodestep.outcome"] == "completed"
    step = by_name["nodestep.superstep 0"].attributes or {}
    stored = [e.id for e in graph.history_sync("t1") if e.type == "superstep_completed"]
    assert step["nodestep.event_id"] == stored[0]
    task = by_name["nodestep.node count"].attributes or {}
    assert (task["nodestep.node"], task["nodestep.step"], task["nodestep.run_id"]) == (
        "count",
        0,
        run["nodestep.run_id"],
    )


def test_a_plain_node_on_a_worker_thread_nests_its_own_spans_under_its_node(
    spans: InMemorySpanExporter,
) -> None:
    threads: dict[str, int] = {}

    def traced_work(name: str) -> None:
        threads[name] = threading.get_ident()
        # The current span is the node's, on this worker thread too.
        with TEST_TRACER.start_as_current_span(f"work {name}"):
            pass

    @node(goto=["work"])
    def fan(state: S) -> Any:
        return Command(goto=[Send("work", {"seen": [n]}) for n in ("a", "b")])

    @node
    def work(state: S) -> dict[str, Any]:
        traced_work(state.seen[-1])
        return {}

    graph = _graph(START >> fan, work >> END)
    graph.invoke({}, thread_id="fan")
    assert set(threads.values()) != {threading.get_ident()}  # they ran on worker threads
    finished = {s.context.span_id: s for s in spans.get_finished_spans() if s.context}
    for name in ("a", "b"):
        mine = next(s for s in finished.values() if s.name == f"work {name}")
        assert mine.parent is not None
        parent = finished[mine.parent.span_id]
        assert parent.name == "nodestep.node work"
        grandparent = finished[parent.parent.span_id]  # type: ignore[union-attr]
        assert grandparent.name == "nodestep.superstep 1"


def test_a_failing_node_marks_its_span_and_the_runs_with_the_masked_error(
    spans: InMemorySpanExporter,
) -> None:
    graph = _graph(START >> leak, leak >> END)
    with pytest.raises(PermissionError):
        graph.invoke({}, thread_id="x", context=Deps(api_key=SecretStr(KEY)))
    by_name = {s.name: s for s in spans.get_finished_spans()}
    for name in ("nodestep.node leak", "nodestep.run g"):
        span = by_name[name]
        assert span.status.status_code == trace.StatusCode.ERROR
        event = span.events[0]
        assert event.name == "exception"
        assert (event.attributes or {})["exception.type"] == "PermissionError"
        assert "refused" in str((event.attributes or {})["exception.message"])
        assert KEY not in repr(span.to_json())
    assert (by_name["nodestep.run g"].attributes or {})["nodestep.outcome"] == "failed"


def test_a_run_inside_a_callers_span_is_its_child(spans: InMemorySpanExporter) -> None:
    with TEST_TRACER.start_as_current_span("request") as outer:
        _graph(START >> count, count >> END).invoke({}, thread_id="c")
    run = next(s for s in spans.get_finished_spans() if s.name == "nodestep.run g")
    assert run.parent is not None and run.parent.span_id == outer.get_span_context().span_id


def test_disable_tracing_stops_the_spans(spans: InMemorySpanExporter) -> None:
    disable_tracing()
    _graph(START >> count, count >> END).invoke({}, thread_id="off")
    assert spans.get_finished_spans() == ()


def test_enable_tracing_without_the_extra_names_the_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.trace", None)  # import fails
    with pytest.raises(GraphConfigError, match=r"pip install 'nodestep\[otel\]'"):
        enable_tracing()


def test_a_subgraphs_run_nests_under_its_node_in_the_parents_trace(
    spans: InMemorySpanExporter,
) -> None:
    child = Graph(S, name="child").flow(START >> count, count >> END)
    parent = _graph(START >> child, child >> END)
    parent.invoke({}, thread_id="nested")
    assert _tree(spans) == [
        (0, "nodestep.run g"),
        (1, "nodestep.superstep 0"),
        (2, "nodestep.node child"),
        (3, "nodestep.run child"),
        (4, "nodestep.superstep 0"),
        (5, "nodestep.node count"),
    ]
