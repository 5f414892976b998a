"""Replay: a stored thread's calls made again through the current graph, on every store.

An unchanged graph replays clean; a deliberately changed node, router or default is
caught at the first event it changes, with the node, the field and both values; threads
with an interrupt, a fork, an edit ``as_node``, a breakpoint and a failed run replay too;
with ``recorded=True`` an agent replays without calling its model or its tools.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    MessagesState,
    NodeContext,
    Resume,
    ScriptedModel,
    ScriptedReply,
    Send,
    UnknownThreadError,
    add,
    create_react_agent,
    interrupt,
    model_node,
    node,
    tool,
    when,
)
from nodestep.agents import tool_node
from nodestep.store import StateStore
from nodestep.testing import Divergence, ReplayReport, replay, replay_sync

pytestmark = pytest.mark.anyio


class Review(BaseState):
    topic: str = ""
    drafts: Annotated[list[str], add] = Field(default_factory=list)
    verdict: str = ""


def review_graph(
    store: StateStore | None, *, mark: str = "", strict: bool = False
) -> Graph[Review]:
    """The review flow; ``mark`` changes what ``write`` writes, ``strict`` the verdict."""

    @node
    async def write(state: Review) -> dict[str, Any]:
        return {"drafts": [f"a post on {state.topic}{mark}"]}

    @node(goto=[write])
    def plan(state: Review) -> Command:
        return Command(goto=[Send(write, {"topic": topic}) for topic in ("tea", "cake")])

    @node
    def review(state: Review) -> dict[str, Any]:
        answer = interrupt({"drafts": state.drafts}, id="verdict")
        return {"verdict": answer.upper() if strict else answer}

    return Graph(Review, state_store=store).flow(START >> plan, write >> review, review >> END)


async def forked_thread(store: StateStore) -> None:
    """Store thread 't': a run to the pause, an edit, the answer; a fork answered 'reject'."""
    graph = review_graph(store)
    await graph.ainvoke({"topic": "food"}, thread_id="t")
    await graph.update_state("t", {"topic": "desserts"})
    paused = (await graph.state_history("t")).last_pause()
    assert paused is not None
    await graph.ainvoke(None, thread_id="t", resume=Resume("publish"))
    await graph.fork("t", from_=paused.event.id, name="alt")
    await graph.ainvoke(None, thread_id="t", branch_id="alt", resume=Resume("reject"))


async def test_an_unchanged_graph_replays_clean(store: StateStore) -> None:
    await forked_thread(store)

    for branch in ("main", "alt"):
        report = await replay(review_graph(None), store, "t", branch_id=branch)
        assert isinstance(report, ReplayReport)
        assert report.clean, report
        assert report.divergence is None and report.calls >= 2 and report.events > 0


async def test_a_changed_node_is_caught_at_its_first_write(store: StateStore) -> None:
    await forked_thread(store)
    events = {e.sequence: e for e in await review_graph(store).history("t")}

    report = await replay(review_graph(None, mark="!"), store, "t")

    found = report.divergence
    assert isinstance(found, Divergence)
    assert (found.node, found.field, found.event_type) == ("write", "drafts", "task_finished")
    assert found.old[0].startswith("a post on") and found.new == [found.old[0] + "!"]
    assert found.sequence is not None and events[found.sequence].id == found.event_id
    assert found.branch_id == "main" and report.calls == 1


async def test_a_change_after_an_interrupt_is_caught_on_the_fork(store: StateStore) -> None:
    await forked_thread(store)

    report = await replay(review_graph(None, strict=True), store, "t", branch_id="alt")

    found = report.divergence
    assert found is not None
    assert (found.node, found.field, found.old, found.new) == (
        "review",
        "verdict",
        "reject",
        "REJECT",
    )
    assert (found.branch_id, found.event_type) == ("alt", "superstep_completed")
    assert 'node review wrote verdict = "reject"; the new version writes "REJECT"' in str(report)


async def test_a_changed_router_is_caught_where_it_routes_elsewhere(store: StateStore) -> None:
    await forked_thread(store)

    @node
    async def write(state: Review) -> dict[str, Any]:
        return {"drafts": [f"a post on {state.topic}"]}

    @node(goto=[write])
    def plan(state: Review) -> Command:  # the new version writes about one topic only
        return Command(goto=[Send(write, {"topic": "tea"})])

    changed = Graph(Review).flow(START >> plan, write >> END)

    found = (await replay(changed, store, "t")).divergence

    assert found is not None
    assert (found.node, found.field, found.event_type) == ("plan", None, "superstep_completed")
    assert len(found.old) == 2 and len(found.new) == 1


class Defaults(BaseState):
    n: int = 0


class NewDefaults(BaseState):
    n: int = 5


@node
def bump(state: Any) -> dict[str, Any]:
    return {"n": state.n + 1}


async def test_a_changed_default_is_caught_at_the_opening_checkpoint(store: StateStore) -> None:
    await (
        Graph(Defaults, state_store=store)
        .flow(START >> bump, bump >> END)
        .ainvoke({}, thread_id="t")
    )

    found = (
        await replay(Graph(NewDefaults).flow(START >> bump, bump >> END), store, "t")
    ).divergence

    assert found is not None
    assert (found.index, found.event_type, found.field, found.old, found.new) == (
        1,
        "checkpoint",
        "n",
        0,
        5,
    )


class Steps(BaseState):
    log: Annotated[list[str], add] = Field(default_factory=list)


@node
def first(state: Steps) -> dict[str, Any]:
    return {"log": ["first"]}


@node
def second(state: Steps) -> dict[str, Any]:
    return {"log": ["second"]}


def steps_graph(store: StateStore | None) -> Graph[Steps]:
    return Graph(Steps, state_store=store).flow(START >> first, first >> second, second >> END)


async def test_a_breakpoint_and_an_edit_as_node_replay_clean(store: StateStore) -> None:
    graph = steps_graph(store)
    await graph.ainvoke({}, thread_id="t", interrupt_before=["second"])
    await graph.update_state("t", {"log": ["by hand"]}, as_node="second")
    await graph.ainvoke(None, thread_id="t")
    await graph.ainvoke({"log": ["again"]}, thread_id="t")

    report = await replay(steps_graph(None), store, "t")

    assert report.clean, report
    assert report.calls == 4


class Flaky(BaseState):
    tries: int = 0


async def test_a_stored_failure_replays_clean_when_the_node_still_fails(store: StateStore) -> None:
    @node
    def breaks(state: Flaky) -> dict[str, Any]:
        raise ConnectionError("the service is down")

    graph = Graph(Flaky, state_store=store).flow(START >> breaks, breaks >> END)
    with pytest.raises(ConnectionError):
        await graph.ainvoke({}, thread_id="t")

    @node(name="breaks")
    def fixed(state: Flaky) -> dict[str, Any]:
        return {"tries": 1}

    still = await replay(Graph(Flaky).flow(START >> breaks, breaks >> END), store, "t")
    mended = await replay(Graph(Flaky).flow(START >> fixed, fixed >> END), store, "t")

    assert still.clean, still
    found = mended.divergence
    assert found is not None
    assert (found.node, found.event_type, found.old, found.new) == (
        "breaks",
        "run_failed",
        "run_failed",
        "superstep_completed",
    )


@tool
def stock(item: str) -> str:
    """Tell how many of an item are in stock.

    Args:
        item: The item.
    """
    return f"12 {item}s"


def script() -> list[Any]:
    return [ScriptedReply(tool_calls=[("stock", {"item": "fuse"})]), "We have 12 fuses."]


async def test_recorded_outputs_replay_an_agent_without_its_model_or_tools(
    store: StateStore,
) -> None:
    agent = create_react_agent(ScriptedModel(script()), [stock], state_store=store)
    await agent.ainvoke({"messages": "Fuses in stock?"}, thread_id="t")

    @tool(name="stock")
    def down(item: str) -> str:
        """Fail: the stock service is down.

        Args:
            item: The item.
        """
        raise AssertionError("a recorded replay called the tool")

    silent = create_react_agent(ScriptedModel([]), [down], system="A new prompt.")

    recorded = await replay(silent, store, "t", recorded=True)
    live = await replay(silent, store, "t")

    assert recorded.clean, recorded
    assert recorded.recorded and "recorded model and tool outputs" in str(recorded)
    assert not live.clean  # live, the empty script has no reply to give


async def test_recorded_outputs_still_catch_a_changed_router(store: StateStore) -> None:
    agent = create_react_agent(ScriptedModel(script()), [stock], state_store=store)
    await agent.ainvoke({"messages": "Fuses in stock?"}, thread_id="t")
    model = model_node(ScriptedModel([]))
    tools = tool_node([stock], name="tools")
    # the new router never sees the tool calls: every reply ends the run
    changed = Graph(MessagesState).flow(
        START >> model, model >> when(lambda state: False, tools, otherwise=END), tools >> model
    )

    found = (await replay(changed, store, "t", recorded=True)).divergence

    assert found is not None
    assert (found.node, found.field, found.event_type) == ("agent", None, "superstep_completed")
    assert (found.old, found.new) == (["tools"], [])


async def test_to_json_str_and_repr_are_plain_and_short(store: StateStore) -> None:
    await forked_thread(store)

    clean = await replay(review_graph(None), store, "t")
    broken = await replay(review_graph(None, mark="!"), store, "t")

    assert repr(clean) == "ReplayReport('t', branch='main', clean)"
    assert str(clean).endswith("; no divergence")
    found = broken.divergence
    assert found is not None and found.index in (4, 5)  # the task_finished of write, in
    # either order: the two write tasks finish in whatever order the event loop runs them
    assert repr(broken) == f"ReplayReport('t', branch='main', diverges at {found.index})"
    assert repr(found).startswith(f"Divergence(index={found.index}, event_type='task_finished'")
    data = broken.to_json()
    assert data["clean"] is False and data["divergence"]["field"] == "drafts"
    assert json.loads(json.dumps(data)) == data
    assert clean.to_json()["divergence"] is None


def test_replay_sync_gives_what_replay_gives() -> None:
    store = InMemoryStateStore()
    steps_graph(store).invoke({}, thread_id="t")

    report = replay_sync(steps_graph(None), store, "t")

    assert report.clean and report.calls == 1


async def test_an_unknown_thread_or_branch_is_named(store: StateStore) -> None:
    await forked_thread(store)

    with pytest.raises(UnknownThreadError, match="Thread 'nope' has no history"):
        await replay(review_graph(None), store, "nope")
    with pytest.raises(UnknownThreadError, match="on branch 'ghost'"):
        await replay(review_graph(None), store, "t", branch_id="ghost")


async def test_a_graph_without_a_flow_or_no_graph_is_refused_before_any_run() -> None:
    store = InMemoryStateStore()
    await forked_thread(store)

    with pytest.raises(GraphConfigError, match="has no flow yet"):
        await replay(Graph(Review), store, "t")
    with pytest.raises(GraphConfigError, match=r"replay takes the graph to test.*got dict"):
        await replay({}, store, "t")  # type: ignore[arg-type]


async def test_a_run_whose_stream_was_closed_ends_the_replay_with_a_note(
    store: StateStore,
) -> None:
    graph = steps_graph(store)
    await graph.ainvoke({}, thread_id="t")
    stream = graph.astream({"log": ["again"]}, thread_id="t", stream_mode="updates")
    async for _ in stream:
        break  # the run stops after its first superstep, where the reader closed it
    await stream.aclose()
    stopped = [e for e in await graph.history("t") if e.type == "run_stopped"]
    assert [e.data["reason"] for e in stopped] == ["stream_closed"]

    report = await replay(steps_graph(None), store, "t")

    assert report.clean and report.calls == 1
    assert report.note is not None and "stopped there (stream_closed)" in report.note
    assert report.to_json()["note"] == report.note and report.note in str(report)


async def test_a_fork_in_the_middle_of_a_run_replays_clean(store: StateStore) -> None:
    graph = steps_graph(store)
    await graph.ainvoke({}, thread_id="t")
    before_second = (await graph.state_history("t")).before("second")
    assert before_second is not None
    branch = await graph.fork("t", from_=before_second.event.id, name="again")
    await graph.update_state("t", {"log": ["between"]}, branch_id=branch.id)
    await graph.ainvoke(None, thread_id="t", branch_id=branch.id)

    report = await replay(steps_graph(None), store, "t", branch_id="again")

    assert report.clean, report
    assert report.calls == 3  # the parent's run, the edit on the fork, its continuation


async def test_a_change_after_a_fork_in_the_middle_of_a_run_is_caught_on_the_fork(
    store: StateStore,
) -> None:
    graph = steps_graph(store)
    await graph.ainvoke({}, thread_id="t")
    before_second = (await graph.state_history("t")).before("second")
    assert before_second is not None
    branch = await graph.fork("t", from_=before_second.event.id, name="again")
    await graph.ainvoke(None, thread_id="t", branch_id=branch.id)

    @node(name="second")
    def changed(state: Steps) -> dict[str, Any]:
        return {"log": ["changed"]}

    new = Graph(Steps).flow(START >> first, first >> changed, changed >> END)
    found = (await replay(new, store, "t", branch_id="again")).divergence

    assert found is not None  # the parent's run already differs, before the fork
    assert (found.branch_id, found.node, found.old, found.new) == (
        "main",
        "second",
        ["second"],
        ["changed"],
    )


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("call"), st.sampled_from(["tea", "cake", "pie"])),
        st.tuples(st.just("edit"), st.sampled_from(["tea", "cake", "pie"])),
        st.tuples(st.just("fork"), st.integers(min_value=0, max_value=1_000)),
    ),
    max_size=8,
)


async def random_thread(ops: list[tuple[str, Any]]) -> tuple[StateStore, list[str]]:
    """Store thread 't' made by ``ops``: runs and answers, edits, forks anywhere."""
    store = InMemoryStateStore()
    graph = review_graph(store)
    await graph.ainvoke({"topic": "food"}, thread_id="t")
    branch, made = "main", ["main"]
    for kind, arg in ops:
        if kind == "call":
            paused = (await graph.get_state("t", branch_id=branch)).status == "paused"
            answer = {"resume": Resume(arg)} if paused else {}
            await graph.ainvoke(
                None if paused else {"topic": arg}, thread_id="t", branch_id=branch, **answer
            )
        elif kind == "edit":
            await graph.update_state("t", {"topic": arg}, branch_id=branch)
        else:
            events = (await graph.history("t", branch_id=branch)).events
            event = events[arg % len(events)]
            if event.type == "checkpoint" and event.sequence > 1:
                continue  # a fork's own opening: its parent's event is the place to fork
            branch = (await graph.fork("t", from_=event.id, name=f"b{len(made)}")).id
            made.append(branch)
    return store, made


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_every_branch_of_a_random_thread_replays_clean_and_a_changed_node_is_caught(
    ops: list[tuple[str, Any]],
) -> None:
    async def check() -> None:
        store, branches = await random_thread(ops)
        for branch in branches:
            same = await replay(review_graph(None), store, "t", branch_id=branch)
            assert same.clean, (branch, same)
            changed = await replay(review_graph(None, mark="!"), store, "t", branch_id=branch)
            found = changed.divergence
            state = await review_graph(store).get_state("t", branch_id=branch)
            if state.value.drafts:  # write ran in the branch's history: the change shows
                assert found is not None
            # it may show before the fork too: a run the fork cut is replayed whole
            assert found is None or (found.node, found.field) == ("write", "drafts")

    anyio.run(check)


class Runs(BaseState):
    seen: list[str] = Field(default_factory=list)


def runs_graph(store: StateStore | None, *, twice: bool = False) -> Graph[Runs]:
    """A node that writes every run's id so far, whole; ``twice``: its own twice."""

    @node
    def note_run(state: Runs, ctx: NodeContext) -> dict[str, Any]:
        mine = [ctx.run_id, ctx.run_id] if twice else [ctx.run_id]
        return {"seen": [*state.seen, *mine]}

    return Graph(Runs, state_store=store).flow(START >> note_run, note_run >> END)


async def test_run_ids_a_node_wrote_read_as_the_replayed_runs() -> None:
    # A run's id is new at each run: a replay maps each stored run's id to its own
    # run's, in later calls too, so only a real change diverges.
    store = InMemoryStateStore()
    graph = runs_graph(store)
    for _ in range(3):
        await graph.ainvoke({}, thread_id="r")
    report = await replay(graph, store, "r")
    assert report.clean, report
    assert report.calls == 3
    found = await replay(runs_graph(None, twice=True), store, "r")
    assert not found.clean and found.divergence is not None
    assert found.divergence.field == "seen"


class Tally(BaseState):
    n: int = 0
    note: str = ""


def tally_graph(store: StateStore | None, *, step: int = 1, run: int = 30) -> Graph[Tally]:
    """Counts up by ``step`` for ``run`` supersteps a run: long runs, so a prune cuts one."""

    @node(goto=["count", END])
    def count(state: Tally) -> Command:
        more = state.n % run != run - step
        return Command(update={"n": state.n + step}, goto="count" if more else END)

    return Graph(Tally, max_steps=100, state_store=store).flow(START >> count)


async def test_a_pruned_thread_replays_from_where_its_history_is_kept(store: StateStore) -> None:
    # The prune cuts the second run: its end is taken as stored, the later calls are made
    # again, on main and on a fork made after the cut (numbered as the stored thread).
    graph = tally_graph(store)
    for note in "abcd":
        await graph.ainvoke({"note": note}, thread_id="t")
    steps = [e for e in (await graph.history("t")).events if e.type == "superstep_completed"]
    await graph.fork("t", from_=steps[100].id, name="side")
    await graph.ainvoke(None, thread_id="t", branch_id="side")
    await graph.ainvoke({"note": "e"}, thread_id="t", branch_id="side")
    assert await graph.prune("t", keep_last=60) > 0
    kept = (await store.read("t", "main"))[1]
    assert kept["type"] != "run_started"  # the cut is inside a run

    for branch, calls in (("main", 2), ("side", 4)):
        report = await replay(tally_graph(None), store, "t", branch_id=branch)
        assert report.clean, report
        assert report.calls == calls
        assert report.note is not None and "taken as stored, not made again" in report.note

    found = (await replay(tally_graph(None, step=2), store, "t")).divergence
    assert found is not None and found.node == "count"  # a change after the cut is caught


async def test_a_thread_pruned_inside_its_only_run_replays_nothing_and_says_so(
    store: StateStore,
) -> None:
    graph = tally_graph(store, run=60)
    await graph.ainvoke({}, thread_id="t")
    assert await graph.prune("t", keep_last=5) > 0

    report = await replay(tally_graph(None, run=60), store, "t")

    assert report.clean and (report.calls, report.events) == (0, 0)
    assert report.note is not None and "starts inside a call" in report.note
