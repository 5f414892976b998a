"""Calls with a ``request_key``: a retry never applies the input twice."""

from __future__ import annotations

import functools
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    Command,
    FilesystemStateStore,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    Resume,
    ResumeError,
    add,
    interrupt,
    node,
)
from nodestep.store import StateStore

pytestmark = pytest.mark.anyio


class Orders(BaseState):
    received: Annotated[list[str], add] = Field(default_factory=list)
    shipped: int = 0
    note: str = ""


def shop(store: StateStore | None, ran: Counter[str], fail: dict[str, bool] | None = None) -> Graph:
    fail = fail if fail is not None else {}

    @node
    def pack(state: Orders) -> dict:
        ran["pack"] += 1
        return {}

    @node
    def label(state: Orders) -> dict:
        ran["label"] += 1
        if fail.get("label"):
            raise ConnectionError("the label printer is down")
        return {}

    @node
    def ship(state: Orders) -> dict:
        ran["ship"] += 1
        return {"shipped": len(state.received)}

    @node(goto=[pack, label])
    def start(state: Orders) -> Command:
        return Command(goto=[pack, label])

    return Graph(Orders, state_store=store).flow(
        START >> start, pack >> ship, label >> ship, ship >> END
    )


async def keyed_runs(graph: Graph, thread: str = "shop") -> list[str]:
    events = (await graph.history(thread)).events
    return [e.data["request"] for e in events if e.type == "run_started" and "request" in e.data]


async def test_a_retry_of_a_completed_run_returns_its_result_and_runs_nothing(
    store: StateStore,
) -> None:
    ran: Counter[str] = Counter()
    graph = shop(store, ran)
    first = await graph.ainvoke({"received": ["o-1"]}, thread_id="shop", request_key="o-1")
    before = await store.last_sequence("shop", "main")
    ran.clear()
    again = await graph.ainvoke({"received": ["o-1"]}, thread_id="shop", request_key="o-1")
    assert (again.status, again.state, again.run_id) == (first.status, first.state, first.run_id)
    assert again.checkpoint_id == first.checkpoint_id
    assert ran == Counter()
    assert await store.last_sequence("shop", "main") == before
    assert await keyed_runs(graph) == ["o-1"]


async def test_a_retry_after_later_turns_returns_the_keyed_turns_own_result(
    store: StateStore,
) -> None:
    graph = shop(store, Counter())
    first = await graph.ainvoke({"received": ["o-1"]}, thread_id="shop", request_key="o-1")
    await graph.ainvoke({"received": ["o-2"]}, thread_id="shop", request_key="o-2")
    again = await graph.ainvoke({"received": ["o-1"]}, thread_id="shop", request_key="o-1")
    assert again.state == first.state
    assert again.state.received == ["o-1"]


async def test_a_retry_of_a_failed_run_continues_it_applying_the_input_once(
    store: StateStore,
) -> None:
    ran: Counter[str] = Counter()
    fail = {"label": True}
    graph = shop(store, ran, fail)
    with pytest.raises(ConnectionError, match="printer is down"):
        await graph.ainvoke({"received": ["o-1"]}, thread_id="shop", request_key="o-1")
    fail["label"] = False
    ran.clear()
    result = await graph.ainvoke({"received": ["o-1"]}, thread_id="shop", request_key="o-1")
    assert result.status == "completed"
    assert result.state.received == ["o-1"] and result.state.shipped == 1
    assert ran == Counter({"label": 1, "ship": 1})  # pack finished before: not run again
    assert await keyed_runs(graph) == ["o-1"]


async def test_a_retry_of_a_paused_run_returns_the_paused_result(store: StateStore) -> None:
    @node
    def review(state: Orders) -> dict:
        return {"note": interrupt("approve?", id="ok")}

    graph = Graph(Orders, state_store=store).flow(START >> review, review >> END)
    first = await graph.ainvoke({"received": ["o-1"]}, thread_id="shop", request_key="o-1")
    before = await store.last_sequence("shop", "main")
    again = await graph.ainvoke({"received": ["o-1"]}, thread_id="shop", request_key="o-1")
    assert (again.status, list(again.interrupts)) == ("interrupted", list(first.interrupts))
    assert again.state == first.state
    assert await store.last_sequence("shop", "main") == before
    done = await graph.ainvoke(None, thread_id="shop", resume=Resume("yes"))
    again = await graph.ainvoke({"received": ["o-1"]}, thread_id="shop", request_key="o-1")
    assert (again.status, again.state) == ("completed", done.state)


async def test_the_same_key_with_other_input_is_refused(store: StateStore) -> None:
    graph = shop(store, Counter())
    await graph.ainvoke({"received": ["o-1"]}, thread_id="shop", request_key="o-1")
    before = await store.last_sequence("shop", "main")
    with pytest.raises(ResumeError, match=r"request_key 'o-1' was used .* for other input"):
        await graph.ainvoke({"received": ["o-2"]}, thread_id="shop", request_key="o-1")
    assert await store.last_sequence("shop", "main") == before


async def test_a_key_whose_turn_was_left_for_a_new_one_is_refused(store: StateStore) -> None:
    fail = {"label": True}
    graph = shop(store, Counter(), fail)
    with pytest.raises(ConnectionError, match="printer is down"):
        await graph.ainvoke({"received": ["o-1"]}, thread_id="shop", request_key="o-1")
    fail["label"] = False
    await graph.ainvoke({"received": ["o-2"]}, thread_id="shop")
    with pytest.raises(ResumeError, match="that turn was left unfinished, and another turn"):
        await graph.ainvoke({"received": ["o-1"]}, thread_id="shop", request_key="o-1")


class Chat(BaseState):
    answers: Annotated[list[str], add] = Field(default_factory=list)


def chat(store: StateStore, turns: int = 3) -> Graph:
    """Asks with the same interrupt id every turn, so an old answer fits the next one."""

    @node(goto=["ask", END])
    def ask(state: Chat) -> Command:
        answer = interrupt(f"turn {len(state.answers) + 1}?", id="turn")
        more = len(state.answers) + 1 < turns
        return Command(update={"answers": [answer]}, goto="ask" if more else END)

    return Graph(Chat, state_store=store).flow(START >> ask)


async def test_a_retried_keyed_resume_never_answers_the_next_interrupt(store: StateStore) -> None:
    graph = chat(store)
    await graph.ainvoke({}, thread_id="c")
    first = await graph.ainvoke(None, thread_id="c", resume=Resume("a1"), request_key="job-1")
    before = await store.last_sequence("c", "main")
    again = await graph.ainvoke(None, thread_id="c", resume=Resume("a1"), request_key="job-1")
    assert (again.status, again.state.answers) == ("interrupted", ["a1"])
    assert list(again.interrupts) == list(first.interrupts)
    assert await store.last_sequence("c", "main") == before  # it stored nothing
    await graph.ainvoke(None, thread_id="c", resume=Resume("a2"), request_key="job-2")
    done = await graph.ainvoke(None, thread_id="c", resume=Resume("a3"), request_key="job-3")
    late = await graph.ainvoke(None, thread_id="c", resume=Resume("a1"), request_key="job-1")
    assert (late.status, late.state.answers) == ("completed", ["a1", "a2", "a3"])
    assert late.state == done.state
    keys = [e.data.get("request") for e in (await graph.history("c")).events]
    assert [k for k in keys if k] == ["job-1", "job-2", "job-3"]


async def test_a_keyed_resume_retried_with_other_answers_or_as_input_is_refused(
    store: StateStore,
) -> None:
    graph = chat(store)
    await graph.ainvoke({}, thread_id="c")
    await graph.ainvoke(None, thread_id="c", resume=Resume("a1"), request_key="job-1")
    with pytest.raises(ResumeError, match=r"'job-1' was used .* for other answers: .*\"a1\""):
        await graph.ainvoke(None, thread_id="c", resume=Resume("no"), request_key="job-1")
    with pytest.raises(ResumeError, match=r"'job-1' .* for a resume, at event 4; this call is a"):
        await graph.ainvoke(None, thread_id="c", request_key="job-1")
    answered = Resume(answers={"ask:turn": "a1"})  # the same answer, named by its key
    again = await graph.ainvoke(None, thread_id="c", resume=answered, request_key="job-1")
    assert again.state.answers == ["a1"]


async def test_a_retried_keyed_continuation_returns_the_run_it_finished(store: StateStore) -> None:
    ran: Counter[str] = Counter()
    fail = {"label": True}
    graph = shop(store, ran, fail)
    with pytest.raises(ConnectionError, match="printer is down"):
        await graph.ainvoke({"received": ["o-1"]}, thread_id="shop")
    fail["label"] = False
    done = await graph.ainvoke(None, thread_id="shop", request_key="go-1")
    ran.clear()
    again = await graph.ainvoke(None, thread_id="shop", request_key="go-1")
    assert (again.status, again.state) == ("completed", done.state)
    assert not ran
    # an unkeyed continuation, or another key, still finds nothing to continue
    with pytest.raises(ResumeError, match="has no unfinished superstep"):
        await graph.ainvoke(None, thread_id="shop", request_key="go-2")
    assert await keyed_runs(graph) == ["go-1"]


async def test_a_key_is_found_by_a_new_file_store_of_the_same_file(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    ran: Counter[str] = Counter()
    first = await shop(FilesystemStateStore(path), ran).ainvoke(
        {"received": ["o-1"]}, thread_id="shop", request_key="o-1"
    )
    ran.clear()
    reopened = shop(FilesystemStateStore(path), ran)
    again = await reopened.ainvoke({"received": ["o-1"]}, thread_id="shop", request_key="o-1")
    assert again.state == first.state and ran == Counter()


async def test_a_stream_retry_of_a_completed_run_yields_only_its_final_event(
    store: StateStore,
) -> None:
    graph = shop(store, Counter())
    await graph.ainvoke({"received": ["o-1"]}, thread_id="shop", request_key="o-1")
    stream = graph.astream(
        {"received": ["o-1"]}, thread_id="shop", request_key="o-1", stream_mode="updates"
    )
    events = [event async for event in stream]
    assert [e.mode for e in events] == ["final"]
    assert events[0].data.state.received == ["o-1"]


@pytest.mark.parametrize(
    ("input", "options", "words"),
    [
        ({}, {"request_key": ""}, "request_key must be a non-empty string"),
        ({}, {"request_key": 7}, "request_key must be a non-empty string"),
        (None, {"request_key": "", "resume": Resume(1)}, "request_key must be a non-empty"),
    ],
)
async def test_a_request_key_that_cannot_work_is_refused(
    store: StateStore, input: Any, options: dict[str, Any], words: str
) -> None:
    with pytest.raises(GraphConfigError, match=words):
        await shop(store, Counter()).ainvoke(input, thread_id="shop", **options)


async def test_a_request_key_without_a_store_is_refused() -> None:
    with pytest.raises(GraphConfigError, match=r"ainvoke\(request_key=...\) works on a stored"):
        await shop(None, Counter()).ainvoke({}, request_key="k")


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=12))
def test_every_key_is_applied_once_however_often_it_is_retried(keys: list[str]) -> None:
    graph = shop(InMemoryStateStore(), Counter())

    async def calls() -> list[str]:
        for key in keys:
            await graph.ainvoke({"received": [key]}, thread_id="shop", request_key=key)
        return (await graph.get_state("shop")).value.received

    assert anyio.run(calls) == list(dict.fromkeys(keys))


def test_a_keyed_retry_of_a_turn_whose_end_was_lost_stores_the_end_and_runs_nothing(
    tmp_path: Path,
) -> None:
    # Every superstep of the turn is stored, its run_completed is not: the process died,
    # or the database went away, between the two. The retry with the same key must end the
    # turn, not refuse to continue an "idle" thread nor run the nodes again.
    from nodestep import FilesystemStateStore
    from store_helpers import poll_graph

    # A run stores its last superstep and run_completed in one append: the history the
    # lost end leaves is made here from the turn's records without the last one.
    first = FilesystemStateStore(tmp_path / "whole.jsonl")
    assert poll_graph(first).invoke({"votes": ["a"]}, thread_id="t", request_key="k").state
    records = anyio.run(first.read, "t", "main")
    anyio.run(first.aclose)
    assert records[-1]["type"] == "run_completed"
    store = FilesystemStateStore(tmp_path / "h.jsonl")
    anyio.run(functools.partial(store.append, "t", "main", records[:-1], after=0))
    graph = poll_graph(store)
    result = graph.invoke({"votes": ["a"]}, thread_id="t", request_key="k")
    assert (result.status, result.state.votes, result.state.count) == ("completed", ["a"], 1)
    kinds = [e.type for e in graph.history_sync("t").events]
    assert kinds[-2:] == ["run_started", "run_completed"]
    assert kinds.count("superstep_completed") == 1
    anyio.run(store.aclose)
