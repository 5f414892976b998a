"""A damaged record of an SQL store is named by its place in the read, in plain English:
"the 3rd of this read", not "the 3th"."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from nodestep import SQLiteStateStore, StateStoreError
from nodestep.testing import checkpoint, events

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(("seq", "place"), [(1, "1st"), (2, "2nd"), (3, "3rd"), (12, "12th")])
async def test_a_damaged_record_is_named_by_its_ordinal_in_the_read(
    tmp_path: Path, seq: int, place: str
) -> None:
    store = SQLiteStateStore(tmp_path / "h.db")
    await store.append("t1", "main", [checkpoint(1), *events(2, 12)], after=0)
    with sqlite3.connect(tmp_path / "h.db") as conn:
        conn.execute("UPDATE nodestep_events SET line = X'7b7d0a' WHERE seq = ?", (seq,))
    with pytest.raises(StateStoreError, match=rf"branch 'main' \(the {place} of this read\)"):
        await store.read("t1", "main")
    await store.aclose()
