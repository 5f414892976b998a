"""``SQLiteStateStore``'s write path: the rows and leases its statements store.

Its appends and leases run in ``BEGIN IMMEDIATE`` transactions, with statements of their own
(``locked_ops``) and parameters given as ``sqlite3`` binds them for the least work; what
they store must be what the shared statements store, in both layouts of ``sqlite_layouts``.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from forking import in_child, needs_fork, runner, wait
from sqlite_layouts import LAYOUTS, make_older_file, sqlite_store

from nodestep import SQLiteStateStore, ThreadBusyError
from nodestep.store._contract import REQUEST_KEY, Record
from nodestep.store._sql import locked_ops, ops
from nodestep.testing import checkpoint, event

pytestmark = pytest.mark.anyio
run = runner("asyncio")


def _started(seq: int, key: str) -> Record:
    record = event(seq, type="run_started")
    record[REQUEST_KEY] = key
    return record


class _SharedStatements(SQLiteStateStore):
    """The store with the statements PostgreSQL runs (one statement an append or lease)."""

    _locked_writes = False


def _rows(path: Path) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(
            "SELECT thread, branch, seq, id, kind, request, typeof(request), line, "
            "typeof(line), ts, status FROM nodestep_events ORDER BY seq"
        ).fetchall()
    finally:
        conn.close()


async def _write(store: SQLiteStateStore, records: list[Record]) -> None:
    lease, stored = await store.acquire_and_append(
        "t1", "main", "run", records[:3], ttl=60, after=0
    )
    assert stored
    await store.append_and_release(lease, records[3:5], after=3)
    await store.append("t1", "main", records[5:], after=5)
    await store.aclose()


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_leased_appends_store_the_rows_the_shared_statements_store(
    tmp_path: Path, layout: str
) -> None:
    # A key "0" is a key, not the 0 that stands for none (``rows_of(locked=True)``).
    records = [checkpoint(1), _started(2, "order-7"), event(3), _started(4, "0"), event(5)]
    records += [event(6, type="run_completed", status="completed"), event(7)]
    await _write(sqlite_store(tmp_path / "a.db", layout), records)
    if layout == "older":
        make_older_file(tmp_path / "b.db")
    await _write(_SharedStatements(tmp_path / "b.db"), records)
    rows = _rows(tmp_path / "a.db")
    assert rows == _rows(tmp_path / "b.db")
    assert [(row[6], row[8]) for row in rows] == [("null", "blob"), ("text", "blob")] + [
        ("null", "blob"),
        ("text", "blob"),
    ] + [("null", "blob")] * 3
    store = SQLiteStateStore(tmp_path / "a.db")
    assert await store.read("t1", "main") == records
    assert await store.find_request("t1", "main", "0") == 4


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_a_lease_is_taken_over_when_expired_and_refused_while_current(
    tmp_path: Path, layout: str
) -> None:
    store = sqlite_store(tmp_path / "h.db", layout)
    old = await store.acquire_lease("t1", "main", "run-a", ttl=60)
    with pytest.raises(ThreadBusyError):
        await store.acquire_lease("t1", "main", "run-b", ttl=60)
    conn = sqlite3.connect(tmp_path / "h.db")
    with conn:
        conn.execute("UPDATE nodestep_leases SET expires = 0")
    conn.close()
    new, stored = await store.acquire_and_append(
        "t1", "main", "run-b", [checkpoint(1)], ttl=60, after=0
    )
    assert stored and new.id != old.id and new.holder == "run-b"
    with pytest.raises(ThreadBusyError):
        await store.append_leased(old, [event(2)], after=1)
    await store.aclose()


@needs_fork
def test_a_lease_of_a_holder_that_ended_is_taken_at_once(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    SQLiteStateStore(path)

    def take_and_exit() -> int:
        run(SQLiteStateStore(path).acquire_lease("t1", "main", "run-a", ttl=3600))
        return 0  # exits holding it

    assert wait(in_child(take_and_exit)) == 0
    taken = run(SQLiteStateStore(path).acquire_lease("t1", "main", "run-b", ttl=60))
    assert taken.holder == "run-b" and taken.pid == os.getpid()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_reads_of_appends_and_leases_search_indexes_only(tmp_path: Path, layout: str) -> None:
    # No SCAN: a read that grew with the history would make every append cost more.
    sqlite_store(tmp_path / "h.db", layout)
    conn = sqlite3.connect(tmp_path / "h.db")
    try:
        for sql, params in (
            (locked_ops._HELD_LAST_ROW, ("t1", "main", "lease")),
            (locked_ops._LAST_ROW, ("t1", "main")),
            (ops.LEASE, ("t1", "main")),
        ):
            plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
            assert plan and all(not step.startswith("SCAN") for step in plan), (sql, plan)
            assert any(step.startswith("SEARCH nodestep_events") for step in plan) or (
                sql == ops.LEASE
            )
    finally:
        conn.close()


async def test_appends_and_leases_run_on_the_cursor_without_a_generator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ``locked_ops.drive`` runs an operation's generator; SQLite's appends and leases are
    # functions of its cursor (a generator's round trips cost 35K instructions a W10 turn).
    driven: list[str] = []
    drive = locked_ops.drive

    def counted(cursor: locked_ops.Cursor, op: ops.Op) -> object:
        driven.append(op.__name__)
        return drive(cursor, op)

    monkeypatch.setattr(locked_ops, "drive", counted)
    store = SQLiteStateStore(tmp_path / "h.db")
    records = [event(seq) for seq in range(1, 8)]
    lease, stored = await store.acquire_and_append(
        "t1", "main", "run", records[:2], ttl=60, after=0
    )
    assert stored
    lease = await store.append_leased(lease, records[2:4], after=2)
    await store.append_and_release(lease, records[4:5], after=4)
    lease = await store.acquire_lease("t1", "main", "run-2", ttl=60)
    await store.append_and_release(lease, records[5:6], after=5)
    await store.append("t1", "main", records[6:], after=6)
    assert driven == []
    assert await store.last_sequence("t1", "main") == 7
    assert driven == ["last_sequence"]  # a read: a generator, shared with PostgreSQL
    await store.aclose()
