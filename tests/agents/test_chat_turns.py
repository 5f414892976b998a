"""A chat turn after turn: the conversation is carried from run to run, never re-read.

A graph keeps the latest position of a thread it ran (``_engine.positions``), and shares a
frozen conversation with it instead of encoding and decoding it; the writer spaces the
checkpoints of a large state by its size. Whatever the cache did, the state must be the one
a fresh store object (a fresh process) loads from the stored records.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import Field

from nodestep import (
    END,
    START,
    FilesystemStateStore,
    Graph,
    InMemoryStateStore,
    MessagesState,
    PostgresStateStore,
    SQLiteStateStore,
    add,
    node,
)
from nodestep._engine.writer import CHECKPOINT_EVERY, ITEMS_PER_RECORD, checkpoint_spacing
from nodestep.agents import AssistantMessage, MessageList, RemoveMessage, UserMessage
from nodestep.store import StateStore
from postgres_server import postgres_store


class Chat(MessagesState):
    notes: Annotated[list[str], add] = Field(default_factory=list)
    turns: int = 0


@node
def reply(state: Chat) -> dict[str, Any]:
    last = state.messages[-1].content if state.messages else "nothing"
    return {"messages": [AssistantMessage(content=f"re: {last}")], "turns": state.turns + 1}


def chat(store: StateStore) -> Graph[Chat]:
    return Graph(Chat, state_store=store).flow(START >> reply, reply >> END)


# Each opens a store on the history ``first`` holds, as another process would.
Reopen = Callable[[StateStore], StateStore]
STORES: dict[str, tuple[Callable[[Path], StateStore], Reopen]] = {
    "memory": (lambda tmp: InMemoryStateStore(), lambda first: first),
    "filesystem": (
        lambda tmp: FilesystemStateStore(tmp / "chat.jsonl"),
        lambda first: FilesystemStateStore(first.path),  # type: ignore[attr-defined]
    ),
    "sqlite": (
        lambda tmp: SQLiteStateStore(tmp / "chat.db"),
        lambda first: SQLiteStateStore(first.path),  # type: ignore[attr-defined]
    ),
    "postgres": (
        postgres_store,
        lambda first: PostgresStateStore(first.dsn, schema=first.schema),  # type: ignore[attr-defined]
    ),
}


@pytest.fixture(params=list(STORES))
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[StateStore, Reopen]]:
    make, reopen = STORES[request.param]
    store = make(tmp_path)
    yield store, reopen
    anyio.run(store.aclose)


def loaded(store: StateStore, reopen: Reopen, thread_id: str) -> Chat:
    """The thread's state as a fresh graph on a fresh store object loads it."""
    other = reopen(store)
    try:
        return chat(other).get_state_sync(thread_id).value
    finally:
        if other is not store:
            anyio.run(other.aclose)


def test_a_turn_starts_from_the_conversation_the_last_turn_left(tmp_path: Path) -> None:
    seen: list[Any] = []

    @node
    def look(state: Chat) -> dict[str, Any]:
        seen.append(state.messages)
        return {"messages": ["noted"]}

    graph = Graph(Chat, state_store=FilesystemStateStore(tmp_path / "chat.jsonl"))
    graph = graph.flow(START >> look, look >> END)
    again = graph.invoke({"messages": ["hi"]}, thread_id="t").state.messages
    graph.invoke({"messages": ["more"]}, thread_id="t")
    # The second run took the first one's conversation as it was: the same message
    # objects, not a copy decoded from JSON, and the id index its last merge left.
    start = seen[-1]
    assert all(a is b for a, b in zip(again, start[: len(again)], strict=True))
    assert start._index is again._index
    assert [m.content for m in start] == ["hi", "noted", "more"]


def test_a_caller_changing_the_result_in_place_does_not_change_the_thread(
    stores: tuple[StateStore, Reopen],
) -> None:
    store, reopen = stores
    graph = chat(store)
    state = graph.invoke({"messages": ["hi"], "notes": ["a"]}, thread_id="t").state
    state.notes.append("changed by the caller")
    snapshot = graph.get_state_sync("t").value
    snapshot.notes.append("changed by the caller too")
    state = graph.invoke({"messages": ["again"], "notes": ["b"]}, thread_id="t").state
    assert state.notes == ["a", "b"]
    assert state == loaded(store, reopen, "t")


def test_a_turn_stored_by_another_store_object_is_not_missed(
    stores: tuple[StateStore, Reopen],
) -> None:
    store, reopen = stores
    graph = chat(store)
    graph.invoke({"messages": ["one"]}, thread_id="t")
    other = reopen(store)
    try:
        chat(other).invoke({"messages": ["two"]}, thread_id="t")  # a fresh cache, as elsewhere
    finally:
        if other is not store:
            anyio.run(other.aclose)
    messages = graph.invoke({"messages": ["three"]}, thread_id="t").state.messages
    assert [m.content for m in messages] == [
        "one",
        "re: one",
        "two",
        "re: two",
        "three",
        "re: three",
    ]


def test_checkpoints_of_a_large_state_are_spaced_by_its_size() -> None:
    small = {"messages": MessageList([UserMessage(content="hi")] * 10), "turns": 3}
    large = {"messages": MessageList([UserMessage(content="hi")] * 4000), "notes": ["x"] * 400}
    assert checkpoint_spacing(small) == CHECKPOINT_EVERY
    assert checkpoint_spacing(large) == 4400 // ITEMS_PER_RECORD


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_long_conversation_is_stored_with_spaced_checkpoints_and_loads_back(
    tmp_path: Path,
) -> None:
    store = FilesystemStateStore(tmp_path / "chat.jsonl")
    graph = chat(store)
    start = [UserMessage(content=f"m{i}") for i in range(1200)]
    await graph.ainvoke({"messages": start}, thread_id="t")
    for turn in range(150):
        await graph.ainvoke({"messages": [f"turn {turn}"]}, thread_id="t")
    records = await store.read("t", "main")
    at = [r["seq"] for r in records if r["type"] == "checkpoint"]
    # The first checkpoint opens the thread; the next waits for 1,200 / 4 records.
    assert at[0] == 1 and at[1] - at[0] > CHECKPOINT_EVERY
    assert all(b - a >= 1200 // ITEMS_PER_RECORD for a, b in itertools.pairwise(at[1:]))
    live = (await graph.get_state("t")).value
    fresh = FilesystemStateStore(store.path)
    try:
        assert (await chat(fresh).get_state("t")).value == live
    finally:
        await fresh.aclose()
    assert len(live.messages) == 1200 + 1 + 2 * 150


# ---------------------------------------------------------------- the property

_ops = st.lists(
    st.one_of(
        st.tuples(st.just("turn"), st.integers(1, 3)),
        st.tuples(st.just("bulk"), st.integers(20, 120)),  # grows the state past 50 records
        st.tuples(st.just("replace"), st.integers(0, 10_000)),
        st.tuples(st.just("remove"), st.integers(0, 10_000)),
        st.tuples(st.just("update_state"), st.integers(1, 2)),
        st.tuples(st.just("elsewhere"), st.integers(1, 2)),
        st.tuples(st.just("get_state"), st.just(0)),
        st.tuples(st.just("meddle"), st.just(0)),
    ),
    min_size=1,
    max_size=25,
)


def _apply(graph: Graph[Chat], other: Callable[[], Graph[Chat]], op: str, n: int) -> None:
    """Run one operation of the property on the thread ``"t"``."""
    current = graph.get_state_sync("t").value.messages if op in ("replace", "remove") else []
    if op in ("turn", "bulk"):
        graph.invoke({"messages": [f"q{i}" for i in range(n)], "notes": [op]}, thread_id="t")
    elif op == "replace" and current:
        old = current[n % len(current)]
        graph.invoke({"messages": [UserMessage(content="edited", id=old.id)]}, thread_id="t")
    elif op == "remove" and current:
        graph.invoke({"messages": [RemoveMessage(id=current[n % len(current)].id)]}, thread_id="t")
    elif op == "update_state":
        graph.update_state_sync("t", {"messages": [f"edit {i}" for i in range(n)]})
    elif op == "elsewhere":  # a turn by another store object with its own cache
        other().invoke({"messages": [f"other {i}" for i in range(n)]}, thread_id="t")
    elif op == "get_state":
        graph.get_state_sync("t")
    elif op == "meddle":  # what a caller does to the snapshot it got must not count
        graph.get_state_sync("t").value.notes.append("meddled")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["memory", "filesystem", "sqlite"])
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=_ops)
def test_the_state_after_any_turns_is_the_one_a_fresh_store_loads(
    kind: str, tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int]]
) -> None:
    make, reopen = STORES[kind]
    store = make(tmp_path_factory.mktemp(kind))
    opened: list[StateStore] = []

    def other() -> Graph[Chat]:
        opened.append(reopen(store))
        return chat(opened[-1])

    graph = chat(store)
    try:
        graph.invoke({"messages": ["start"]}, thread_id="t")
        for op, n in ops:
            _apply(graph, other, op, n)
        live = graph.get_state_sync("t").value
        assert "meddled" not in live.notes
        assert live == loaded(store, reopen, "t")
        # A turn more from the cached position gives what it gives from a fresh load.
        after = graph.invoke({"messages": ["last"]}, thread_id="t").state
        assert after == loaded(store, reopen, "t")
        assert list(after.messages) == [*live.messages, *after.messages[-2:]]
    finally:
        for each in {id(s): s for s in [*opened, store]}.values():
            anyio.run(each.aclose)
