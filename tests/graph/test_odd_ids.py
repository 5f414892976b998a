"""Thread and branch ids are checked before any store sees them, the same on every store: a
non-string id is refused even when the graph remembers the thread, and an id no store can
keep as it is (a NUL character, a lone surrogate) is refused by every call, never stored."""

from __future__ import annotations

from typing import Any

import pytest

from nodestep import GraphConfigError
from nodestep.store import StateStore
from store_helpers import poll_graph, reopened

pytestmark = pytest.mark.anyio

READS = {
    "exists": lambda g, t, b: g.exists(t, branch_id=b),
    "history": lambda g, t, b: g.history(t, branch_id=b),
    "load": lambda g, t, b: g.load(t, branch_id=b),
    "get_state": lambda g, t, b: g.get_state(t, branch_id=b),
    "state_history": lambda g, t, b: g.state_history(t, branch_id=b),
    "branches": lambda g, t, b: g.branches(t, branch_id=b),
    "usage": lambda g, t, b: g.usage(t, branch_id=b),
}


@pytest.mark.parametrize("method", list(READS))
async def test_a_thread_id_that_is_no_string_is_refused_before_the_store_reads_it(
    store: StateStore, method: str
) -> None:
    graph = poll_graph(store)
    await graph.ainvoke({"votes": ["yes"]}, thread_id="poll-1")  # the graph remembers it
    with pytest.raises(GraphConfigError, match="thread_id must be a non-empty string, got 5"):
        await READS[method](graph, 5, "main")


@pytest.mark.parametrize("method", list(READS))
async def test_a_branch_id_that_is_no_string_is_refused_before_the_store_reads_it(
    store: StateStore, method: str
) -> None:
    graph = poll_graph(store)
    await graph.ainvoke({"votes": ["yes"]}, thread_id="poll-1")
    with pytest.raises(GraphConfigError, match="branch_id must be a non-empty string, got 5"):
        await READS[method](graph, "poll-1", 5)


ODD = {
    "nul": ("poll\x001", "a NUL character ('\\x00') at index 4"),
    "surrogate": ("poll-\ud83d", "the lone surrogate '\\ud83d' at index 5"),
}


@pytest.mark.parametrize("odd", list(ODD))
async def test_a_thread_id_no_store_can_keep_is_refused_by_every_call(
    store: StateStore, odd: str
) -> None:
    thread_id, found = ODD[odd]
    graph = poll_graph(store)
    words = f"thread_id {thread_id!r} holds {found}"
    calls: list[Any] = [
        lambda: graph.ainvoke({"votes": ["yes"]}, thread_id=thread_id),
        lambda: graph.update_state(thread_id, {"count": 1}, create=True),
        lambda: graph.fork(thread_id, from_="e1"),
        lambda: graph.delete_thread(thread_id),
        lambda: graph.prune(thread_id, keep_last=1),
        *(lambda read=read: read(graph, thread_id, "main") for read in READS.values()),
    ]
    for call in calls:
        with pytest.raises(GraphConfigError) as info:
            await call()
        assert words in str(info.value)
        assert "NUL characters and lone surrogates" in str(info.value)
    assert (await reopened(store).list_threads()).threads == []


@pytest.mark.parametrize("odd", list(ODD))
async def test_a_branch_id_or_fork_name_no_store_can_keep_is_refused(
    store: StateStore, odd: str
) -> None:
    branch_id, found = ODD[odd]
    graph = poll_graph(store)
    await graph.ainvoke({"votes": ["yes"]}, thread_id="poll-1")
    event = (await graph.history("poll-1")).events[-1].id
    calls: list[Any] = [
        lambda: graph.ainvoke({"votes": ["no"]}, thread_id="poll-1", branch_id=branch_id),
        lambda: graph.update_state("poll-1", {"count": 1}, branch_id=branch_id),
        lambda: graph.fork("poll-1", from_=event, branch_id=branch_id),
        *(lambda read=read: read(graph, "poll-1", branch_id) for read in READS.values()),
    ]
    for call in calls:
        with pytest.raises(GraphConfigError, match="NUL characters and lone surrogates") as info:
            await call()
        assert f"branch_id {branch_id!r} holds {found}" in str(info.value)
    with pytest.raises(GraphConfigError) as info:
        await graph.fork("poll-1", from_=event, name=branch_id)
    assert f"A branch name must be a non-blank string other than 'main', got {branch_id!r}" in (
        str(info.value)
    )
    assert f"it holds {found}" in str(info.value)
    assert await reopened(store).list_branches("poll-1") == []


async def test_ids_of_any_other_text_work_on_every_store(store: StateStore) -> None:
    graph = poll_graph(store)
    thread_id = "résumé 🙂\t\x7f\ufffd"
    await graph.ainvoke({"votes": ["yes"]}, thread_id=thread_id)
    event = (await graph.history(thread_id)).events[-1].id
    branch = await graph.fork(thread_id, from_=event, name="ветка 🙂")
    await graph.ainvoke({"votes": ["no"]}, thread_id=thread_id, branch_id=branch.id)
    assert (await graph.load(thread_id, branch_id="ветка 🙂"))["votes"] == ["yes", "no"]
    assert (await graph.get_state(thread_id)).value.votes == ["yes"]


@pytest.mark.parametrize("odd", list(ODD))
async def test_an_event_id_no_store_can_keep_is_refused_as_no_event_id(
    store: StateStore, odd: str
) -> None:
    event_id, found = ODD[odd]
    graph = poll_graph(store)
    await graph.ainvoke({"votes": ["yes"]}, thread_id="poll-1")
    calls: list[tuple[str, Any]] = [
        ("at=", lambda: graph.load("poll-1", at=event_id)),
        ("at=", lambda: graph.get_state("poll-1", at=event_id)),
        ("fork(from_=...)", lambda: graph.fork("poll-1", from_=event_id)),
    ]
    for what, call in calls:
        with pytest.raises(GraphConfigError) as info:
            await call()
        assert str(info.value).startswith(
            f"{what} takes the id of a history event (a non-empty string), got {event_id!r}: "
            f"it holds {found}, which no event id has."
        )
    assert await reopened(store).list_branches("poll-1") == []
