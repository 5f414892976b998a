"""Property: a history file cut at any byte reopens as exactly the appends it holds whole."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodestep._errors import StateStoreError
from nodestep.store import FilesystemStateStore
from nodestep.testing import checkpoint, event, fork, seqs

# anyio's plugin runs each example of these async hypothesis tests on the test's back end.
pytestmark = pytest.mark.anyio

texts = st.text(max_size=40)
batch_sizes = st.lists(st.integers(min_value=1, max_value=4), min_size=0, max_size=8)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(sizes=batch_sizes, words=st.lists(texts, min_size=1, max_size=5), data=st.data())
async def test_file_cut_anywhere_reopens_as_the_whole_appends_before_the_cut(
    sizes: list[int], words: list[str], data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "history.jsonl"
        store = FilesystemStateStore(path)
        appended, ends = [], [path.stat().st_size]  # ends[i]: file size after i appends
        for size in sizes:
            last = sum(map(len, appended))
            batch = [
                (checkpoint if i % 3 == 2 else event)(last + i + 1, text=words[i % len(words)])
                for i in range(size)
            ]
            await store.append("t1", "main", batch, after=last)
            appended.append(batch)
            ends.append(path.stat().st_size)
        await store.aclose()

        # Sizes vary with timestamps and ids, so draw the cut relative to them: a region
        # (0: the header, i: the i-th append) and a place inside it, its ends included.
        region = data.draw(st.integers(min_value=0, max_value=len(sizes)), label="region")
        start = ends[region - 1] if region else 0
        inside = data.draw(st.integers(min_value=0, max_value=1000), label="per mille")
        cut = start + (ends[region] - start) * inside // 1000
        with path.open("r+b") as f:
            f.truncate(cut)
        whole = sum(end <= cut for end in ends[1:])  # appends whose bytes all survive
        kept = ends[whole] if cut >= ends[0] else 0

        again = FilesystemStateStore(path)
        try:
            assert again.repaired_bytes == cut - kept
            expected = [r for batch in appended[:whole] for r in batch]
            assert await again.read("t1", "main") == expected
            await again.append("t1", "main", [event(len(expected) + 1)], after=len(expected))
            assert path.read_bytes().endswith(b"\n")
        finally:
            await again.aclose()
        assert await FilesystemStateStore(path).last_sequence("t1", "main") == len(expected) + 1


async def _valid_history(path: Path) -> None:
    store = FilesystemStateStore(path)
    main = [event(1), checkpoint(2, text="ünï")]
    await store.append("t1", "main", main, after=0)
    await store.append("t2", "main", [event(1, "t2")], after=0)
    await store.create_branch(fork("t1", "alt", main[0]), [checkpoint(2, branch="alt")])
    await store.append("t1", "main", [event(3), event(4)], after=2)
    await store.aclose()


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    flips=st.lists(
        st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), min_size=1, max_size=3
    )
)
async def test_damaged_bytes_give_a_prefix_or_a_precise_error_never_another_exception(
    flips: list[tuple[float, int]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "history.jsonl"
        await _valid_history(path)
        data = bytearray(path.read_bytes())
        for where, value in flips:
            data[int(where * len(data))] = value
        path.write_bytes(bytes(data))
        try:
            store = FilesystemStateStore(path)
        except StateStoreError as e:
            assert e.path == str(path)
            return
        try:
            for thread in ("t1", "t2"):
                for branch in ("main", "alt"):
                    records = await store.read(thread, branch)
                    first = records[0]["seq"] if records else 1
                    assert seqs(records) == list(range(first, first + len(records)))
            await store.append("t9", "main", [event(1, "t9")], after=0)
        finally:
            await store.aclose()
