"""A graph's cache of latest positions notices another history put in the store's place:
a file renamed over the path with as many records is read, never the old file's state."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nodestep import (
    Graph,
    InMemoryStateStore,
    SQLiteStateStore,
)
from nodestep.store import StateStore
from store_helpers import Poll, open_file, poll_graph, reopened

pytestmark = pytest.mark.anyio


async def two_files(tmp_path: Path) -> tuple[Graph[Poll], Path, Path]:
    """A graph on ``live.jsonl`` that cached poll-1, and a file with as many records of it."""
    live, other = tmp_path / "live.jsonl", tmp_path / "other.jsonl"
    graph = poll_graph(open_file(live))
    await graph.ainvoke({"votes": ["yes"]}, thread_id="poll-1")
    assert (await graph.get_state("poll-1")).value.votes == ["yes"]  # now cached
    await poll_graph(open_file(other)).ainvoke({"votes": ["no", "no"]}, thread_id="poll-1")
    return graph, live, other


async def records_of(path: Path) -> int:
    return await open_file(path).last_sequence("poll-1", "main")


async def test_get_state_reads_a_file_renamed_over_the_path_with_as_many_records(
    tmp_path: Path,
) -> None:
    graph, live, other = await two_files(tmp_path)
    assert await records_of(live) == await records_of(other)  # the count cannot tell
    os.replace(other, live)
    snapshot = await graph.get_state("poll-1")
    assert (snapshot.value.votes, snapshot.value.count) == (["no", "no"], 2)
    assert await graph.load("poll-1") == {"votes": ["no", "no"], "count": 2}


async def test_get_state_reads_a_file_another_process_renamed_over_the_path(
    tmp_path: Path,
) -> None:
    graph, live, other = await two_files(tmp_path)
    rename = "import os, sys; os.replace(sys.argv[1], sys.argv[2])"
    subprocess.run([sys.executable, "-c", rename, str(other), str(live)], check=True)
    assert (await graph.get_state("poll-1")).value.votes == ["no", "no"]


async def test_a_run_after_the_file_was_replaced_continues_the_new_files_state(
    tmp_path: Path,
) -> None:
    graph, live, other = await two_files(tmp_path)
    os.replace(other, live)
    result = await graph.ainvoke({"votes": ["maybe"]}, thread_id="poll-1")
    assert (result.state.votes, result.state.count) == (["no", "no", "maybe"], 3)
    fresh = poll_graph(open_file(live))
    assert (await fresh.get_state("poll-1")).value.votes == ["no", "no", "maybe"]


async def test_following_a_replaced_file_gives_the_store_a_new_generation(
    tmp_path: Path,
) -> None:
    _graph, live, other = await two_files(tmp_path)
    store = open_file(live)
    before = store.generation
    await store.last_sequence("poll-1", "main")
    assert store.generation is before  # the same file: the same generation
    os.replace(other, live)
    await store.last_sequence("poll-1", "main")
    assert store.generation is not before
    assert open_file(live).generation is not store.generation


class CountingLoads(InMemoryStateStore):
    """Counts the loads that go past the cache to the store's records."""

    def __init__(self) -> None:
        super().__init__()
        self.loads = 0

    async def read_tail(
        self, thread_id: str, branch_id: str, *, at: int | None = None
    ) -> list[dict[str, object]]:
        self.loads += 1
        return await super().read_tail(thread_id, branch_id, at=at)


async def test_a_store_with_one_generation_is_answered_from_the_cache() -> None:
    store = CountingLoads()
    graph = poll_graph(store)
    await graph.ainvoke({"votes": ["yes"]}, thread_id="poll-1")
    loads = store.loads
    for _ in range(3):
        assert (await graph.get_state("poll-1")).value.votes == ["yes"]
    assert store.loads == loads


async def test_a_new_generation_makes_the_cache_load_again() -> None:
    store = CountingLoads()
    graph = poll_graph(store)
    await graph.ainvoke({"votes": ["yes"]}, thread_id="poll-1")
    loads = store.loads
    store.generation = object()  # as a store does when its history was replaced
    assert (await graph.get_state("poll-1")).value.votes == ["yes"]
    assert store.loads == loads + 1
    assert (await graph.get_state("poll-1")).value.votes == ["yes"]
    assert store.loads == loads + 1  # cached again, under the new generation


# -- a thread deleted and written again to as many records ------------------------------


async def deleted_and_rewritten(first: Graph[Poll], other: Graph[Poll]) -> None:
    """``first`` caches poll-1; ``other`` deletes it and writes it again, as long."""
    await first.ainvoke({"votes": ["yes"]}, thread_id="poll-1")
    assert (await first.get_state("poll-1")).value.votes == ["yes"]  # now cached
    before = await first.get_state("poll-1")
    await other.delete_thread("poll-1")
    await other.ainvoke({"votes": ["no", "no"]}, thread_id="poll-1")
    after = await other.get_state("poll-1")
    assert after.sequence == before.sequence and after.event_id != before.event_id


async def test_a_thread_deleted_and_written_again_as_long_is_read_again(store: StateStore) -> None:
    first, other = poll_graph(store), poll_graph(reopened(store))
    await deleted_and_rewritten(first, other)
    snapshot = await first.get_state("poll-1")
    assert (snapshot.value.votes, snapshot.value.count) == (["no", "no"], 2)
    assert await first.load("poll-1") == {"votes": ["no", "no"], "count": 2}
    result = await first.ainvoke({"votes": ["maybe"]}, thread_id="poll-1")
    assert (result.state.votes, result.state.count) == (["no", "no", "maybe"], 3)
    assert (await other.get_state("poll-1")).value == result.state


async def test_another_sqlite_store_object_deleting_and_rewriting_a_thread_is_noticed(
    tmp_path: Path,
) -> None:
    # As another process would: its own connection, the first store's cache untouched.
    path = tmp_path / "h.db"
    mine, theirs = SQLiteStateStore(path), SQLiteStateStore(path)
    first = poll_graph(mine)
    await deleted_and_rewritten(first, poll_graph(theirs))
    result = await first.ainvoke({"votes": ["maybe"]}, thread_id="poll-1")
    assert (result.state.votes, result.state.count) == (["no", "no", "maybe"], 3)
    await mine.aclose()
    await theirs.aclose()


async def test_a_run_on_a_thread_deleted_and_written_again_starts_from_the_new_one(
    store: StateStore,
) -> None:
    # No read in between: the run takes its lease with its first records, checked against
    # the cached position's last record by id where the store gives ids, and reads anew.
    first, other = poll_graph(store), poll_graph(reopened(store))
    await deleted_and_rewritten(first, other)
    result = await first.ainvoke({"votes": ["maybe"]}, thread_id="poll-1")
    assert (result.state.votes, result.state.count) == (["no", "no", "maybe"], 3)
    records = await store.read("poll-1", "main")
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
