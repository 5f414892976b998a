"""The SQL stores' lookups read a few index entries, however long the branch: their plans.

A lookup that reads every row of a branch makes each append and each ``get_state`` cost
grow with the history. PostgreSQL plans ``max(seq)`` so while a table has no statistics yet
(freshly filled, before autovacuum analyzes it), so the stores ask for ``ORDER BY seq DESC
LIMIT 1`` instead. These tests count, with ``EXPLAIN ANALYZE``, the rows each lookup reads
from a branch of 600 records that the server has no statistics about; no timing.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from nodestep.store._sql import ops, postgres
from nodestep.testing import checkpoint, event, events
from postgres_server import ThrowawayPostgresStore, require_postgres

LENGTH = 600


def _records() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for first in range(1, LENGTH + 1, 50):  # a checkpoint every 50 records, as the engine
        out.append(checkpoint(first))
        out.extend(events(first + 1, first + 49))
    return out


@pytest.fixture(scope="module")
def branch() -> Iterator[tuple[Any, str]]:
    """A connection to a schema with one 600-record branch ``t1/main``, never analyzed."""
    import anyio
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:16]}"
    store = ThrowawayPostgresStore(require_postgres(), schema=schema)
    with psycopg.connect(store.dsn, autocommit=True, options=f"-c search_path={schema}") as conn:
        anyio.run(lambda: store.append("t1", "main", _records(), after=0))
        # A paused thread edited many times since: state_updated records say no status.
        paused = [checkpoint(1, "t2"), event(2, "t2", type="run_paused", run="r1", step=0)]
        edits = events(3, LENGTH, "t2")
        anyio.run(lambda: store.append("t2", "main", [*paused, *edits], after=0))
        conn.execute("ALTER TABLE nodestep_events SET (autovacuum_enabled = false)")
        try:
            yield conn, schema
        finally:
            anyio.run(store.aclose)


def _rows_read(conn: Any, op: ops.Op) -> tuple[int, list[Any]]:
    """Run the first statement of ``op`` under EXPLAIN ANALYZE: the rows its scans read."""
    stmt = next(op)
    assert isinstance(stmt, ops.Stmt)
    sql = postgres._params(stmt.sql)  # as the store sends it
    plan = conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", stmt.params).fetchone()[0]
    result = conn.execute(sql, stmt.params).fetchall()
    return _scanned(plan[0]["Plan"]), result


def _scanned(node: dict[str, Any]) -> int:
    own = node["Actual Rows"] * node["Actual Loops"] if "Scan" in node["Node Type"] else 0
    return own + sum(_scanned(child) for child in node.get("Plans", []))


def test_the_last_sequence_reads_one_index_entry(branch: tuple[Any, str]) -> None:
    scanned, rows = _rows_read(branch[0], ops.last_sequence("t1", "main"))
    assert rows == [(LENGTH,)]
    assert scanned == 1


def test_the_last_checkpoint_reads_one_index_entry(branch: tuple[Any, str]) -> None:
    scanned, rows = _rows_read(branch[0], ops.last_checkpoint("t1", "main", None))
    assert rows == [(551,)]
    assert scanned == 1


def test_the_tail_reads_the_records_from_the_last_checkpoint_only(
    branch: tuple[Any, str],
) -> None:
    scanned, rows = _rows_read(branch[0], ops.read_tail("t1", "main", None))
    assert len(rows) == 50  # 551 to 600
    assert scanned == 50 + 1  # and the checkpoint's index entry


def test_an_event_is_found_by_its_index(branch: tuple[Any, str]) -> None:
    # Ordered by seq, then the branch by bytes: the few copies of a repeated id, after the
    # index found them; no scan of the branch.
    conn = branch[0]
    [(event_id,)] = conn.execute("SELECT id FROM nodestep_events WHERE seq = 300 AND thread = 't1'")
    scanned, rows = _rows_read(conn, ops.locate("t1", event_id))
    assert rows == [("main", 300)]
    assert scanned == 1


def test_a_request_is_found_by_its_index(branch: tuple[Any, str]) -> None:
    scanned, rows = _rows_read(branch[0], ops.find_request("t1", "main", "no-such-key"))
    assert rows == []
    assert scanned == 0


def test_the_check_of_an_append_reads_one_index_entry(branch: tuple[Any, str]) -> None:
    # A refused append (``after`` is not the last sequence) inserts nothing: safe to run.
    record = events(LENGTH + 1, LENGTH + 1)
    lines = [b"{}"]
    scanned, rows = _rows_read(branch[0], ops.append("t1", "main", record, lines, after=7))
    assert rows == []
    assert scanned == 1


def test_the_status_of_a_thread_reads_one_row(branch: tuple[Any, str]) -> None:
    # What list_threads asks of each thread; its last row carries the status it says.
    def status() -> ops.Op:
        rows = yield ops.Stmt(ops.LAST_STATUS.format(t="?", b="?"), ("t2", "main"))
        return rows

    scanned, rows = _rows_read(branch[0], status())
    assert rows == [("paused",)]
    assert scanned == 1
