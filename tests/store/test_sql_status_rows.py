"""The SQL stores keep a thread's status on every row of its main branch.

``list_threads`` reads a thread's status from the last row of its main branch that holds
one. A ``state_updated`` record says none (it edits values, not where the thread stands),
so its row carries the status of the row before it: within one append, and from the
stored rows when an append starts with one. The listing then reads one row whatever the
history, without an index of statuses that every append would pay for. Files of an
earlier nodestep (rows without a carried status, and that index) still list right, and
lose the index when opened.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from nodestep import SQLiteStateStore
from nodestep.store._sql import ops
from nodestep.testing import checkpoint, event, events
from postgres_server import ThrowawayPostgresStore, require_postgres

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    if request.param == "sqlite":
        made: Any = SQLiteStateStore(tmp_path / "h.db")
    else:
        made = ThrowawayPostgresStore(require_postgres(), schema=f"t_{uuid.uuid4().hex[:16]}")
    try:
        yield made
    finally:
        await made.aclose()


async def _statuses(store: Any, thread: str = "t1", branch: str = "main") -> list[str | None]:
    """The status column of a branch's rows, in order."""
    sql = "SELECT status FROM nodestep_events WHERE thread = ? AND branch = ? ORDER BY seq"
    rows = await store._run(_select(sql, (thread, branch)))
    return [row[0] for row in rows]


def _select(sql: str, params: tuple[Any, ...]) -> ops.Op:
    rows = yield ops.Stmt(sql, params)
    return rows


def _paused(seq: int) -> dict[str, Any]:
    return event(seq, type="run_paused", run="r1", step=0)


@pytest.mark.parametrize("size", [3, ops.BIG_APPEND + 2], ids=["one statement", "many"])
async def test_an_append_of_records_without_a_status_carries_the_stored_one(
    store: Any, size: int
) -> None:
    await store.append("t1", "main", [checkpoint(1), _paused(2)], after=0)
    await store.append("t1", "main", events(3, 2 + size), after=2)

    statuses = await _statuses(store)
    assert statuses[1:] == ["paused"] * (1 + size)
    (info,) = (await store.list_threads()).threads
    assert info.status == "paused"


async def test_records_without_a_status_carry_the_one_before_them_in_their_append(
    store: Any,
) -> None:
    started = event(2, type="run_started", run="r1", input=None, tasks=[])
    await store.append("t1", "main", [checkpoint(1), started, *events(3, 5)], after=0)

    assert await _statuses(store) == [None, "unfinished", "unfinished", "unfinished", "unfinished"]
    (info,) = (await store.list_threads()).threads
    assert info.status == "unfinished"


async def test_a_forks_rows_keep_no_status(store: Any) -> None:
    from nodestep.testing import fork

    first = [checkpoint(1), _paused(2)]
    await store.append("t1", "main", first, after=0)
    await store.create_branch(fork("t1", "b1", first[1]), [checkpoint(3, branch="b1")])
    await store.append("t1", "b1", events(4, 5, branch="b1"), after=3)

    assert await _statuses(store, branch="b1") == [None, None, None]
    (info,) = (await store.list_threads()).threads
    assert info.status == "paused"  # the main branch's


async def test_a_file_of_an_earlier_nodestep_lists_right_and_loses_its_index(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    store = SQLiteStateStore(path)
    await store.append("t1", "main", [checkpoint(1), _paused(2), *events(3, 40)], after=0)
    await store.aclose()
    # As an earlier nodestep left it: no status on state_updated rows, and the index.
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE nodestep_events SET status = NULL WHERE kind = 'state_updated'")
        conn.execute(
            "CREATE INDEX nodestep_statuses ON nodestep_events (thread, branch, seq) "
            "WHERE status IS NOT NULL"
        )
    conn.close()

    again = SQLiteStateStore(path)
    try:
        (info,) = (await again.list_threads()).threads
        assert info.status == "paused"
        await again.append("t1", "main", events(41, 42), after=40)
        assert (await _statuses(again))[-3:] == [None, "paused", "paused"]
    finally:
        await again.aclose()
    with sqlite3.connect(path) as conn:
        index = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE name = 'nodestep_statuses'"
        ).fetchall()
    conn.close()
    assert index == []


def test_rows_are_refused_for_lines_that_do_not_match_their_records() -> None:
    # A bug of the caller, never a record's fault: no row may pair a record with a line
    # that is not its own.
    records = events(1, 2, thread="t1")
    with pytest.raises(ValueError, match="2 records, but 1 lines"):
        ops.rows_of("t1", "main", records, [b"{}"])
