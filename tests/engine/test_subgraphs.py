"""Subgraphs: a compiled graph as a node of another graph, its history in the parent's thread."""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Annotated, Any

import anyio
import pytest
from nested_flows import Doc, desk
from pydantic import Field

from nodestep import (
    END,
    PARENT,
    START,
    BaseState,
    Command,
    Graph,
    GraphConfigError,
    GraphExecutionError,
    GraphTimeoutError,
    InMemoryStateStore,
    NodeContext,
    Resume,
    RunLimitExceededError,
    Send,
    UnknownThreadError,
    add,
    interrupt,
    node,
    subgraph,
)
from nodestep.store import Record, StateStore
from store_helpers import records_sync


class Tape(BaseState):
    log: Annotated[list[str], add] = Field(default_factory=list)
    note: str = ""


ran: Counter[str] = Counter()


@pytest.fixture(autouse=True)
def fresh_counts() -> None:
    ran.clear()


def step(name: str) -> Any:
    @node(name=name)
    def body(state: Tape) -> dict[str, Any]:
        ran[name] += 1
        return {"log": [name]}

    return body


def ask(name: str = "ask") -> Any:
    @node(name=name)
    def body(state: Tape) -> dict[str, Any]:
        answer = interrupt({"seen": state.log}, id="ok")
        ran[name] += 1
        return {"log": [f"{name} {answer}"], "note": answer}

    return body


def two_level(store: StateStore | None, inner_nodes: list[Any], **sub: Any) -> Graph[Tape]:
    """``before >> <child of inner_nodes in a row> >> after``, the child named ``inner``."""
    edges = [START >> inner_nodes[0]]
    edges += [a >> b for a, b in itertools.pairwise(inner_nodes)]
    inner = Graph(Tape, name="inner").flow(*edges, inner_nodes[-1] >> END)
    child = subgraph("inner", inner, **sub) if sub else inner
    before, after = step("before"), step("after")
    return Graph(Tape, name="outer", state_store=store).flow(
        START >> before, before >> child, child >> after, after >> END
    )


def inner_kinds(rows: list[Record]) -> list[str]:
    """Each record's type; a subgraph record as ``task/.../inner type``."""
    out = []
    for row in rows:
        path, body = [], row
        while body["type"] == "subgraph":
            path.append(body["task"])
            body = body["record"]
        out.append("/".join([*path, body["type"]]))
    return out


# -- running ----------------------------------------------------------------------------------


def test_a_graph_used_as_a_node_runs_its_flow_and_returns_what_it_added() -> None:
    graph = two_level(None, [step("a"), step("b")])
    result = graph.invoke({"log": ["in"]})
    assert result.state.log == ["in", "before", "a", "b", "after"]
    assert result.step == 2  # before, inner, after: the child counts as one task


def test_the_childs_records_are_stored_in_the_parents_thread_under_its_task() -> None:
    store = InMemoryStateStore()
    two_level(store, [step("a"), step("b")]).invoke({}, thread_id="t")
    assert inner_kinds(records_sync(store, "t")) == [
        "checkpoint",
        "run_started",
        "superstep_completed",
        "inner/checkpoint",
        "inner/run_started",
        "inner/superstep_completed",
        "inner/superstep_completed",
        "inner/run_completed",
        "superstep_completed",
        "superstep_completed",
        "run_completed",
    ]


def test_history_shows_a_child_event_with_its_path_and_record() -> None:
    store = InMemoryStateStore()
    graph = two_level(store, [step("a")])
    graph.invoke({}, thread_id="t")
    events = graph.history_sync("t").events
    child = [e for e in events if e.type == "subgraph"]
    assert [(e.path, e.record["type"]) for e in child] == [
        ("inner", "checkpoint"),
        ("inner", "run_started"),
        ("inner", "superstep_completed"),
        ("inner", "run_completed"),
    ]
    assert all(e.path is None and e.record == e.data for e in events if e.type != "subgraph")


def test_history_paths_name_every_level_down_to_the_run_that_recorded_the_event() -> None:
    graph = desk(InMemoryStateStore())
    graph.invoke({}, thread_id="t")
    paths = [e.path for e in graph.history_sync("t").events if e.type == "subgraph"]
    assert paths[:2] == ["review", "review"]  # review's checkpoint and run_started
    assert "review/legal" in paths
    assert set(paths) == {"review", "review/legal"}


def test_a_child_starts_from_its_defaults_with_the_parents_values_each_time() -> None:
    @node
    def count(state: Tape) -> dict[str, Any]:
        return {"log": [f"saw {len(state.log)}"]}

    inner = Graph(Tape, name="inner").flow(START >> count, count >> END)
    graph = Graph(Tape, name="outer", state_store=InMemoryStateStore()).flow(
        START >> inner, inner >> END
    )
    graph.invoke({"log": ["x"]}, thread_id="t")
    result = graph.invoke({"log": ["y"]}, thread_id="t")
    assert result.state.log == ["x", "saw 1", "y", "saw 3"]


# -- interrupts ---------------------------------------------------------------------------------


def test_an_interrupt_in_a_child_pauses_the_parent_under_the_task_path() -> None:
    graph = two_level(InMemoryStateStore(), [step("a"), ask()])
    paused = graph.invoke({}, thread_id="t")
    assert paused.status == "interrupted"
    pending = paused.interrupts["inner/ask:ok"]
    assert (pending.id, pending.node, pending.task_id) == ("ok", "ask", "inner/ask")
    assert pending.payload == {"seen": ["before", "a"]}
    done = graph.invoke(None, thread_id="t", resume=Resume("yes"))
    assert done.state.log == ["before", "a", "ask yes", "after"]
    assert done.state.note == "yes"
    assert ran == {"before": 1, "a": 1, "ask": 1, "after": 1}


def test_an_interrupt_three_levels_down_is_answered_by_its_path() -> None:
    graph = desk(InMemoryStateStore())
    paused = graph.invoke({}, thread_id="t")
    assert list(paused.interrupts) == ["review/legal/sign:sign"]
    done = graph.invoke(
        None, thread_id="t", resume=Resume(answers={"review/legal/sign:sign": "ok"})
    )
    assert done.state == Doc(
        log=["intake", "prep", "draft", "slow", "signed ok", "close"], verdict="ok"
    )


def test_a_child_that_pauses_twice_takes_each_answer_once() -> None:
    @node
    def twice(state: Tape) -> dict[str, Any]:
        first = interrupt("first?", id="one")
        second = interrupt("second?", id="two")
        return {"log": [f"{first} {second}"]}

    graph = two_level(InMemoryStateStore(), [twice])
    assert list(graph.invoke({}, thread_id="t").interrupts) == ["inner/twice:one"]
    again = graph.invoke(None, thread_id="t", resume=Resume("1"))
    assert list(again.interrupts) == ["inner/twice:two"]
    done = graph.invoke(None, thread_id="t", resume=Resume("2"))
    assert done.state.log == ["before", "1 2", "after"]


def test_sent_tasks_of_one_subgraph_pause_under_their_own_task_ids() -> None:
    @node
    def asking(state: Tape) -> dict[str, Any]:
        return {"log": [f"{state.note} {interrupt(state.note, id='ok')}"]}

    inner = Graph(Tape, name="inner").flow(START >> asking, asking >> END)
    review = subgraph("review", inner)

    @node(goto=[review])
    def fan(state: Tape) -> Command:
        return Command(goto=[Send(review, {"note": "one"}), Send(review, {"note": "two"})])

    graph = Graph(Tape, name="outer", state_store=InMemoryStateStore()).flow(
        START >> fan, review >> END
    )
    paused = graph.invoke({}, thread_id="t")
    assert {k: i.payload for k, i in paused.interrupts.items()} == {
        "review/asking:ok": "one",
        "review[1]/asking:ok": "two",
    }
    done = graph.invoke(
        None,
        thread_id="t",
        resume=Resume(answers={"review/asking:ok": "A", "review[1]/asking:ok": "B"}),
    )
    assert done.state.log == ["one A", "two B"]


def test_an_interrupt_in_a_child_without_a_store_says_it_needs_one() -> None:
    graph = two_level(None, [ask()])
    with pytest.raises(GraphExecutionError, match="no state store"):
        graph.invoke({})


# -- continuing -------------------------------------------------------------------------------


def test_a_failed_child_superstep_continues_without_running_its_finished_tasks() -> None:
    service = {"up": False}

    @node
    def flaky(state: Tape) -> dict[str, Any]:
        ran["flaky"] += 1
        if not service["up"]:
            raise ConnectionError("down")
        return {"log": ["flaky"]}

    steady = step("steady")

    @node(goto=[flaky, steady])
    def split(state: Tape) -> Command:
        return Command(goto=[flaky, steady])

    inner = Graph(Tape, name="inner").flow(START >> split, flaky >> END, steady >> END)
    graph = Graph(Tape, name="outer", state_store=InMemoryStateStore()).flow(
        START >> inner, inner >> END
    )
    with pytest.raises(ConnectionError):
        graph.invoke({}, thread_id="t")
    assert graph.get_state_sync("t").status == "failed"
    service["up"] = True
    result = graph.invoke(None, thread_id="t")
    assert result.state.log == ["flaky", "steady"]
    assert ran == {"flaky": 2, "steady": 1}


class FailOnce(InMemoryStateStore):
    """A memory store whose append fails once, when it holds a record of ``kind`` at the top."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind: str | None = kind

    async def append(self, thread_id: str, branch_id: str, records: Any, *, after: int) -> Any:
        if self.kind is not None and any(r["type"] == self.kind for r in records):
            self.kind = None
            raise OSError("disk full")
        return await super().append(thread_id, branch_id, records, after=after)


def test_a_child_that_completed_before_its_task_was_stored_does_not_run_again() -> None:
    store = FailOnce("superstep_completed")  # the parent's, after the child's records
    inner_step = step("a")
    inner = Graph(Tape, name="inner").flow(START >> inner_step, inner_step >> END)
    graph = Graph(Tape, name="outer", state_store=store).flow(START >> inner, inner >> END)
    with pytest.raises(OSError, match="disk full"):
        graph.invoke({}, thread_id="t")
    assert ran == {"a": 1}
    result = graph.invoke(None, thread_id="t")
    assert result.state.log == ["a"]
    assert ran == {"a": 1}


@pytest.mark.slow
def test_a_parent_timeout_inside_a_child_stops_it_and_a_continuation_finishes_it() -> None:
    hang = {"on": True}

    @node
    async def slow(state: Tape) -> dict[str, Any]:
        ran["slow"] += 1
        if hang["on"]:
            await anyio.sleep(30)  # real time: what the parent's timeout of 0.2 s must cut short
        return {"log": ["slow"]}

    first = step("a")
    inner = Graph(Tape, name="inner").flow(START >> first, first >> slow, slow >> END)
    graph = Graph(Tape, name="outer", state_store=InMemoryStateStore(), timeout=0.2)
    graph.flow(START >> inner, inner >> END)
    with pytest.raises(GraphTimeoutError):
        graph.invoke({}, thread_id="t")
    kinds = inner_kinds(records_sync(graph.state_store, "t"))  # type: ignore[arg-type]
    assert kinds[-2:] == ["inner/run_stopped", "run_failed"]
    hang["on"] = False
    assert graph.invoke(None, thread_id="t").state.log == ["a", "slow"]
    assert ran == {"a": 1, "slow": 2}


def test_a_failed_store_append_inside_a_child_fails_the_run_and_a_continuation_redoes_it() -> None:
    store = FailOnce("subgraph")  # the child's first records
    graph = two_level(store, [step("a")])
    with pytest.raises(OSError, match="disk full"):
        graph.invoke({}, thread_id="t")
    kinds = inner_kinds(records_sync(store, "t"))
    assert kinds[-1] == "run_failed" and not any("inner/" in k for k in kinds)
    assert graph.invoke(None, thread_id="t").state.log == ["before", "a", "after"]
    assert ran == {"before": 1, "a": 1, "after": 1}


# -- reading and forking --------------------------------------------------------------------------


def test_get_state_of_a_paused_parent_names_the_subgraph_task_and_the_path_key() -> None:
    graph = two_level(InMemoryStateStore(), [step("a"), ask()])
    graph.invoke({}, thread_id="t")
    snapshot = graph.get_state_sync("t")
    assert snapshot.status == "paused"
    assert snapshot.next == ("inner",)
    assert list(snapshot.interrupts) == ["inner/ask:ok"]
    assert snapshot.value.log == ["before"]


def test_a_fork_at_a_child_event_continues_the_child_from_there() -> None:
    store = InMemoryStateStore()
    graph = two_level(store, [step("a"), step("b"), step("c")])
    graph.invoke({}, thread_id="t")
    events = graph.history_sync("t").events
    after_a = next(
        e for e in events if e.type == "subgraph" and e.record["type"] == "superstep_completed"
    )
    assert graph.load_sync("t", at=after_a.id) == {"log": ["before"], "note": ""}
    branch = graph.fork_sync("t", from_=after_a.id, name="again")
    assert graph.get_state_sync("t", branch_id=branch.id).next == ("inner",)
    ran.clear()
    result = graph.invoke(None, thread_id="t", branch_id=branch.id)
    assert result.state.log == ["before", "a", "b", "c", "after"]
    assert ran == {"b": 1, "c": 1, "after": 1}  # a finished before the fork point


def test_a_fork_at_the_childs_first_checkpoint_runs_the_child_from_its_start() -> None:
    graph = two_level(InMemoryStateStore(), [step("a"), step("b")])
    graph.invoke({}, thread_id="t")
    events = graph.history_sync("t").events
    first = next(e for e in events if e.type == "subgraph")
    assert first.record["type"] == "checkpoint"
    branch = graph.fork_sync("t", from_=first.id)
    ran.clear()
    result = graph.invoke(None, thread_id="t", branch_id=branch.id)
    assert result.state.log == ["before", "a", "b", "after"]
    assert ran == {"a": 1, "b": 1, "after": 1}


def test_subgraph_state_reads_a_paused_child_at_every_level() -> None:
    graph = desk(InMemoryStateStore())
    graph.invoke({}, thread_id="t")
    review = anyio.run(graph.subgraph_state, "t", "review")
    assert (review.status, review.next, list(review.interrupts)) == (
        "paused",
        ("legal",),
        ["legal/sign:sign"],
    )
    assert review.value == Doc(log=["intake", "prep"])
    legal = anyio.run(graph.subgraph_state, "t", "review/legal")
    assert (legal.status, legal.next, list(legal.interrupts)) == (
        "paused",
        ("sign",),
        ["sign:sign"],
    )
    assert legal.value == Doc(log=["intake", "prep", "draft", "slow"])


def test_subgraph_state_at_an_event_and_its_refusals() -> None:
    graph = desk(InMemoryStateStore())
    graph.invoke({}, thread_id="t")
    events = graph.history_sync("t").events
    first_step = next(
        e for e in events if e.path == "review/legal" and e.record["type"] == "superstep_completed"
    )
    early = anyio.run(graph.subgraph_state, "t", "review/legal", first_step.id)
    assert (early.status, early.next, early.value.log) == (
        "running",
        ("slow",),
        ["intake", "prep", "draft"],
    )
    with pytest.raises(GraphConfigError, match="'intake' in path 'intake' is not a subgraph"):
        anyio.run(graph.subgraph_state, "t", "intake")
    graph.invoke(None, thread_id="t", resume=Resume("ok"))
    with pytest.raises(UnknownThreadError, match="no unfinished subgraph run at 'review'"):
        anyio.run(graph.subgraph_state, "t", "review/legal")


# -- streaming --------------------------------------------------------------------------------


def test_a_stream_with_subgraphs_includes_the_childs_events_with_their_path() -> None:
    graph = desk(InMemoryStateStore())
    seen = [
        (e.path, e.node, e.step)
        for e in graph.stream({}, thread_id="t", stream_mode="updates", subgraphs=True)
        if e.mode == "updates"
    ]
    assert seen == [
        (None, "intake", 0),
        ("review", "prep", 0),
        ("review/legal", "draft", 0),
        ("review/legal", "slow", 1),
    ]


def test_custom_events_of_a_child_beside_a_sibling_task_reach_the_stream_with_their_path() -> None:
    @node
    def talk(state: Tape, ctx: NodeContext) -> dict[str, Any]:
        ctx.emit(f"hello from {ctx.graph_name}")
        return {"log": ["talk"]}

    inner = Graph(Tape, name="inner").flow(START >> talk, talk >> END)
    child, side = subgraph("chat", inner), step("side")

    @node(goto=[child, side])
    def split(state: Tape) -> Command:
        return Command(goto=[child, side])

    graph = Graph(Tape, name="outer", state_store=InMemoryStateStore()).flow(
        START >> split, child >> END, side >> END
    )
    events = graph.stream({}, thread_id="t", stream_mode=["custom", "updates"], subgraphs=True)
    seen = sorted((e.mode, str(e.path), e.node, str(e.data)) for e in events if e.node)
    assert seen == [
        ("custom", "chat", "talk", "hello from inner"),
        ("updates", "None", "chat", "{'log': ['talk']}"),
        ("updates", "None", "side", "{'log': ['side']}"),
        ("updates", "None", "split", "None"),
        ("updates", "chat", "talk", "{'log': ['talk']}"),
    ]


def test_a_stream_without_subgraphs_has_only_the_parents_events() -> None:
    graph = two_level(None, [step("a")])
    seen = [(e.path, e.node) for e in graph.stream({}, stream_mode="updates")]
    assert seen == [(None, "before"), (None, "inner"), (None, "after"), (None, None)]


def test_a_stream_closed_inside_a_child_continues_without_running_its_finished_tasks() -> None:
    graph = two_level(InMemoryStateStore(), [step("a"), step("b"), step("c")])
    events = graph.stream({}, thread_id="t", stream_mode="updates", subgraphs=True)
    for event in events:
        if event.node == "b":
            break
    events.close()  # type: ignore[attr-defined]
    assert graph.get_state_sync("t").next == ("inner",)
    result = graph.invoke(None, thread_id="t")
    assert result.state.log == ["before", "a", "b", "c", "after"]
    assert ran == {"before": 1, "a": 1, "b": 1, "c": 1, "after": 1}


# -- limits -----------------------------------------------------------------------------------


def test_a_childs_supersteps_count_against_its_own_max_steps() -> None:
    chain = [step(n) for n in "abcde"]
    edges = [START >> chain[0], *(x >> y for x, y in itertools.pairwise(chain))]
    inner = Graph(Tape, name="inner", max_steps=5).flow(*edges, chain[-1] >> END)
    graph = Graph(Tape, name="outer", max_steps=1).flow(START >> inner, inner >> END)
    assert graph.invoke({}).state.log == list("abcde")  # five child steps, one parent step

    short = Graph(Tape, name="short", max_steps=4).flow(*edges, chain[-1] >> END)
    outer = Graph(Tape, name="outer").flow(START >> short, short >> END)
    with pytest.raises(RunLimitExceededError, match="Graph 'short' needed more than max_steps=4"):
        outer.invoke({})


# -- Command(graph=PARENT) ----------------------------------------------------------------------


def test_command_to_the_parent_routes_in_the_parent_and_updates_its_state() -> None:
    @node
    def triage(state: Tape) -> Command:
        ran["triage"] += 1
        return Command(graph=PARENT, goto="escalate", update={"note": "urgent"})

    never = step("never")
    inner = Graph(Tape, name="inner").flow(START >> triage, triage >> never, never >> END)
    escalate, after = step("escalate"), step("after")
    child = subgraph("inner", inner, goto=[escalate])
    graph = Graph(Tape, name="outer", state_store=InMemoryStateStore()).flow(
        START >> child, child >> after, after >> END, escalate >> END
    )
    result = graph.invoke({}, thread_id="t")
    assert result.state.log == ["escalate"]
    assert result.state.note == "urgent"
    assert ran == {"triage": 1, "escalate": 1}


def test_command_to_the_parent_needs_the_target_declared_on_the_subgraph() -> None:
    @node
    def triage(state: Tape) -> Command:
        return Command(graph=PARENT, goto="escalate")

    inner = Graph(Tape, name="inner").flow(START >> triage, triage >> END)
    escalate = step("escalate")
    graph = Graph(Tape, name="outer").flow(START >> inner, inner >> escalate, escalate >> END)
    with pytest.raises(GraphExecutionError, match="escalate"):
        graph.invoke({})


def test_command_to_the_parent_from_a_top_level_graph_says_there_is_no_parent() -> None:
    @node
    def lonely(state: Tape) -> Command:
        return Command(graph=PARENT, goto=END)

    graph = Graph(Tape, name="solo").flow(START >> lonely, lonely >> END)
    with pytest.raises(GraphExecutionError, match="'solo' is not running as a subgraph"):
        graph.invoke({})


def test_command_takes_only_parent_as_its_graph() -> None:
    with pytest.raises(TypeError, match="takes PARENT"):
        Command(graph="parent", goto=END)  # type: ignore[arg-type]
    assert repr(Command(goto="x", graph=PARENT)) == "Command(update=None, goto=['x'], graph=PARENT)"


# -- other state classes ------------------------------------------------------------------------


class Ticket(BaseState):
    text: str = ""
    replies: Annotated[list[str], add] = Field(default_factory=list)
    status: str = "open"


class Reply(BaseState):
    question: str = ""
    answer: str = ""
    replies: Annotated[list[str], add] = Field(default_factory=list)


@node
def respond(state: Reply) -> dict[str, Any]:
    return {"answer": f"re: {state.question}", "replies": [f"re: {state.question}"]}


replier = Graph(Reply, name="replier").flow(START >> respond, respond >> END)


def test_shared_fields_flow_in_and_their_changes_flow_back() -> None:
    @node
    def seed(state: Ticket) -> dict[str, Any]:
        return {"replies": ["first"]}

    child = subgraph("reply", replier, share=["replies"])
    graph = Graph(Ticket).flow(START >> seed, seed >> child, child >> END)
    result = graph.invoke({"text": "help"})
    assert result.state.replies == ["first", "re: "]  # question was not shared


def test_state_in_and_state_out_map_other_fields() -> None:
    child = subgraph(
        "reply",
        replier,
        state_in=lambda t: {"question": t.text},
        state_out=lambda r: {"replies": [r.answer], "status": "answered"},
    )
    graph = Graph(Ticket).flow(START >> child, child >> END)
    result = graph.invoke({"text": "help"})
    assert (result.state.replies, result.state.status) == (["re: help"], "answered")


def test_state_out_must_return_a_dict() -> None:
    child = subgraph("reply", replier, state_in=lambda t: {}, state_out=lambda r: r.answer)
    graph = Graph(Ticket).flow(START >> child, child >> END)
    with pytest.raises(TypeError, match="state_out= function returns a dict"):
        graph.invoke({})


# -- outside a run ----------------------------------------------------------------------------


def test_the_node_function_of_a_subgraph_runs_only_in_a_run() -> None:
    child = subgraph("reply", replier)
    with pytest.raises(GraphExecutionError, match="only as a node of a running graph"):
        anyio.run(child.fn, Reply())
