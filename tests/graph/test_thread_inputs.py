"""The thread methods check their inputs as runs do: ids that no run could use, event ids
that are not strings, and events of another branch are refused, and nothing is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodestep import (
    END,
    START,
    BaseState,
    FilesystemStateStore,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    StateStoreError,
    UnknownThreadError,
    node,
)
from nodestep.store import StateStore
from store_helpers import Poll, poll_graph, reopened

pytestmark = pytest.mark.anyio


async def first_turn(graph: Graph[Poll]) -> str:
    """Run poll-1 twice; return the id of the first run's last event."""
    await graph.ainvoke({"votes": ["yes"]}, thread_id="poll-1")
    await graph.ainvoke({"votes": ["no"]}, thread_id="poll-1")
    history = await graph.history("poll-1")
    return next(e.id for e in history.events if e.type == "run_completed")


# -- fork(from_=...) --------------------------------------------------------------------------


@pytest.mark.parametrize("from_", [None, "", 7, ["x"]], ids=["none", "empty", "int", "list"])
async def test_fork_refuses_a_from_that_is_not_an_event_id_and_writes_nothing(
    store: StateStore, from_: Any
) -> None:
    graph = poll_graph(store)
    await first_turn(graph)
    before = await store.last_sequence("poll-1", "main")
    with pytest.raises(
        GraphConfigError, match=r"fork\(from_=\.\.\.\) takes the id of a history event"
    ) as info:
        await graph.fork("poll-1", from_=from_, name="recount")
    assert repr(from_) in str(info.value)
    assert await graph.branches("poll-1") == []
    # Every thread of the store still reads, from this store object and from a new one.
    again = reopened(store)
    assert await again.list_branches("poll-1") == []
    assert await again.last_sequence("poll-1", "main") == before
    assert (await graph.get_state("poll-1", state_store=again)).value.count == 2


async def test_fork_at_an_event_still_works_after_a_refused_one(store: StateStore) -> None:
    graph = poll_graph(store)
    turn = await first_turn(graph)
    with pytest.raises(GraphConfigError, match="takes the id of a history event"):
        await graph.fork("poll-1", from_=None, name="recount")  # type: ignore[arg-type]
    branch = await graph.fork("poll-1", from_=turn, name="recount")
    assert (await graph.load("poll-1", branch_id=branch.id))["votes"] == ["yes"]


# -- thread ids -------------------------------------------------------------------------------


@pytest.mark.parametrize("thread_id", ["", 5, None], ids=["empty", "int", "none"])
async def test_update_state_with_create_refuses_a_thread_id_invoke_refuses(
    store: StateStore, thread_id: Any
) -> None:
    graph = poll_graph(store)
    words = f"thread_id must be a non-empty string, got {thread_id!r}"
    if thread_id is not None:  # invoke without a thread_id is refused for needing one
        with pytest.raises(GraphConfigError, match=words):
            await graph.ainvoke({"votes": ["yes"]}, thread_id=thread_id)
    with pytest.raises(GraphConfigError, match=words):
        await graph.update_state(thread_id, {"votes": ["yes"]}, create=True)
    assert await reopened(store).last_sequence("", "main") == 0


@pytest.mark.parametrize(
    "call",
    [
        lambda g: g.exists(""),
        lambda g: g.history(""),
        lambda g: g.load(""),
        lambda g: g.get_state(""),
        lambda g: g.state_history(""),
        lambda g: g.branches(""),
        lambda g: g.fork("", from_="e1"),
        lambda g: g.update_state("", {"count": 1}),
    ],
    ids=[
        "exists",
        "history",
        "load",
        "get_state",
        "state_history",
        "branches",
        "fork",
        "update_state",
    ],
)
async def test_every_thread_method_refuses_an_empty_thread_id(store: StateStore, call: Any) -> None:
    with pytest.raises(GraphConfigError, match="thread_id must be a non-empty string, got ''"):
        await call(poll_graph(store))


async def test_an_empty_branch_id_is_refused_as_runs_refuse_it(store: StateStore) -> None:
    graph = poll_graph(store)
    await first_turn(graph)
    words = "branch_id must be a non-empty string, got ''"
    with pytest.raises(GraphConfigError, match=words):
        await graph.ainvoke({}, thread_id="poll-1", branch_id="")
    with pytest.raises(GraphConfigError, match=words):
        await graph.update_state("poll-1", {"count": 1}, branch_id="")
    with pytest.raises(GraphConfigError, match=words):
        await graph.get_state("poll-1", branch_id="")


# -- load(at=...) and get_state(at=...) -----------------------------------------------------


@pytest.mark.parametrize("at", [["x"], 7, ""], ids=["list", "int", "empty"])
@pytest.mark.parametrize("method", ["load", "get_state"])
async def test_load_at_a_value_that_is_not_an_event_id_is_refused_clearly(
    store: StateStore, at: Any, method: str
) -> None:
    graph = poll_graph(store)
    await first_turn(graph)
    with pytest.raises(GraphConfigError, match=r"at= takes the id of a history event") as info:
        await getattr(graph, method)("poll-1", at=at)
    assert repr(at) in str(info.value)


@pytest.mark.parametrize("method", ["load", "get_state"])
async def test_load_at_an_event_of_another_branch_is_refused_naming_its_branch(
    store: StateStore, method: str
) -> None:
    graph = poll_graph(store)
    turn = await first_turn(graph)
    branch = await graph.fork("poll-1", from_=turn, name="recount")
    await graph.ainvoke({"votes": ["maybe"]}, thread_id="poll-1", branch_id=branch.id)
    on_branch = (await graph.history("poll-1", branch_id="recount")).events[-1].id
    read = getattr(graph, method)
    words = (
        f"Event '{on_branch}' of thread 'poll-1' is on branch 'recount', not on branch "
        f"'main'. Pass branch_id='recount'"
    )
    with pytest.raises(UnknownThreadError, match=words) as info:
        await read("poll-1", at=on_branch, branch_id="main")
    assert (info.value.thread_id, info.value.branch_id) == ("poll-1", "main")
    with pytest.raises(UnknownThreadError, match="is on branch 'main', not on branch 'recount'"):
        await read("poll-1", at=turn, branch_id="recount")
    # On its own branch, named or left out (None: the event's own branch, as for fork).
    for branch_id in ("recount", None):
        found = await read("poll-1", at=on_branch, branch_id=branch_id)
        votes = found["votes"] if method == "load" else found.value.votes
        assert votes == ["yes", "maybe"]
    assert (await graph.load("poll-1", at=turn))["votes"] == ["yes"]
    assert (await graph.get_state("poll-1", at=on_branch)).branch_id == "recount"


@pytest.mark.parametrize("thread_id", [["x"], {"t": 1}])
def test_get_state_of_an_unhashable_thread_id_is_refused_like_any_bad_id(
    thread_id: object, tmp_path: Path
) -> None:
    # The cached path asks the store first: an unhashable id must still reach the id check.
    for store in (InMemoryStateStore(), FilesystemStateStore(tmp_path / "h.jsonl")):
        graph = poll_graph(store)
        graph.invoke({}, thread_id="t")
        with pytest.raises(GraphConfigError, match="thread_id"):
            graph.get_state_sync(thread_id)  # type: ignore[arg-type]


class Notes(BaseState):
    note: Any = None
    ratio: float = 0.0


@node
def jot(state: Notes) -> dict[str, Any]:
    return {"note": "first"}


@pytest.mark.parametrize("as_node", [None, "jot"], ids=["plain", "as_node"])
@pytest.mark.parametrize(
    "values", [{"note": object()}, {"ratio": float("nan")}], ids=["object", "nan"]
)
async def test_update_state_with_a_value_without_a_json_form_names_update_state(
    store: StateStore, values: dict[str, Any], as_node: str | None
) -> None:
    graph = Graph(Notes, state_store=store).flow(START >> jot, jot >> END)
    await graph.ainvoke({}, thread_id="notes")
    before = await store.last_sequence("notes", "main")
    with pytest.raises(StateStoreError) as info:
        await graph.update_state("notes", values, as_node=as_node)
    assert str(info.value).startswith(
        "update_state on thread 'notes' got a value it cannot store: Field "
    )
    assert await store.last_sequence("notes", "main") == before
    assert (await graph.get_state("notes")).value.note == "first"
