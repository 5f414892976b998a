"""An event id is looked up within its thread, on every store: two threads may hold one id.

Two graphs that each count their ids from 1 (``sequential_ids()``), on one store, write the
same ids into their threads. The memory and file stores kept one place per id for the whole
store, so the later thread's event hid the earlier one's: ``load(at=)`` and ``fork(from_=)``
of the earlier thread said it had no such event, while the SQL stores found it.

Two such graphs on one thread repeat its ids. The id then names its first copy (the lowest
seq, then the branch id by code points) on every store; the memory and file stores took the
last one written, the SQL stores the one on the branch whose id sorts first.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nodestep import END, START, Graph
from nodestep.store import FilesystemStateStore, StateStore
from nodestep.store._file import persisted
from nodestep.testing import checkpoint, event, sequential_ids
from store_helpers import Poll, reopened, tally

pytestmark = pytest.mark.anyio


def counting_graph(store: StateStore) -> Graph[Poll]:
    """A poll graph with ids of its own, counted from 1 as in a new process."""
    return Graph(Poll, state_store=store, id_factory=sequential_ids()).flow(
        START >> tally, tally >> END
    )


async def test_threads_written_with_the_same_ids_each_travel_to_their_own_events(
    store: StateStore,
) -> None:
    first, second = counting_graph(store), counting_graph(store)
    await first.ainvoke({"votes": ["yes"]}, thread_id="poll-a")
    await second.ainvoke({"votes": ["no", "no"]}, thread_id="poll-b")
    ids_a = [e.id for e in (await first.history("poll-a")).events]
    ids_b = [e.id for e in (await first.history("poll-b")).events]
    assert ids_a == ids_b  # the case: each graph counted from 1
    for graph in (first, counting_graph(reopened(store))):
        assert await graph.load("poll-a", at=ids_a[-1]) == {"votes": ["yes"], "count": 1}
        assert await graph.load("poll-b", at=ids_b[-1]) == {"votes": ["no", "no"], "count": 2}
    forked = await first.fork("poll-a", from_=ids_a[-1], name="again")
    result = await first.ainvoke({"votes": ["maybe"]}, thread_id="poll-a", branch_id=forked.id)
    assert result.state.votes == ["yes", "maybe"]
    assert forked.from_sequence == 4


@pytest.fixture
def small_saves(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(persisted, "SAVE_AFTER", 1)  # small files get an index too
    yield


async def _shared_ids(path: Path) -> list[str]:
    """Write threads t0 and t1 whose records have the same ids; return the ids."""
    store = FilesystemStateStore(path)
    records = [checkpoint(1), *(event(seq) for seq in range(2, 6))]
    for thread in ("t0", "t1"):
        mine = [{**r, "thread": thread} for r in records]
        await store.append(thread, "main", mine, after=0)
    await store.aclose()
    return [r["id"] for r in records]


@pytest.mark.usefixtures("small_saves")
async def test_a_cold_open_from_the_index_finds_each_threads_event(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    ids = await _shared_ids(path)
    store = FilesystemStateStore(path)
    assert isinstance(store._log.records, persisted.LazyRecordIndex)  # the index answers
    for thread in ("t0", "t1"):
        assert [await store.locate(thread, i) for i in ids] == [("main", s) for s in range(1, 6)]


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.usefixtures("small_saves")
async def test_an_index_of_an_older_version_is_not_used(tmp_path: Path, version: int) -> None:
    # A version 1 index kept one place per id for the whole file: in it, t0's events that t1
    # repeated were t1's. A version 2 index kept the last copy of an id a thread holds twice,
    # not the first. The store reads the file instead, and finds each thread's own first.
    path = tmp_path / "history.jsonl"
    ids = await _shared_ids(path)
    index = persisted.sidecar(path)
    head = index.read_bytes()[: persisted.HEAD]
    now = f'"version":{persisted.VERSION}'.encode()
    assert head.count(now) == 1
    with index.open("r+b") as f:
        f.write(head.replace(now, f'"version":{version}'.encode()))
    store = FilesystemStateStore(path)
    assert type(store._log.records) is not persisted.LazyRecordIndex
    assert await store.locate("t0", ids[-1]) == ("main", 5)
    await store.aclose()


# -- one thread that holds an id twice --------------------------------------------------


async def test_two_graphs_writing_one_thread_travel_to_the_first_event_of_a_repeated_id(
    store: StateStore,
) -> None:
    # Each graph counts its ids from 1, so the second turn repeats the first turn's ids.
    await counting_graph(store).ainvoke({"votes": ["yes"]}, thread_id="poll")
    await counting_graph(store).ainvoke({"votes": ["no"]}, thread_id="poll")
    events = (await counting_graph(store).history("poll")).events
    ids = [e.id for e in events]
    assert ids[6] == ids[2]  # the case: the second turn ends with the first's step id
    for graph in (counting_graph(store), counting_graph(reopened(store))):
        assert await graph.load("poll", at=ids[2]) == {"votes": ["yes"], "count": 1}
    forked = await counting_graph(store).fork("poll", from_=ids[2], name="again")
    assert forked.from_sequence == 3


@pytest.mark.usefixtures("small_saves")
async def test_a_cold_open_from_the_index_finds_the_first_copy_of_a_repeated_id(
    tmp_path: Path,
) -> None:
    path = tmp_path / "history.jsonl"
    store = FilesystemStateStore(path)
    records = [checkpoint(1), *(event(seq) for seq in range(2, 4))]
    again = [{**r, "seq": r["seq"] + 3} for r in records]
    await store.append("t1", "main", records, after=0)
    await store.append("t1", "main", again, after=3)
    await store.aclose()
    store = FilesystemStateStore(path)
    assert isinstance(store._log.records, persisted.LazyRecordIndex)  # the index answers
    assert [await store.locate("t1", r["id"]) for r in records] == [("main", s) for s in (1, 2, 3)]
    assert await store.prune("t1", keep_last=2) == 3  # from checkpoint 4 on: the copies
    assert [await store.locate("t1", r["id"]) for r in records] == [("main", s) for s in (4, 5, 6)]
    await store.aclose()


def test_an_append_indexed_as_one_batch_is_indexed_as_record_by_record() -> None:
    # The memory and file stores index an append's records with one add_events call.
    from nodestep.store._contract import REQUEST_KEY
    from nodestep.store._index import RecordIndex

    started = {**event(2, "t1"), "type": "run_started", REQUEST_KEY: "key"}
    appends = [
        [checkpoint(1, "t1"), started, event(3, "t1")],
        [{**event(4, "t1"), "id": started["id"]}, checkpoint(5, "t1")],  # a repeated id
        [event(1, "t1", "b"), checkpoint(2, "t1", "b")],
        [event(1, "t2")],
    ]
    batched, one_by_one = RecordIndex(), RecordIndex()
    for records in appends:
        batched.add_events(records, [r["seq"] * 10 for r in records])
        for record in records:
            one_by_one.add_event(record, record["seq"] * 10)
    assert vars(batched) == vars(one_by_one)
    assert batched.requests == {("t1", "main", "key"): 2}
    assert batched.repeats == {("t1", started["id"]): [("main", 4)]}
    with pytest.raises(ValueError, match="2 records, but 1 locations"):
        batched.add_events([event(2, "t2"), event(3, "t2")], [20])
