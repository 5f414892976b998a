"""Properties of prune, on the memory store and the file store alike.

For any branch (a checkpoint first, more anywhere), any ``keep_last`` and ``older_than``:
what is kept is a suffix of the branch starting at a checkpoint; at least the last
``keep_last`` records and every record at or after ``older_than`` are kept; the loaded
tail and the last sequence are unchanged; the count returned is what went; and a file
store opened afresh reads the same.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodestep import FilesystemStateStore, InMemoryStateStore
from nodestep.store import StateStore
from nodestep.testing import event

pytestmark = pytest.mark.anyio


def branch(kinds: list[bool]) -> list[dict[str, object]]:
    """Records 1..n; record i is a checkpoint when kinds[i] (the first always is), ts = seq."""
    return [
        {**event(i + 1, type="checkpoint" if i == 0 or cp else "state_updated"), "ts": i + 1.0}
        for i, cp in enumerate(kinds)
    ]


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(
    kinds=st.lists(st.booleans(), min_size=1, max_size=30),
    keep_last=st.none() | st.integers(min_value=1, max_value=35),
    older_than=st.none() | st.floats(min_value=0.0, max_value=40.0),
    file=st.booleans(),
)
async def test_prune_keeps_a_loadable_suffix_that_honours_both_rules(
    kinds: list[bool], keep_last: int | None, older_than: float | None, file: bool
) -> None:
    if keep_last is None and older_than is None:
        keep_last = 1
    records = branch(kinds)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "history.jsonl"
        store: StateStore = FilesystemStateStore(path) if file else InMemoryStateStore()
        await store.append("t1", "main", records, after=0)
        tail = await store.read_tail("t1", "main")

        dropped = await store.prune(keep_last=keep_last, older_than=older_than)

        kept = await store.read("t1", "main")
        assert kept == records[dropped:]
        assert kept[0]["type"] == "checkpoint"
        if keep_last is not None:
            assert len(kept) >= min(keep_last, len(records))
        if older_than is not None:
            assert all(r in kept for r in records if r["ts"] >= older_than)
        assert await store.read_tail("t1", "main") == tail
        assert await store.last_sequence("t1", "main") == len(records)
        if file:
            await store.aclose()
            assert await FilesystemStateStore(path).read("t1", "main") == kept
