"""Moving threads between stores: ``export_thread``, ``import_thread``, ``copy_thread``."""

from __future__ import annotations

import json
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
from nodestep.store import Record, StateStore
from nodestep.testing import checkpoint, event, events, fork, sequential_ids
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


async def _pruned_thread(store: StateStore) -> None:
    """Forty turns, a fork from the tenth event, then a prune that drops that event."""
    graph = poll_graph(store)
    for i in range(40):
        await graph.ainvoke({"votes": [f"v{i}"]}, thread_id="poll")
    early = (await graph.history("poll")).events[10]
    await graph.fork("poll", from_=early.id, name="early")
    assert await graph.prune("poll", keep_last=20) > 0
    assert await store.locate("poll", early.id) is None


@pytest.mark.parametrize("kind", ["memory", "filesystem", "sqlite", "postgres"])
async def test_a_pruned_thread_copied_reads_runs_forks_and_time_travels_the_same(
    tmp_path: Path, kind: str
) -> None:
    from backends import STORES

    source = InMemoryStateStore()
    await _pruned_thread(source)
    target = STORES[kind](tmp_path)
    await copy_thread(source, target, "poll")
    exported = await export_thread(source, "poll")
    assert await export_thread(target, "poll") == exported
    if isinstance(target, FilesystemStateStore):  # read back from its file, by a new store
        await target.aclose()
        target = FilesystemStateStore(tmp_path / "history.jsonl")
        assert await export_thread(target, "poll") == exported
    was, now = poll_graph(source), poll_graph(target)
    for branch in ("main", "early"):
        assert (await now.get_state("poll", branch_id=branch)).value == (
            await was.get_state("poll", branch_id=branch)
        ).value
    kept = (await was.history("poll")).events[3]  # time travel to an event the prune kept
    then = (await was.get_state("poll", kept.id)).value
    assert (await now.get_state("poll", kept.id)).value == then
    for graph in (was, now):
        await graph.ainvoke({"votes": ["late"]}, thread_id="poll")
        await graph.ainvoke({"votes": ["side"]}, thread_id="poll", branch_id="early")
        await graph.fork("poll", from_=kept.id, name="again")
        await graph.ainvoke({"votes": ["again"]}, thread_id="poll", branch_id="again")
    ours, theirs = await export_thread(target, "poll"), await export_thread(source, "poll")
    shape = [[(r.get("seq"), r["type"], r.get("branch")) for r in x[:-1]] for x in (ours, theirs)]
    assert shape[0] == shape[1]
    for branch in ("main", "early", "again"):
        assert (await now.get_state("poll", branch_id=branch)).value == (
            await was.get_state("poll", branch_id=branch)
        ).value
    await target.aclose()


async def test_a_pruned_export_is_refused_by_a_store_that_cannot_keep_a_pruned_branch() -> None:
    class Unpruned(InMemoryStateStore):
        store_pruned = StateStore.store_pruned  # a store written before the method

    source = InMemoryStateStore()
    await _pruned_thread(source)
    target = Unpruned()
    with pytest.raises(
        StateStoreError,
        match=r"branch 'main' was pruned \(its first record kept is a checkpoint at seq "
        r"\d+\), and Unpruned cannot keep a pruned branch: it does not implement "
        r"store_pruned\(\)\. Import into a store that does",
    ):
        await copy_thread(source, target, "poll")
    assert await target.last_sequence("poll", "main") == 0


async def test_a_pruned_export_changed_after_it_was_made_is_refused() -> None:
    source = InMemoryStateStore()
    await _pruned_thread(source)
    exported = await export_thread(source, "poll")
    exported[0] = {**exported[0], "seq": exported[0]["seq"] + 1}
    with pytest.raises(StateStoreError, match=r"record 1 of the export .* does not match its"):
        await import_thread(InMemoryStateStore(), exported)


async def test_an_import_keeps_ids_sequences_times_and_branches(tmp_path: Path) -> None:
    source = InMemoryStateStore()
    await _forked_thread(source)
    exported = await export_thread(source, "poll")
    target = SQLiteStateStore(tmp_path / "t.db")
    assert await import_thread(target, exported) == "poll"
    again = await export_thread(target, "poll")
    assert again[-1] == exported[-1] and again[-1]["type"] == "export_checksum"
    assert [(r.get("id"), r.get("seq"), r["ts"], r["branch"]) for r in again[:-1]] == [
        (r.get("id"), r.get("seq"), r["ts"], r["branch"]) for r in exported[:-1]
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
    with pytest.raises(
        StateStoreError,
        match=r"record 2 of the export .line 2 as JSON Lines. is a branch record without its",
    ):
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


# -- refusals, each naming the record's position, and the checksum ----------------------


def _two_branches() -> list[Record]:
    """An export without a checksum: main (3 events), a branch from event 2 (2 events)."""
    main = [checkpoint(1), event(2), event(3)]
    alt = fork("t1", "alt", main[1])
    return [*main, alt.to_json(), checkpoint(3, branch="alt"), event(4, branch="alt")]


async def test_a_thread_that_holds_an_id_twice_is_copied_and_travels_as_before(
    store: StateStore,
) -> None:
    # Two graphs that count their ids from 1 wrote one thread: the second turn repeats the
    # first turn's ids. The store took those appends, so a copy takes them too.
    def counting() -> Graph[Poll]:
        graph = Graph(Poll, state_store=source, id_factory=sequential_ids())
        return graph.flow(START >> tally, tally >> END)

    source = InMemoryStateStore()
    await counting().ainvoke({"votes": ["yes"]}, thread_id="t1")
    await counting().ainvoke({"votes": ["no"]}, thread_id="t1")
    repeated = (await counting().history("t1")).events[2].id
    await copy_thread(source, store, "t1")
    assert await store.read("t1", "main") == await source.read("t1", "main")
    assert await store.locate("t1", repeated) == await source.locate("t1", repeated) == ("main", 3)
    assert await poll_graph(store).load("t1", at=repeated) == {"votes": ["yes"], "count": 1}


async def test_an_export_with_an_unknown_record_type_is_refused_naming_it() -> None:
    records = _two_branches()
    records[2] = {**records[2], "type": "run_exploded"}
    with pytest.raises(
        StateStoreError, match=r"record 3 of the export .* has the unknown type 'run_exploded'"
    ):
        await import_thread(InMemoryStateStore(), records)


async def test_a_branch_forked_from_an_event_the_export_lacks_is_refused() -> None:
    records = _two_branches()
    records[3] = {**records[3], "from_event": "no-such-event"}
    with pytest.raises(
        StateStoreError,
        match=r"record 4 of the export .* forks branch 'alt' from event 'no-such-event' "
        r"\(seq 2 of branch 'main'\), which the export does not hold; nothing was stored\. "
        r"A branch record follows",
    ):
        await import_thread(InMemoryStateStore(), records)
    records = _two_branches()
    records[3] = {**records[3], "parent": "ghost"}
    with pytest.raises(StateStoreError, match=r"record 4 .* from branch 'ghost', not before it"):
        await import_thread(InMemoryStateStore(), records)


async def test_an_export_ends_with_a_checksum_that_an_import_checks(tmp_path: Path) -> None:
    source = InMemoryStateStore()
    await _forked_thread(source)
    exported = await export_thread(source, "poll")
    last = exported[-1]
    assert last["type"] == "export_checksum" and last["records"] == len(exported) - 1
    # Saved as JSON Lines with its keys in another order, it still checks.
    path = tmp_path / "poll.jsonl"
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in exported))
    loaded = [json.loads(line) for line in path.read_text().splitlines()]
    assert await import_thread(InMemoryStateStore(), loaded) == "poll"


async def test_a_damaged_export_is_refused_naming_the_record_that_changed() -> None:
    source = InMemoryStateStore()
    await _forked_thread(source)
    exported = await export_thread(source, "poll")
    damaged = [dict(r) for r in exported]
    damaged[4]["ts"] = damaged[4]["ts"] + 1
    target = InMemoryStateStore()
    with pytest.raises(
        StateStoreError,
        match=r"record 5 of the export \(line 5 as JSON Lines\) does not match its checksum "
        r".*It was changed since the export\. Export the thread again",
    ):
        await import_thread(target, damaged)
    assert await target.last_sequence("poll", "main") == 0
    with pytest.raises(StateStoreError, match=r"counts \d+ records before it, not \d+"):
        await import_thread(target, [*exported[:3], *exported[4:]])
    swapped = [*exported[:3], exported[4], exported[3], *exported[5:]]
    with pytest.raises(StateStoreError, match=r"record 4 of the export .* does not match"):
        await import_thread(target, swapped)


async def test_an_export_without_a_checksum_as_0_1_wrote_still_imports() -> None:
    source = InMemoryStateStore()
    await _forked_thread(source)
    old_style = (await export_thread(source, "poll"))[:-1]
    target = InMemoryStateStore()
    assert await import_thread(target, old_style) == "poll"
    assert await export_thread(target, "poll") == await export_thread(source, "poll")


def test_an_import_knows_every_event_type_the_engine_writes() -> None:
    import nodestep._superstep.attempts
    import nodestep._superstep.nested  # noqa: F401 - their record classes, registered
    from nodestep._superstep.records import HistoryRecord
    from nodestep.store._transfer import EVENT_TYPES

    kinds = {k.kind for k in HistoryRecord.__subclasses__()}
    assert kinds == EVENT_TYPES
