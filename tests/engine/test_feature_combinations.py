"""Features of one graph used together: joins, subgraphs, retries, cache, routes, resume.

Each feature has its own tests; these run them in combination, as a user's graph does, on
the memory store and the history file. Every test checks the stored history as well as
the run: the records replay to the position the run had after each commit, the thread
reloads through a new store object with the same state, and a fork from an earlier event
continues to the same end (``check_history``).
"""

from __future__ import annotations

import copy
import functools
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import anyio
import nested_flows
import pytest
from pydantic import BaseModel, Field

from nodestep import (
    END,
    START,
    BaseState,
    CachePolicy,
    CircuitBreaker,
    Command,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    NodeContext,
    RetryPolicy,
    Send,
    add,
    failed,
    interrupt,
    node,
    subgraph,
    when,
)
from nodestep._engine.writer import HistoryWriter
from nodestep._superstep.position import Position
from nodestep._superstep.replay import replay
from nodestep.store import StateStore
from store_helpers import open_file, reopened, spy_on_commits


class Trail(BaseState):
    path: Annotated[list[str], add] = Field(default_factory=list)
    note: str = ""


def stop(name: str, **options: Any) -> Any:
    def visit(state: Trail, ctx: NodeContext) -> dict[str, Any]:
        return {"path": [f"{name}@{ctx.step}"]}

    return node(visit, name=name, **options)


@pytest.fixture(params=["memory", "filesystem"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> StateStore:
    if request.param == "memory":
        return InMemoryStateStore()
    return open_file(tmp_path / "history.jsonl")


@pytest.fixture
def live() -> Iterator[dict[tuple[str, str, int], dict[str, Any]]]:
    """A copy of the writer's position after every commit, by thread, branch and record."""
    kept: dict[tuple[str, str, int], dict[str, Any]] = {}

    def keep(self: HistoryWriter) -> None:
        kept[(self.thread_id, self.branch_id, self.pos.seq)] = comparable(self.pos)

    with pytest.MonkeyPatch.context() as mp:
        spy_on_commits(mp, keep)
        yield kept


def comparable(pos: Position) -> dict[str, Any]:
    fields = {name: getattr(pos, name) for name in Position.__slots__ if name != "run_id"}
    return copy.deepcopy(fields)


def check_history(
    graph: Graph[Any],
    store: StateStore,
    live: dict[tuple[str, str, int], dict[str, Any]],
    thread_id: str = "t",
) -> None:
    """The stored history replays, reloads and time-travels to what the run saw."""
    assert live, "the run committed nothing"
    for (thread, branch, seq), expected in sorted(live.items()):
        if thread != thread_id or branch != "main":
            continue
        records = anyio.run(functools.partial(store.read_tail, thread, branch, at=seq))
        pos = replay(graph.schema, records)
        assert pos is not None
        assert comparable(pos) == expected, f"record {seq}"
    before = graph.get_state_sync(thread_id)
    again = reopened(store)
    after = graph.get_state_sync(thread_id, state_store=again)
    assert after.value == before.value
    assert after.next == before.next
    assert list(after.interrupts) == list(before.interrupts)
    events = graph.history_sync(thread_id, state_store=again).events
    assert events == graph.history_sync(thread_id).events
    # Time travel: every stored state reads back, and a fork from the first planned
    # superstep runs again to the same end when the run had finished.
    steps = list(graph.state_history_sync(thread_id, state_store=again))
    assert {s.event.id for s in steps} <= {e.id for e in events}
    # The first superstep planned since the last input or edit: the fork runs it again.
    starts = ("run_started", "state_updated")
    turn = max((i for i, s in enumerate(steps) if s.event.type in starts), default=0)
    planned = [s for s in steps[turn:] if s.snapshot.status == "running"]
    if before.status == "idle" and planned:
        branch = graph.fork_sync(thread_id, from_=planned[0].event.id, state_store=again).id
        graph.invoke(None, thread_id=thread_id, branch_id=branch, state_store=again)
        forked = graph.get_state_sync(thread_id, branch_id=branch, state_store=again)
        assert forked.value == before.value


def inner_graph(name: str, *nodes: Any) -> Graph[Trail]:
    """A child graph that visits ``nodes`` in a chain."""
    chain: Any = START
    for each in nodes:
        chain = chain >> each
    return Graph(Trail, name=name).flow(chain >> END)


# -- subgraphs and joins -------------------------------------------------------------------


def test_a_subgraph_node_fills_a_join_as_a_source(store: StateStore, live: Any) -> None:
    child = inner_graph("child", stop("c1"), stop("c2"))
    a, b, c = stop("a"), stop("b"), stop("c")
    graph = Graph(Trail, state_store=store).flow(START >> a >> [child, b], [child, b] >> c >> END)
    result = graph.invoke({}, thread_id="t")
    assert result.state.path == ["a@0", "b@1", "c1@0", "c2@1", "c@2"]
    check_history(graph, store, live)


def test_a_subgraph_node_runs_once_as_a_join_target(store: StateStore, live: Any) -> None:
    child = inner_graph("child", stop("c1"))
    a, b, c, d = stop("a"), stop("b"), stop("c"), stop("d")
    graph = Graph(Trail, state_store=store).flow(
        START >> a >> [b, c], c >> d, [b, d] >> child, child >> END
    )
    result = graph.invoke({}, thread_id="t")
    assert result.state.path.count("c1@0") == 1
    assert result.state.path[-1] == "c1@0"
    check_history(graph, store, live)


def test_send_runs_a_subgraph_node_once_per_packet(store: StateStore, live: Any) -> None:
    @node
    def echo(state: Trail) -> dict[str, Any]:
        return {"path": [f"echo:{state.note}"]}

    child = subgraph("child", Graph(Trail, name="inner").flow(START >> echo, echo >> END))

    @node(goto=[child])
    def spread(state: Trail) -> Command:
        return Command(goto=[Send(child, {"note": n}) for n in ("x", "y")])

    graph = Graph(Trail, state_store=store).flow(START >> spread, child >> END)
    result = graph.invoke({}, thread_id="t")
    assert sorted(result.state.path) == ["echo:x", "echo:y"]
    check_history(graph, store, live)


def test_send_to_a_graph_says_to_make_it_a_node_first() -> None:
    inner = inner_graph("inner", stop("c1"))
    with pytest.raises(TypeError, match=r"subgraph\(name, graph\)"):
        Send(inner, {})  # type: ignore[arg-type]


def test_a_deferred_subgraph_node_waits_for_the_other_paths(store: StateStore, live: Any) -> None:
    child = subgraph("report", inner_graph("child", stop("c1")), defer=True)
    a, b, c = stop("a"), stop("b"), stop("c")
    graph = Graph(Trail, state_store=store).flow(
        START >> a >> [b, child], b >> c, c >> child, child >> END
    )
    result = graph.invoke({}, thread_id="t")
    assert result.state.path[-1].startswith("c1@")
    assert result.state.path.count(result.state.path[-1]) == 1
    assert result.state.path.index("c@2") < len(result.state.path) - 1
    check_history(graph, store, live)


# -- resilience, cache and error routes with subgraphs and joins ---------------------------


def test_a_retried_node_inside_a_subgraph_passes_on_its_second_attempt(
    store: StateStore, live: Any
) -> None:
    calls: list[str] = []

    @node(retry=RetryPolicy(attempts=2, backoff=0))
    def flaky(state: Trail) -> dict[str, Any]:
        calls.append("flaky")
        if len(calls) == 1:
            raise ConnectionError("first call drops")
        return {"path": ["flaky"]}

    child = Graph(Trail, name="child").flow(START >> flaky, flaky >> END)
    a = stop("a")
    graph = Graph(Trail, state_store=store).flow(START >> a >> child, child >> END)
    result = graph.invoke({}, thread_id="t")
    assert result.state.path == ["a@0", "flaky"]
    assert calls == ["flaky", "flaky"]
    inside = [e.data["record"] for e in graph.history_sync("t").events if e.type == "subgraph"]
    assert [r["node"] for r in inside if r["type"] == "task_retried"] == ["flaky"]
    check_history(graph, store, live)


def test_a_cached_node_inside_a_subgraph_answers_from_the_cache(
    store: StateStore, live: Any
) -> None:
    calls: list[str] = []

    @node(cache=CachePolicy(key=lambda state: state.note))
    def costly(state: Trail) -> dict[str, Any]:
        calls.append(state.note)
        return {"path": [f"costly:{state.note}"]}

    child = Graph(Trail, name="child").flow(START >> costly, costly >> END)
    graph = Graph(Trail, state_store=store).flow(START >> child, child >> END)
    graph.invoke({"note": "x"}, thread_id="t")
    result = graph.invoke({"note": "x"}, thread_id="t")
    assert result.state.path == ["costly:x", "costly:x"]
    assert calls == ["x"]
    check_history(graph, store, live)


def test_a_breaker_node_fills_a_join(store: StateStore, live: Any) -> None:
    breaker = CircuitBreaker(failures=2, window=60, cooldown=30)
    up = {"now": False}

    @node(breaker=breaker)
    def remote(state: Trail) -> dict[str, Any]:
        if not up["now"]:
            raise ConnectionError("service down")
        return {"path": ["remote"]}

    a, b, d = stop("a"), stop("b"), stop("d")
    graph = Graph(Trail, state_store=store).flow(START >> a >> [remote, b], [remote, b] >> d >> END)
    with pytest.raises(ConnectionError):
        graph.invoke({}, thread_id="t")
    up["now"] = True
    result = graph.invoke(None, thread_id="t")
    assert result.state.path == ["a@0", "b@1", "remote", "d@2"]
    check_history(graph, store, live)


def test_a_subgraph_with_an_error_route_inside_is_a_join_source(
    store: StateStore, live: Any
) -> None:
    @node
    def fragile(state: Trail) -> dict[str, Any]:
        raise ValueError("bad input")

    fallback = stop("fallback")
    guarded = Graph(Trail, name="guarded").flow(
        START >> fragile,
        fragile >> when("$is_error('ValueError')", fallback, otherwise=END),
        fallback >> END,
    )
    a, b, d = stop("a"), stop("b"), stop("d")
    graph = Graph(Trail, state_store=store).flow(
        START >> a >> [guarded, b], [guarded, b] >> d >> END
    )
    result = graph.invoke({}, thread_id="t")
    assert result.state.path == ["a@0", "b@1", "fallback@1", "d@2"]
    check_history(graph, store, live)


def test_an_error_route_on_a_join_source_is_refused_with_the_subgraph_fix() -> None:
    a, b, c, d, fallback = stop("a"), stop("b"), stop("c"), stop("d"), stop("fallback")
    with pytest.raises(GraphConfigError) as info:
        Graph(Trail).flow(
            START >> a >> [b, c],
            [b, c] >> d >> END,
            b >> when(failed(ValueError), fallback, otherwise=END),
            fallback >> END,
        )
    assert "Node 'b' is a source of the join [b, c] >> d and has another edge" in str(info.value)
    assert "make 'b' and its error route a subgraph" in str(info.value)


def test_an_error_route_in_a_subgraph_sends_the_parent_on(store: StateStore, live: Any) -> None:
    @node
    def fragile(state: Trail) -> dict[str, Any]:
        raise KeyError("missing")

    fallback = stop("fallback")
    inner = Graph(Trail, name="inner").flow(
        START >> fragile,
        fragile >> when(failed(KeyError), fallback, otherwise=END),
        fallback >> END,
    )
    after = stop("after")
    graph = Graph(Trail, state_store=store).flow(START >> inner >> after, after >> END)
    result = graph.invoke({}, thread_id="t")
    assert result.state.path == ["fallback@1", "after@1"]
    check_history(graph, store, live)


def test_an_error_route_on_a_subgraph_node_takes_the_child_failure(
    store: StateStore, live: Any
) -> None:
    @node
    def boom(state: Trail) -> dict[str, Any]:
        raise ValueError("boom")

    child = Graph(Trail, name="child").flow(START >> boom, boom >> END)
    fallback = stop("fallback")
    graph = Graph(Trail, state_store=store).flow(
        START >> child,
        child >> when(failed(ValueError), fallback, otherwise=END),
        fallback >> END,
    )
    result = graph.invoke({}, thread_id="t")
    assert result.state.path == ["fallback@1"]
    first = next(e for e in graph.history_sync("t").events if e.type == "superstep_completed")
    assert first.data["tasks"]["child"]["failed"] == {"error": "ValueError", "message": "boom"}
    check_history(graph, store, live)


def test_a_pause_in_a_subgraph_that_a_join_waits_on_resumes_into_the_join(
    store: StateStore, live: Any
) -> None:
    @node
    def ask(state: Trail) -> dict[str, Any]:
        return {"path": [str(interrupt("which?", id="q"))]}

    inner = Graph(Trail, name="inner").flow(START >> ask, ask >> END)
    a, b, d = stop("a"), stop("b"), stop("d")
    graph = Graph(Trail, state_store=store).flow(START >> a >> [inner, b], [inner, b] >> d >> END)
    paused = graph.invoke({}, thread_id="t")
    assert list(paused.interrupts) == ["inner/ask:q"]
    done = graph.invoke(Command(resume="this"), thread_id="t")
    assert done.state.path == ["a@0", "b@1", "this", "d@2"]
    check_history(graph, store, live)


class Seen(BaseModel):
    notes: list[str] = []


def test_private_state_inside_a_subgraph_survives_a_continuation(
    store: StateStore, live: Any
) -> None:
    broken = {"now": True}

    @node(private_state=Seen)
    def remember(state: Trail, seen: Seen) -> dict[str, Any]:
        seen.notes.append(state.note)
        return {"path": [f"seen:{','.join(seen.notes)}"]}

    @node
    def shaky(state: Trail) -> dict[str, Any]:
        if broken["now"]:
            raise RuntimeError("shaky fails once")
        return {"path": ["shaky"]}

    inner = Graph(Trail, name="inner").flow(
        START >> remember >> shaky,
        shaky >> when(lambda s: s.path.count("shaky") < 2, remember, otherwise=END),
    )
    graph = Graph(Trail, state_store=store).flow(START >> inner, inner >> END)
    with pytest.raises(RuntimeError):
        graph.invoke({"note": "x"}, thread_id="t")
    broken["now"] = False
    first = graph.invoke(None, thread_id="t")
    # The second task of ``remember`` read what the first stored before the failure.
    assert first.state.path == ["seen:x", "shaky", "seen:x,x", "shaky"]
    check_history(graph, store, live)


def test_private_state_inside_a_subgraph_starts_again_with_each_run_of_the_subgraph(
    store: StateStore, live: Any
) -> None:
    @node(private_state=Seen)
    def remember(state: Trail, seen: Seen) -> dict[str, Any]:
        seen.notes.append(state.note)
        return {"path": [f"seen:{','.join(seen.notes)}"]}

    inner = Graph(Trail, name="inner").flow(START >> remember, remember >> END)
    graph = Graph(Trail, state_store=store).flow(START >> inner, inner >> END)
    graph.invoke({"note": "x"}, thread_id="t")
    second = graph.invoke({"note": "y"}, thread_id="t")
    assert second.state.path == ["seen:x", "seen:y"]
    check_history(graph, store, live)


# -- update_state(as_node=) on fan-outs and joins; Command(resume=) deep down ---------------


def test_update_as_a_node_whose_edge_fans_out_plans_both_targets(
    store: StateStore, live: Any
) -> None:
    x, a, b = stop("x"), stop("a"), stop("b")
    graph = Graph(Trail, state_store=store).flow(START >> x >> [a, b], [a, b] >> END)
    graph.invoke({}, thread_id="t")
    graph.update_state_sync("t", {"note": "edited"}, as_node=x)
    assert graph.get_state_sync("t").next == ("a", "b")
    result = graph.invoke(None, thread_id="t")
    assert result.state.path == ["x@0", "a@1", "b@1", "a@2", "b@2"]
    assert result.state.note == "edited"
    check_history(graph, store, live)


def test_update_as_a_join_source_arrives_at_the_join(store: StateStore, live: Any) -> None:
    a, b, c, d = stop("a"), stop("b"), stop("c"), stop("d")
    graph = Graph(Trail, state_store=store, interrupt_before=["c"]).flow(
        START >> a >> [b, c], [b, c] >> d >> END
    )
    graph.invoke({}, thread_id="t")  # stops before b and c
    assert set(graph.get_state_sync("t").next) >= {"c"}
    graph.update_state_sync("t", {"note": "as c"}, as_node="c")
    result = graph.invoke(None, thread_id="t")
    assert result.state.path == ["a@0", "b@1", "d@2"]
    assert result.state.note == "as c"
    check_history(graph, store, live)


def test_update_as_a_join_source_after_the_run_does_not_fill_the_join_alone(
    store: StateStore, live: Any
) -> None:
    a, b, c, d = stop("a"), stop("b"), stop("c"), stop("d")
    graph = Graph(Trail, state_store=store).flow(START >> a >> [b, c], [b, c] >> d >> END)
    graph.invoke({}, thread_id="t")
    graph.update_state_sync("t", {"note": "as b"}, as_node=b)
    # A new turn starts with empty barriers: b's arrival alone cannot run d.
    assert graph.get_state_sync("t").next == ()
    check_history(graph, store, live)


def test_update_as_a_failed_join_source_fills_the_join(store: StateStore, live: Any) -> None:
    @node
    def c(state: Trail) -> dict[str, Any]:
        raise RuntimeError("c is down")

    a, b, d = stop("a"), stop("b"), stop("d")
    graph = Graph(Trail, state_store=store).flow(START >> a >> [b, c], [b, c] >> d >> END)
    with pytest.raises(RuntimeError):
        graph.invoke({}, thread_id="t")
    graph.update_state_sync("t", {"note": "as c"}, as_node=c)
    result = graph.invoke(None, thread_id="t")
    assert result.state.path == ["a@0", "b@1", "d@2"]
    check_history(graph, store, live)


def test_update_as_a_failed_fan_out_source_runs_both_targets(store: StateStore, live: Any) -> None:
    @node
    def x(state: Trail) -> dict[str, Any]:
        raise RuntimeError("x is down")

    a, b = stop("a"), stop("b")
    graph = Graph(Trail, state_store=store).flow(START >> x >> [a, b], [a, b] >> END)
    with pytest.raises(RuntimeError):
        graph.invoke({}, thread_id="t")
    graph.update_state_sync("t", {"note": "as x"}, as_node="x")
    result = graph.invoke(None, thread_id="t")
    assert result.state.path == ["a@1", "b@1"]
    check_history(graph, store, live)


def test_command_resume_answers_an_interrupt_three_levels_down(
    store: StateStore, live: Any
) -> None:
    @node
    def sign(state: Trail) -> dict[str, Any]:
        name = interrupt({"sign": state.note}, id="approve")
        return {"path": [f"signed:{name}"]}

    legal = Graph(Trail, name="legal").flow(START >> sign, sign >> END)
    review = Graph(Trail, name="review").flow(START >> legal, legal >> END)
    desk = Graph(Trail, name="desk").flow(START >> review, review >> END)
    archive = stop("archive")
    top = Graph(Trail, state_store=store).flow(START >> desk >> archive, archive >> END)
    paused = top.invoke({"note": "NDA"}, thread_id="t")
    assert list(paused.interrupts) == ["desk/review/legal/sign:approve"]
    done = top.invoke(Command(resume="Ada"), thread_id="t")
    assert done.status == "completed"
    assert done.state.path == ["signed:Ada", "archive@1"]
    check_history(top, store, live)


# -- streams of subgraphs ------------------------------------------------------------------


def chatty_graphs(store: StateStore) -> Graph[Trail]:
    @node
    def speak(state: Trail, ctx: NodeContext) -> dict[str, Any]:
        for word in ("hel", "lo"):
            ctx.emit(word, mode="messages")
        return {"path": ["speak"]}

    inner = Graph(Trail, name="inner").flow(START >> speak, speak >> END)
    middle = Graph(Trail, name="middle").flow(START >> inner, inner >> END)
    a, b = stop("a"), stop("b")
    return Graph(Trail, state_store=store).flow(START >> a >> [middle, b], [middle, b] >> END)


def test_task_updates_of_nested_subgraphs_name_their_path(store: StateStore, live: Any) -> None:
    graph = chatty_graphs(store)
    seen = [
        (e.path, e.node, e.data)
        for e in graph.stream({}, thread_id="t", stream_mode="task_updates", subgraphs=True)
        if e.mode == "task_updates"
    ]
    assert ("middle/inner", "speak", {"path": ["speak"]}) in seen
    assert ("middle", "inner", {"path": ["speak"]}) in seen
    assert (None, "middle", {"path": ["speak"]}) in seen
    assert (None, "b", {"path": ["b@1"]}) in seen
    assert seen.index(("middle/inner", "speak", {"path": ["speak"]})) < seen.index(
        (None, "middle", {"path": ["speak"]})
    )
    check_history(graph, store, live)


def test_messages_of_a_nested_subgraph_stream_with_their_path(store: StateStore, live: Any) -> None:
    graph = chatty_graphs(store)
    events = list(graph.stream({}, thread_id="t", stream_mode="messages", subgraphs=True))
    words = [(e.path, e.node, e.data) for e in events if e.mode == "messages"]
    assert words == [("middle/inner", "speak", "hel"), ("middle/inner", "speak", "lo")]
    without = chatty_graphs(InMemoryStateStore())
    flat = [
        e for e in without.stream({}, thread_id="u", stream_mode="messages") if e.mode == "messages"
    ]
    # Without subgraphs=True the child's messages are not shown.
    assert flat == []
    check_history(graph, store, live)


# -- a kill -9 mid-superstep in a graph with a join and a subgraph --------------------------

CRASH_SCRIPT = """
import os
import sys
from nodestep import FilesystemStateStore
from nested_flows import joined

graph = joined(FilesystemStateStore(sys.argv[1]))
if sys.argv[2] == "start":  # a task's update is sent once its task_finished is stored
    for event in graph.stream({}, thread_id="doc-1", stream_mode="task_updates"):
        if event.node == "quick":
            os.write(1, b"quick is stored\\n")  # one write: slow's thread prints meanwhile
else:
    result = graph.invoke(None, thread_id="doc-1")
    print(result.status, result.state.log)
"""


def _process(path: Path, action: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CRASH_SCRIPT, str(path), action],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_a_kill_inside_a_subgraph_that_a_join_waits_on_continues_with_invoke_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    history, ledger = tmp_path / "h.jsonl", tmp_path / "ledger.txt"
    here = Path(__file__).resolve().parent
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(here.parents[1] / "src"), str(here)]),
        "LEDGER": str(ledger),
    }
    first = _process(history, "start", {**env, "SLOW_HOLDS": "1"})
    assert first.stdout is not None
    # Killed inside slow, once quick's task_finished is stored: quick shares the
    # superstep with the subgraph and must not wait for it to be recorded.
    said = {first.stdout.readline(), first.stdout.readline()}
    assert said == {"slow is running\n", "quick is stored\n"}, first.communicate()[1]
    os.kill(first.pid, signal.SIGKILL)
    first.communicate(timeout=30)
    assert first.returncode == -signal.SIGKILL

    second = _process(history, "continue", env)
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    assert out.strip() == "completed ['intake', 'draft', 'slow', 'quick', 'close']"
    # Only the killed task ran again; the join ran its target once.
    ran = ledger.read_text().split()
    assert sorted(ran) == ["close", "draft", "intake", "quick", "slow", "slow"]

    # The history in this process: it replays to the state the run ended with, and a fork
    # from the superstep the kill stopped runs it again to the same end.
    monkeypatch.setenv("LEDGER", "")
    store = open_file(history)
    graph = nested_flows.joined(store)
    now = graph.get_state_sync("doc-1")
    pos = replay(graph.schema, anyio.run(functools.partial(store.read, "doc-1", "main")))
    assert pos is not None and pos.values == now.value.model_dump()
    steps = list(graph.state_history_sync("doc-1"))
    stopped = [s for s in steps if "drafting" in s.snapshot.next]
    branch = graph.fork_sync("doc-1", from_=stopped[0].event.id).id
    assert graph.invoke(None, thread_id="doc-1", branch_id=branch).state == now.value


def test_subgraph_defer_takes_a_bool() -> None:
    with pytest.raises(TypeError, match="takes True or False, got 'yes'"):
        subgraph("late", inner_graph("inner", stop("c1")), defer="yes")  # type: ignore[arg-type]
