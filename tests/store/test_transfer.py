"""Moving threads between stores: ``export_thread``, ``import_thread``, ``copy_thread``."""

from __future__ import annotations

from operator import add
from pathlib import Path
from typing import Annotated

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    FilesystemStateStore,
    Graph,
    InMemoryStateStore,
    SQLiteStateStore,
    StateStoreError,
    UnknownThreadError,
    copy_thread,
    export_thread,
    import_thread,
    node,
)
from nodestep.store import StateStore
from nodestep.testing import checkpoint, event, events, fork
from postgres_server import postgres_store

pytestmark = pytest.mark.anyio


class Poll(BaseState):
    votes: Annotated[list[str], add] = Field(default_factory=list)
    count: int = 0


@node
def tally(state: Poll) -> dict[str, int]:
    return {"count": len(state.votes)}


def poll_graph(store: StateStore) -> Graph[Poll]:
    return Graph(Poll, state_store=store).flow(START >> tally, tally >> END)


async def _forked_thread(store: StateStore) -> None:
    """Two turns on main, a branch from the first turn, and a fork of that branch."""
    graph = poll_graph(store)
    await graph.ainvoke({"votes": ["yes"]}, thread_id="poll")
    await graph.ainvoke({"votes": ["no"]}, thread_id="poll")
    first = next(e for e in (await graph.history("poll")).events if e.type == "run_completed")
    branch = await graph.fork("poll", from_=first.id, name="recount")
    await graph.ainvoke({"votes": ["maybe"]}, thread_id="poll", branch_id=branch.id)
    inner = (await graph.history("poll", branch_id=branch.id)).events[-1]
    nested = await graph.fork("poll", from_=inner.id, name="again")
    await graph.ainvoke({"votes": ["late"]}, thread_id="poll", branch_id=nested.id)


async def _views(store: StateStore) -> list[object]:
    graph = poll_graph(store)
    out: list[object] = []
    for branch in ("main", "recount", "again"):
        out.append((await graph.get_state("poll", branch_id=branch)).value)
    out.append(await store.list_branches("poll"))
    return out


@pytest.mark.slow
async def test_a_thread_goes_file_sqlite_postgres_file_with_equal_history(tmp_path: Path) -> None:
    first = FilesystemStateStore(tmp_path / "a.jsonl")
    await _forked_thread(first)
    exported = await export_thread(first, "poll")
    chain = [
        SQLiteStateStore(tmp_path / "b.db"),
        postgres_store(),
        FilesystemStateStore(tmp_path / "c.jsonl"),
    ]
    source: StateStore = first
    for target in chain:
        await copy_thread(source, target, "poll")
        assert await export_thread(target, "poll") == exported
        assert await _views(target) == await _views(first)
        source = target
    for store in [first, *chain]:
        await store.aclose()


async def test_an_import_keeps_ids_sequences_times_and_branches(tmp_path: Path) -> None:
    source = InMemoryStateStore()
    await _forked_thread(source)
    exported = await export_thread(source, "poll")
    target = SQLiteStateStore(tmp_path / "t.db")
    assert await import_thread(target, exported) == "poll"
    again = await export_thread(target, "poll")
    assert [(r.get("id"), r.get("seq"), r["ts"], r["branch"]) for r in again] == [
        (r.get("id"), r.get("seq"), r["ts"], r["branch"]) for r in exported
    ]
    assert [r["type"] for r in again].count("branch") == 2
    await target.aclose()


async def test_an_import_into_a_store_that_has_the_thread_is_refused() -> None:
    source, target = InMemoryStateStore(), InMemoryStateStore()
    await source.append("t1", "main", events(1, 2), after=0)
    await target.append("t1", "main", events(1, 1), after=0)
    with pytest.raises(StateStoreError, match=r"already has records of it.*nothing was stored"):
        await copy_thread(source, target, "t1")
    assert len(await target.read("t1", "main")) == 1


async def test_a_bad_record_anywhere_in_an_export_stores_nothing() -> None:
    main = [checkpoint(1), event(2)]
    branch = fork("t1", "alt", main[0])
    bad = [*main, branch.to_json(), checkpoint(2, branch="alt"), event(4, branch="alt")]
    target = InMemoryStateStore()
    with pytest.raises(StateStoreError, match="its seq is 4, but it must be 3"):
        await import_thread(target, bad)
    assert await target.last_sequence("t1", "main") == 0


async def test_an_export_must_start_with_an_event() -> None:
    with pytest.raises(StateStoreError, match="give import_thread what export_thread returned"):
        await import_thread(InMemoryStateStore(), [])


async def test_a_branch_record_without_its_keys_is_refused() -> None:
    records = [checkpoint(1), {"type": "branch", "thread": "t1", "branch": "alt"}]
    with pytest.raises(StateStoreError, match="record 1 is a branch record without its"):
        await import_thread(InMemoryStateStore(), records)


async def test_exporting_an_unknown_thread_names_it() -> None:
    with pytest.raises(UnknownThreadError, match="Cannot export thread 'nope'"):
        await export_thread(InMemoryStateStore(), "nope")


async def test_a_long_thread_is_imported_in_chunks_whole(tmp_path: Path) -> None:
    source = InMemoryStateStore()
    await source.append("t1", "main", events(1, 1234), after=0)
    target = FilesystemStateStore(tmp_path / "t.jsonl")
    await copy_thread(source, target, "t1")
    assert await target.read("t1", "main") == await source.read("t1", "main")
    await target.aclose()


@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.integers(1, 6), min_size=1, max_size=4))
def test_export_then_import_gives_the_export_back(sizes: list[int]) -> None:
    import anyio

    async def check() -> None:
        source, target = InMemoryStateStore(), InMemoryStateStore()
        main = [checkpoint(1), *events(2, 1 + sizes[0])]
        await source.append("t1", "main", main, after=0)
        for k, size in enumerate(sizes[1:]):
            at = main[k % len(main)]
            name = f"b{k}"
            first = [checkpoint(at["seq"] + 1, branch=name)]
            more = events(at["seq"] + 2, at["seq"] + size, branch=name)
            await source.create_branch(fork("t1", name, at), first)
            if more:
                await source.append("t1", name, more, after=at["seq"] + 1)
        exported = await export_thread(source, "t1")
        await import_thread(target, exported)
        assert await export_thread(target, "t1") == exported

    anyio.run(check)
