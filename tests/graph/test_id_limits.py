"""Ids and request keys have one limit on every store: up to 512 bytes in UTF-8, without a
NUL character or a lone surrogate. PostgreSQL indexes a thread's ids and request key
together, and failed on ids the other stores kept; a request key was not checked at all,
so SQLite and PostgreSQL failed on it with a raw ``UnicodeEncodeError`` or a server error."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodestep import GraphConfigError
from nodestep.store import StateStore
from store_helpers import poll_graph, reopened

pytestmark = pytest.mark.anyio

# 128 emoji: 512 bytes of UTF-8 that no compression shrinks below PostgreSQL's index limit
# once three of them are indexed together (plain repeats would be compressed and fit).
WIDEST = "".join(chr(0x1F600 + n % 80) for n in range(128))


async def test_ids_and_a_request_key_of_512_bytes_work_on_every_store(store: StateStore) -> None:
    graph = poll_graph(store)
    thread_id, branch, key = WIDEST, WIDEST[::-1], WIDEST[1:] + "k"
    assert {len(text.encode()) for text in (thread_id, branch, key)} == {512, 509}
    await graph.ainvoke({"votes": ["yes"]}, thread_id=thread_id)
    event = (await graph.history(thread_id)).events[-1].id
    forked = await graph.fork(thread_id, from_=event, name=branch)
    result = await graph.ainvoke(
        {"votes": ["no"]}, thread_id=thread_id, branch_id=forked.id, request_key=key
    )
    again = await graph.ainvoke(
        {"votes": ["no"]}, thread_id=thread_id, branch_id=forked.id, request_key=key
    )
    assert result.state.votes == again.state.votes == ["yes", "no"]
    assert (await poll_graph(reopened(store)).load(thread_id, branch_id=branch))["count"] == 2


async def test_an_id_over_512_bytes_is_refused_by_every_call_and_nothing_is_stored(
    store: StateStore,
) -> None:
    graph = poll_graph(store)
    await graph.ainvoke({"votes": ["yes"]}, thread_id="poll-1")
    event = (await graph.history("poll-1")).events[-1].id
    long = "é" * 257  # 514 bytes in UTF-8, though only 257 characters
    calls: dict[str, Any] = {
        "thread_id": lambda: graph.ainvoke({"votes": ["no"]}, thread_id=long),
        "thread_id ": lambda: graph.update_state(long, {"count": 1}, create=True),
        "branch_id": lambda: graph.ainvoke({"votes": ["no"]}, thread_id="poll-1", branch_id=long),
        "A branch name": lambda: graph.fork("poll-1", from_=event, name=long),
        "request_key": lambda: graph.ainvoke(
            {"votes": ["no"]}, thread_id="poll-1", request_key=long
        ),
    }
    for what, call in calls.items():
        with pytest.raises(GraphConfigError) as info:
            await call()
        message = str(info.value)
        assert message.startswith(what.strip()), message
        assert "514 bytes in UTF-8, more than the 512 an id may have" in message
        assert "... (257 characters)" in message  # the id is cut, not printed whole
    stored = poll_graph(reopened(store))
    assert [thread.thread_id for thread in (await stored.list_threads()).threads] == ["poll-1"]
    assert await stored.branches("poll-1") == []
    assert (await stored.load("poll-1"))["votes"] == ["yes"]


@pytest.mark.parametrize(
    ("key", "found"),
    [
        ("order\x0042", "a NUL character ('\\x00') at index 5"),
        ("order-\udc80", "the lone surrogate '\\udc80' at index 6"),
    ],
    ids=["nul", "surrogate"],
)
async def test_a_request_key_no_store_can_keep_is_refused_before_the_run_starts(
    store: StateStore, key: str, found: str
) -> None:
    graph = poll_graph(store)
    with pytest.raises(GraphConfigError) as info:
        await graph.ainvoke({"votes": ["yes"]}, thread_id="poll-1", request_key=key)
    assert f"request_key {key!r} holds {found}" in str(info.value)
    assert not await graph.exists("poll-1")


@given(
    st.text(max_size=600) | st.binary(max_size=4) | st.none(), st.sampled_from(["main", "b", ""])
)
def test_check_ids_quick_path_accepts_exactly_what_the_full_checks_accept(
    thread_id: Any, branch_id: str
) -> None:
    from nodestep._engine.history_ops import check_branch_id, check_ids, check_thread_id

    def accepted(check: Any) -> bool:
        try:
            check()
        except GraphConfigError:
            return False
        return True

    full = accepted(lambda: (check_thread_id(thread_id), check_branch_id(branch_id)))
    assert accepted(lambda: check_ids(thread_id, branch_id)) is full
