"""Continuing an unfinished superstep, and what a store keeps (and refuses) of a run.

A superstep stays unfinished when a node fails, ``max_steps`` or a timeout stops the run,
or the caller closes a stream early. ``invoke(None, thread_id=...)`` continues it without
running finished tasks again; new input starts a new turn instead.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
from pydantic import BaseModel, Field

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    FilesystemStateStore,
    Graph,
    GraphExecutionError,
    GraphTimeoutError,
    InvalidUpdateError,
    NodeContext,
    Resume,
    ResumeError,
    RunLimitExceededError,
    Send,
    StateStoreError,
    UnknownThreadError,
    add,
    interrupt,
    node,
    when,
)
from nodestep.store import StateStore
from store_helpers import open_file, records, records_sync, reopened


class Fan(BaseState):
    log: Annotated[list[str], add] = Field(default_factory=list)
    a: str = ""
    b: str = ""
    c: str = ""


class Faults:
    """Which nodes fail or hang, and how often each node ran."""

    def __init__(self, *failing: str) -> None:
        self.failing = set(failing)
        self.hanging: set[str] = set()
        self.calls: Counter[str] = Counter()


def fan_graph(store: StateStore, faults: Faults, **options: Any) -> Graph[Fan]:
    """fan runs a, b and c in one superstep; each writes its own field and the log."""

    def worker(name: str) -> Any:
        async def work(state: Fan) -> dict:
            faults.calls[name] += 1
            if name in faults.hanging:
                await anyio.sleep(30)  # real time: what the graph's timeout must cut short
            if name in faults.failing:
                raise RuntimeError(f"{name} fails")
            return {name: f"{name} done", "log": [name]}

        return node(work, name=name)

    a, b, c = worker("a"), worker("b"), worker("c")

    @node(goto=[a, b, c])
    def fan(state: Fan) -> Command:
        faults.calls["fan"] += 1
        return Command(update={"log": ["fan"]}, goto=[a, b, c])

    graph = Graph(Fan, state_store=store, **options)
    return graph.flow(START >> fan, a >> END, b >> END, c >> END)


DONE = Fan(log=["in", "fan", "a", "b", "c"], a="a done", b="b done", c="c done")


# -- node failure ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_failed_task_in_a_fan_out_is_the_only_one_to_run_again(store: StateStore) -> None:
    faults = Faults("c")
    with pytest.raises(RuntimeError, match=r"^c fails$"):
        await fan_graph(store, faults).ainvoke({"log": ["in"]}, thread_id="t")
    assert faults.calls == Counter(fan=1, a=1, b=1, c=1)
    assert [r["type"] for r in await records(store, "t")][-3:] == [
        "task_finished",
        "task_finished",
        "run_failed",
    ]

    faults.failing.clear()
    result = await fan_graph(reopened(store), faults).ainvoke(None, thread_id="t")
    assert faults.calls == Counter(fan=1, a=1, b=1, c=2)
    # The siblings' writes are applied once: no duplicates from the add reducer.
    assert result.state == DONE
    assert await fan_graph(reopened(store), faults).load("t") == DONE.model_dump()
    finished = [
        r.get("task", r.get("node"))
        for r in await records(store, "t")
        if r["type"] == "task_finished"
    ]
    assert sorted(finished) == ["a", "b", "c"]


@pytest.mark.anyio
async def test_a_superstep_that_fails_again_keeps_what_finished(store: StateStore) -> None:
    faults = Faults("b", "c")
    graph = fan_graph(store, faults)
    with pytest.raises(RuntimeError, match=r"^b fails$"):  # the first in scheduling order
        await graph.ainvoke({"log": ["in"]}, thread_id="t")
    faults.failing = {"c"}
    with pytest.raises(RuntimeError, match=r"^c fails$"):
        await graph.ainvoke(None, thread_id="t")
    faults.failing.clear()
    assert (await graph.ainvoke(None, thread_id="t")).state == DONE
    assert faults.calls == Counter(fan=1, a=1, b=2, c=3)


@pytest.mark.anyio
async def test_a_lone_failed_task_runs_again_on_continue(store: StateStore) -> None:
    calls: list[int] = []

    @node
    def only(state: Fan) -> dict:
        calls.append(1)
        if len(calls) == 1:
            raise KeyError("first time")
        return {"log": ["only"]}

    graph = Graph(Fan, state_store=store).flow(START >> only, only >> END)
    with pytest.raises(KeyError, match=r"^'first time'$"):
        await graph.ainvoke({}, thread_id="t")
    assert (await graph.get_state("t")).next == ("only",)
    assert (await graph.ainvoke(None, thread_id="t")).state.log == ["only"]
    assert len(calls) == 2


class Booking(BaseModel):
    ref: str
    at: dt.datetime


class Trip(BaseState):
    bookings: Annotated[list[Booking], add] = Field(default_factory=list)
    flight: Booking | None = None


@pytest.mark.anyio
async def test_finished_task_updates_come_back_as_their_types_after_reload(tmp_path: Path) -> None:
    when_ = dt.datetime(2025, 3, 1, 9, 30, tzinfo=dt.UTC)
    down = [True]

    def build(store: StateStore) -> Graph[Trip]:
        @node
        def flight(state: Trip) -> dict:
            booking = Booking(ref="LH1", at=when_)
            return {"flight": booking, "bookings": [booking]}

        @node
        def hotel(state: Trip) -> dict:
            if down:
                raise ConnectionError("down")
            return {"bookings": [Booking(ref="H1", at=when_)]}

        @node(goto=[flight, hotel])
        def plan(state: Trip) -> Command:
            return Command(goto=[flight, hotel])

        graph = Graph(Trip, state_store=store)
        return graph.flow(START >> plan, flight >> END, hotel >> END)

    path = tmp_path / "typed.jsonl"
    with pytest.raises(ConnectionError, match=r"^down$"):
        await build(open_file(path)).ainvoke({}, thread_id="t")
    down.clear()
    result = await build(open_file(path)).ainvoke(None, thread_id="t")
    state = result.state
    assert type(state.flight) is Booking and state.flight.at == when_
    assert [type(b) for b in state.bookings] == [Booking, Booking]
    assert [b.ref for b in state.bookings] == ["LH1", "H1"]
    reloaded = (await build(open_file(path)).get_state("t")).value
    assert reloaded == state and type(reloaded.flight.at) is dt.datetime


# -- limits, timeouts, closed streams ---------------------------------------------------------


class Count(BaseState):
    i: int = 0
    seen: Annotated[list[int], add] = Field(default_factory=list)


def count_graph(store: StateStore, limit: int, calls: Counter[int], max_steps: int) -> Graph:
    @node
    def step(state: Count) -> dict:
        calls[state.i] += 1
        return {"i": state.i + 1, "seen": [state.i]}

    graph = Graph(Count, state_store=store, max_steps=max_steps)
    return graph.flow(START >> step, step >> when(lambda s: s.i < limit, step, otherwise=END))


@pytest.mark.anyio
async def test_max_steps_stops_the_run_and_invoke_none_continues_it(store: StateStore) -> None:
    calls: Counter[int] = Counter()
    graph = count_graph(store, 25, calls, max_steps=10)
    with pytest.raises(
        RunLimitExceededError,
        match="max_steps=10 supersteps in one call; it stopped before step 10",
    ) as caught:
        await graph.ainvoke({}, thread_id="t")
    assert caught.value.max_steps == 10
    snapshot = await graph.get_state("t")
    assert (snapshot.status, snapshot.next, snapshot.value.i) == ("failed", ("step",), 10)
    with pytest.raises(RunLimitExceededError, match=r"max_steps=10 .* it stopped before step 20"):
        await graph.ainvoke(None, thread_id="t")  # the count is per call: ten more steps
    assert (await graph.load("t"))["i"] == 20
    result = await count_graph(reopened(store), 25, calls, max_steps=10).ainvoke(
        None, thread_id="t"
    )
    assert result.state == Count(i=25, seen=list(range(25)))
    assert set(calls.values()) == {1} and len(calls) == 25
    failures = [r for r in await records(store, "t") if r["type"] == "run_failed"]
    assert [f["error"] for f in failures] == ["RunLimitExceededError"] * 2


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_graph_timeout_stops_the_run_and_invoke_none_continues_it(
    store: StateStore,
) -> None:
    faults = Faults()
    faults.hanging = {"b"}
    # Long enough that step 0 never reaches it on a busy machine (a database store's
    # appends included); only the hanging task of step 1 does.
    graph = fan_graph(store, faults, timeout=0.3)
    with pytest.raises(
        GraphTimeoutError, match=r"timeout=0\.3s inside supersteps; it stopped in step 1"
    ):
        await graph.ainvoke({"log": ["in"]}, thread_id="t")
    snapshot = await graph.get_state("t")
    assert snapshot.status == "failed" and snapshot.value.log == ["in", "fan"]
    faults.hanging.clear()
    assert (
        await fan_graph(reopened(store), faults, timeout=5).ainvoke(None, thread_id="t")
    ).state == DONE
    assert faults.calls == Counter(fan=1, a=1, b=2, c=1)


def test_a_stream_closed_between_supersteps_is_continued(store: StateStore) -> None:
    faults = Faults()
    graph = fan_graph(store, faults)
    events = graph.stream({"log": ["in"]}, thread_id="t", stream_mode="updates")
    first = next(events)
    assert (first.node, first.data) == ("fan", {"log": ["fan"]})
    events.close()
    assert faults.calls == Counter(fan=1)
    last = records_sync(store, "t")[-1]
    assert (last["type"], last["reason"], last["step"]) == ("run_stopped", "stream_closed", 1)
    assert graph.get_state_sync("t").next == ("a", "b", "c")
    assert graph.invoke(None, thread_id="t").state == DONE
    assert faults.calls == Counter(fan=1, a=1, b=1, c=1)


@pytest.mark.anyio
async def test_a_stream_closed_inside_a_superstep_keeps_finished_tasks(store: StateStore) -> None:
    waiting = [True]
    calls: Counter[str] = Counter()

    @node
    async def quick(state: Fan) -> dict:
        calls["quick"] += 1
        return {"a": "quick", "log": ["quick"]}

    @node
    async def slow(state: Fan, ctx: NodeContext) -> dict:
        calls["slow"] += 1
        if waiting:
            ctx.emit("slow is waiting")
            await anyio.sleep(30)  # held until the stream closes; 30 s bounds one that does not
        return {"b": "slow", "log": ["slow"]}

    @node(goto=[quick, slow])
    def split(state: Fan) -> Command:
        return Command(goto=[quick, slow])

    graph = Graph(Fan, state_store=store).flow(START >> split, quick >> END, slow >> END)
    events = graph.astream({}, thread_id="t", stream_mode=["custom", "task_updates"])
    # Closed once slow waits and quick is recorded (its update is sent after it is stored).
    seen = {(e.mode, e.node) for e in [await events.__anext__() for _ in range(3)]}
    assert seen == {("task_updates", "split"), ("custom", "slow"), ("task_updates", "quick")}
    await events.aclose()
    types = [r["type"] for r in await records(store, "t")]
    assert types[-2:] == ["task_finished", "run_stopped"]
    waiting.clear()
    result = await graph.ainvoke(None, thread_id="t")
    assert result.state == Fan(log=["quick", "slow"], a="quick", b="slow")
    assert calls == Counter(quick=1, slow=2)


# -- invoke(None) that cannot continue -----------------------------------------------------


def test_invoke_none_on_a_completed_thread(store: StateStore) -> None:
    graph = fan_graph(store, Faults())
    graph.invoke({}, thread_id="t")
    before = records_sync(store, "t")
    with pytest.raises(
        ResumeError, match="has no unfinished superstep: its last run completed"
    ) as caught:
        graph.invoke(None, thread_id="t")
    assert "new turn" in str(caught.value)
    assert records_sync(store, "t") == before


def test_invoke_none_on_a_paused_thread(store: StateStore) -> None:
    @node
    def ask(state: Fan) -> dict:
        return {"a": interrupt("?", id="q")}

    graph = Graph(Fan, state_store=store).flow(START >> ask, ask >> END)
    graph.invoke({}, thread_id="t")
    with pytest.raises(
        ResumeError, match=r"^Thread 't' is paused, .* answer with resume=Resume\(\.\.\.\)\.$"
    ) as caught:
        graph.invoke(None, thread_id="t")
    assert caught.value.pending == ("ask:q",)
    assert "'ask:q'" in str(caught.value)


def test_invoke_none_on_a_blocked_thread(store: StateStore) -> None:
    @node
    def one(state: Fan) -> dict:
        return {"a": "one"}

    @node
    def two(state: Fan) -> dict:
        return {"a": "two"}

    @node(goto=[one, two])
    def split(state: Fan) -> Command:
        return Command(goto=[one, two])

    graph = Graph(Fan, state_store=store).flow(START >> split, one >> END, two >> END)
    with pytest.raises(
        InvalidUpdateError, match=r"^Field 'a' got writes from 'one', 'two' in step 1"
    ) as caught:
        graph.invoke({}, thread_id="t")
    assert caught.value.field == "a" and set(caught.value.writers) == {"one", "two"}
    failed = records_sync(store, "t")[-1]
    assert (failed["type"], failed["mergeable"]) == ("run_failed", False)
    assert graph.get_state_sync("t").status == "blocked"
    before = records_sync(store, "t")
    with pytest.raises(ResumeError, match="that superstep's writes cannot be merged"):
        graph.invoke(None, thread_id="t")
    assert records_sync(store, "t") == before


def test_invoke_none_on_a_missing_thread_or_branch(store: StateStore) -> None:
    graph = fan_graph(store, Faults())
    with pytest.raises(UnknownThreadError, match=r"^Thread 'ghost' has no history to continue"):
        graph.invoke(None, thread_id="ghost")
    graph.invoke({}, thread_id="t")
    no_branch = r"^Thread 't' has no branch 'nope'\. Create it with fork\("
    with pytest.raises(UnknownThreadError, match=no_branch):
        graph.invoke(None, thread_id="t", branch_id="nope")
    with pytest.raises(UnknownThreadError, match=no_branch):
        graph.invoke({"log": ["x"]}, thread_id="t", branch_id="nope")
    assert anyio.run(store.last_sequence, "ghost", "main") == 0
    assert anyio.run(store.last_sequence, "t", "nope") == 0


# -- new turns and forks ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_new_input_on_an_unfinished_thread_starts_a_new_turn(store: StateStore) -> None:
    faults = Faults("c")
    graph = fan_graph(store, faults)
    with pytest.raises(RuntimeError, match=r"^c fails$"):
        await graph.ainvoke({"log": ["in"]}, thread_id="t")
    faults.failing.clear()
    result = await graph.ainvoke({"log": ["new"]}, thread_id="t")
    # From the state before the unfinished superstep: a's and b's first writes are dropped.
    assert result.state.log == ["in", "fan", "new", "fan", "a", "b", "c"]
    assert faults.calls == Counter(fan=2, a=2, b=2, c=2)
    # History keeps the dropped tasks.
    assert sum(r["type"] == "task_finished" for r in await records(store, "t")) == 2 + 3


@pytest.mark.anyio
async def test_a_fork_at_a_failed_superstep_continues_it(store: StateStore) -> None:
    faults = Faults("c")
    graph = fan_graph(store, faults)
    with pytest.raises(RuntimeError, match=r"^c fails$"):
        await graph.ainvoke({"log": ["in"]}, thread_id="t")
    failed = (await graph.history("t")).events[-1]
    branch = await graph.fork("t", from_=failed.id)
    faults.failing.clear()
    assert (await graph.ainvoke(None, thread_id="t", branch_id=branch.id)).state == DONE
    assert faults.calls == Counter(fan=1, a=1, b=1, c=2)
    # main still waits on its own unfinished superstep, and continues it independently.
    assert (await graph.get_state("t")).status == "failed"
    assert (await graph.ainvoke(None, thread_id="t")).state == DONE
    assert faults.calls == Counter(fan=1, a=1, b=1, c=3)


@pytest.mark.anyio
async def test_a_fork_between_two_finished_tasks_runs_only_what_had_not_finished(
    store: StateStore,
) -> None:
    faults = Faults("c")
    graph = fan_graph(store, faults)
    with pytest.raises(RuntimeError, match=r"^c fails$"):
        await graph.ainvoke({"log": ["in"]}, thread_id="t")
    assert faults.calls == Counter(fan=1, a=1, b=1, c=1)
    # a and b finish in either order (trio runs ready tasks in random order): fork between.
    first, second = [e for e in await graph.history("t") if e.type == "task_finished"]
    assert {first.data["node"], second.data["node"]} == {"a", "b"}
    branch = await graph.fork("t", from_=first.id, name="after-first")
    # next lists what is still to run: the task that finished before the fork is left out.
    assert (await graph.get_state("t", branch_id="after-first")).next == tuple(
        t for t in ("a", "b", "c") if t != first.data["node"]
    )
    faults.failing.clear()
    result = await graph.ainvoke(None, thread_id="t", branch_id=branch.id)
    assert result.state == DONE
    assert faults.calls == Counter(
        {"fan": 1, first.data["node"]: 1, second.data["node"]: 2, "c": 2}
    )


@pytest.mark.anyio
async def test_new_input_on_a_fork_starts_a_new_turn_from_that_state(store: StateStore) -> None:
    faults = Faults("c")
    graph = fan_graph(store, faults)
    with pytest.raises(RuntimeError, match=r"^c fails$"):
        await graph.ainvoke({"log": ["in"]}, thread_id="t")
    failed = (await graph.history("t")).events[-1]
    branch = await graph.fork("t", from_=failed.id)
    faults.failing.clear()
    result = await graph.ainvoke({"log": ["fresh"]}, thread_id="t", branch_id=branch.id)
    assert result.state.log == ["in", "fan", "fresh", "fan", "a", "b", "c"]
    assert faults.calls == Counter(fan=2, a=2, b=2, c=2)


def test_invoke_none_on_a_fork_of_a_completed_turn_is_refused(store: StateStore) -> None:
    graph = fan_graph(store, Faults())
    done = graph.invoke({}, thread_id="t")
    branch = graph.fork_sync("t", from_=done.checkpoint_id)
    with pytest.raises(ResumeError, match="has no unfinished superstep: its last run completed"):
        graph.invoke(None, thread_id="t", branch_id=branch.id)


# -- node names are stored identities -----------------------------------------------------------


class Doc(BaseState):
    log: Annotated[list[str], add] = Field(default_factory=list)


def doc_graph(store: StateStore, name: str, behaviour: dict[str, Any]) -> Graph[Doc]:
    """first >> <name> >> last, where <name> may fail or pause; plus a sibling of <name>."""

    @node
    def first(state: Doc) -> dict:
        return {"log": ["first"]}

    def middle(state: Doc) -> dict:
        if behaviour.get("fail"):
            raise RuntimeError("middle fails")
        if behaviour.get("pause"):
            return {"log": [interrupt("ok?", id="ok")]}
        return {"log": [name]}

    middle_node = node(middle, name=name)

    @node
    def last(state: Doc) -> dict:
        return {"log": ["last"]}

    return Graph(Doc, state_store=store).flow(
        START >> first, first >> middle_node, middle_node >> last, last >> END
    )


@pytest.mark.parametrize("waiting", ["paused", "failed", "planned"])
def test_a_thread_waiting_on_a_removed_node_fails_naming_it(
    store: StateStore, waiting: str
) -> None:
    behaviour = {"fail": waiting == "failed", "pause": waiting == "paused"}
    graph = doc_graph(store, "review", behaviour)
    if waiting == "failed":
        with pytest.raises(RuntimeError, match=r"^middle fails$"):
            graph.invoke({}, thread_id="t")
    elif waiting == "paused":
        assert graph.invoke({}, thread_id="t").status == "interrupted"
    else:
        stopped = graph.invoke({}, thread_id="t", interrupt_before=["review"])
        assert stopped.status == "interrupted" and stopped.interrupts == {}
    behaviour = {"pause": waiting == "paused"}  # a rerun asks again and gets the answer
    renamed = doc_graph(reopened(store), "check", behaviour)
    resume = Resume("yes") if waiting == "paused" else None
    with pytest.raises(
        GraphExecutionError, match=r"^Thread 't' waits on node 'review', which graph 'graph' does"
    ) as caught:
        renamed.invoke(None, thread_id="t", resume=resume)
    message = str(caught.value)
    assert "'review'" in message and "check" not in message
    assert renamed.nodes.keys() == {"first", "check", "last"}
    # The thread is intact: the graph with the old name continues it.
    result = doc_graph(reopened(store), "review", behaviour).invoke(None, thread_id="t")
    expected = ["first", "yes" if waiting == "paused" else "review", "last"]
    assert result.state.log == expected


def test_an_unfinished_superstep_with_a_finished_task_of_a_removed_node_fails_naming_it(
    store: StateStore,
) -> None:
    """The removed node's task finished, but its routes are part of the superstep."""
    down = [True]
    calls: list[str] = []

    def build(store: StateStore, name: str) -> Graph[Doc]:
        @node
        def flaky(state: Doc) -> dict:
            calls.append("flaky")
            if down:
                raise RuntimeError("flaky fails")
            return {"log": ["flaky"]}

        @node
        def follow_up(state: Doc) -> dict:
            return {"log": ["follow_up"]}

        def steady(state: Doc) -> dict:
            return {"log": ["steady"]}

        steady_node = node(steady, name=name)

        @node(goto=[flaky, steady_node])
        def split(state: Doc) -> Command:
            return Command(goto=[flaky, steady_node])

        graph = Graph(Doc, state_store=store)
        return graph.flow(START >> split, flaky >> END, steady_node >> follow_up, follow_up >> END)

    with pytest.raises(RuntimeError, match=r"^flaky fails$"):
        build(store, "steady").invoke({}, thread_id="t")
    down.clear()
    with pytest.raises(
        GraphExecutionError, match="waits on node 'steady', which graph 'graph' does"
    ):
        # Continuing without 'steady' would silently drop its route to follow_up.
        build(reopened(store), "renamed").invoke(None, thread_id="t")
    # Refused before the superstep's other task ran: its side effects did not happen.
    assert calls == ["flaky"]
    result = build(reopened(store), "steady").invoke(None, thread_id="t")
    assert result.state.log == ["flaky", "steady", "follow_up"]
    assert calls == ["flaky", "flaky"]


# -- what is stored, and what is refused ----------------------------------------------------------


class Loose(BaseState):
    ratio: float = 0.0
    anything: Any = None
    numbers: list[int] = Field(default_factory=list)
    tags: set[str] = Field(default_factory=set)
    log: Annotated[list[str], add] = Field(default_factory=list)


async def _nothing_bad_stored(store: StateStore, thread_id: str, field: str) -> None:
    defaults = {"ratio": 0.0, "anything": None}
    for record in await records(reopened(store), thread_id):
        for key in ("update", "input"):
            assert field not in (record.get(key) or {}), record
        if record["type"] == "checkpoint":
            assert record["values"][field] == defaults[field]


NO_FLOAT = r"^Field 'ratio' holds a float that JSON cannot store \(nan or infinity\)"
NO_JSON_FORM = "^Field 'anything' cannot be stored as JSON: a value of type object has no JSON"
NO_ROUND_TRIP = "^Field 'anything' does not survive a JSON round trip: a value of type {}"


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        pytest.param({"ratio": float("nan")}, NO_FLOAT, id="nan"),
        pytest.param({"ratio": float("-inf")}, NO_FLOAT, id="inf"),
        pytest.param({"anything": object()}, NO_JSON_FORM, id="object"),
        pytest.param({"anything": {"when": {1, 2}}}, NO_ROUND_TRIP.format("dict"), id="set_in_any"),
        pytest.param({"anything": ("a", "b")}, NO_ROUND_TRIP.format("tuple"), id="tuple_in_any"),
    ],
)
@pytest.mark.anyio
async def test_a_node_update_that_does_not_survive_json_fails_the_task_at_write_time(
    store: StateStore, bad: dict[str, Any], message: str
) -> None:
    writes = dict(bad)  # the parameter is shared between the stores' runs

    @node
    def good(state: Loose) -> dict:
        return {"log": ["good"]}

    @node
    def broken(state: Loose) -> dict:
        return {"log": ["broken"], **writes}

    @node(goto=[good, broken])
    def split(state: Loose) -> Command:
        return Command(goto=[good, broken])

    graph = Graph(Loose, state_store=store).flow(START >> split, good >> END, broken >> END)
    with pytest.raises(StateStoreError, match=message) as caught:
        await graph.ainvoke({}, thread_id="t")
    assert next(iter(bad)) in str(caught.value)
    last = (await records(store, "t"))[-1]
    assert (last["type"], last["error"]) == ("run_failed", "StateStoreError")
    await _nothing_bad_stored(store, "t", next(iter(bad)))
    assert await graph.load("t") == Loose().model_dump()
    # Once the node writes JSON data, the superstep continues; 'good' does not run again.
    writes.clear()
    assert (await graph.ainvoke(None, thread_id="t")).state.log == ["broken", "good"]  # name order


@pytest.mark.anyio
async def test_an_integer_beyond_64_bits_is_refused_when_written_and_nothing_is_stored(
    store: StateStore,
) -> None:
    @node
    def keep(state: Loose) -> dict:
        return {"log": ["kept"]}

    graph = Graph(Loose, state_store=store).flow(START >> keep, keep >> END)
    too_big = r"^Field 'numbers' cannot be stored as JSON: the int \d+ at \[0\] is beyond 64 bits"
    with pytest.raises(StateStoreError, match=too_big):
        await graph.ainvoke({"numbers": [2**70]}, thread_id="t")
    assert await graph.exists("t") is False
    await graph.ainvoke({}, thread_id="t")
    before = await records(store, "t")
    named = "^update_state on thread 't' got a value it cannot store: " + too_big[1:]
    with pytest.raises(StateStoreError, match=named):
        await graph.update_state("t", {"numbers": [2**64]})
    assert await records(reopened(store), "t") == before


@pytest.mark.anyio
async def test_a_fan_out_task_writing_an_integer_beyond_64_bits_fails_like_a_node_error(
    store: StateStore,
) -> None:
    """Its siblings run to completion and are recorded, and the failure is in the history."""
    calls: Counter[str] = Counter()
    big = [2**70]

    @node
    async def huge(state: Loose) -> dict:
        calls["huge"] += 1
        return {"numbers": big}

    @node
    async def slow(state: Loose) -> dict:
        calls["slow"] += 1
        await anyio.wait_all_tasks_blocked()  # huge has failed, and the run took it
        calls["slow finished"] += 1
        return {"log": ["slow"]}

    @node(goto=[huge, slow])
    def split(state: Loose) -> Command:
        return Command(goto=[huge, slow])

    graph = Graph(Loose, state_store=store).flow(START >> split, huge >> END, slow >> END)
    too_big = r"^Field 'numbers' cannot be stored as JSON: the int \d+ at \[\d+\] is beyond 64"
    with pytest.raises(StateStoreError, match=too_big):
        await graph.ainvoke({}, thread_id="t")
    assert calls == Counter(huge=1, slow=1, **{"slow finished": 1})
    types = [r["type"] for r in await records(store, "t")]
    assert types[-2:] == ["task_finished", "run_failed"], types
    big[:] = [1]
    assert (await graph.ainvoke(None, thread_id="t")).state.numbers == [1]
    assert calls == Counter(huge=2, slow=1, **{"slow finished": 1})


@pytest.mark.anyio
async def test_a_send_payload_that_does_not_survive_json_fails_the_sender(
    store: StateStore,
) -> None:
    @node
    def target(state: Loose) -> dict:
        return {"log": [f"ratio {state.ratio}"]}

    @node(goto=[target])
    def sender(state: Loose) -> Send:
        return Send(target, {"ratio": float("nan")})

    graph = Graph(Loose, state_store=store).flow(START >> sender, target >> END)
    with pytest.raises(
        StateStoreError,
        match=r"^Node 'sender' sent 'target' a payload that cannot be stored: Field 'ratio' "
        r"holds a float that JSON cannot store",
    ):
        await graph.ainvoke({}, thread_id="t")
    assert (await records(store, "t"))[-1]["type"] == "run_failed"
    assert not any(r["type"] == "superstep_completed" for r in await records(store, "t"))


@pytest.mark.anyio
async def test_json_friendly_containers_are_converted_and_come_back(store: StateStore) -> None:
    @node
    def write(state: Loose) -> dict:
        # A set in a list field is validated into a list; a set field is stored as a list.
        return {"numbers": {7}, "tags": {"x"}, "anything": {"k": [1, "two", None]}}

    graph = Graph(Loose, state_store=store).flow(START >> write, write >> END)
    live = (await graph.ainvoke({}, thread_id="t")).state
    assert live.numbers == [7] and live.tags == {"x"}
    step = next(r for r in await records(store, "t") if r["type"] == "superstep_completed")
    update = step["tasks"]["write"]["update"]
    assert update == {"numbers": [7], "tags": ["x"], "anything": {"k": [1, "two", None]}}
    again = Graph(Loose, state_store=reopened(store)).flow(START >> write, write >> END)
    assert (await again.get_state("t")).value == live
    assert type((await again.get_state("t")).value.tags) is set


class Client:
    """Something that must never be stored: a handle with a secret."""

    def __init__(self) -> None:
        self.token = "tok-9f8e7d6c5b"

    def __repr__(self) -> str:
        return f"Client({self.token})"


@pytest.mark.anyio
async def test_context_is_never_stored_even_across_a_failure_and_a_continuation(
    store: StateStore,
) -> None:
    attempts: list[int] = []

    @node
    def use(state: Doc, ctx: NodeContext) -> dict:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("first attempt fails")
        return {"log": [f"token length {len(ctx.context.token)}"]}

    graph = Graph(Doc, state_store=store).flow(START >> use, use >> END)
    client = Client()
    with pytest.raises(RuntimeError, match=r"^first attempt fails$"):
        await graph.ainvoke({}, thread_id="t", context=client)
    result = await graph.ainvoke(None, thread_id="t", context=client)
    assert result.state.log == ["token length 14"]
    dumped = json.dumps(await records(reopened(store), "t"))
    assert client.token not in dumped and "Client" not in dumped and "context" not in dumped
    if isinstance(store, FilesystemStateStore):
        assert client.token.encode() not in store.path.read_bytes()


@pytest.mark.anyio
async def test_a_router_failure_after_a_lone_task_keeps_the_task_in_the_history(
    store: StateStore,
) -> None:
    calls: list[str] = []
    broken = [True]

    @node
    def work(state: Fan) -> dict:
        calls.append("work")
        return {"log": ["work"]}

    @node
    def done(state: Fan) -> dict:
        return {"log": ["done"]}

    def route(state: Fan) -> bool:
        if broken:
            raise RuntimeError("router is broken")
        return True

    def build(store: StateStore) -> Graph[Fan]:
        return Graph(Fan, state_store=store).flow(
            START >> work, work >> when(route, done, otherwise=END), done >> END
        )

    with pytest.raises(RuntimeError, match="router is broken"):
        await build(store).ainvoke({}, thread_id="t")
    assert [r["type"] for r in await records(store, "t")][-2:] == ["task_finished", "run_failed"]
    broken.clear()
    # A new graph reads the store (no cache): the finished task does not run again.
    result = await build(reopened(store)).ainvoke(None, thread_id="t")
    assert result.state.log == ["work", "done"]
    assert calls == ["work"]
