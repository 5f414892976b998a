"""``SQLiteStateStore`` beyond the conformance suite: its file, its errors, and its processes.

The conformance suite and every per-store engine test run it already (``tests/backends.py``).
The tests that fork are sync (see ``forking``) and run on asyncio only: what they test is how
processes share the database.
"""

from __future__ import annotations

import os
import random
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest
from forking import (
    append_until_killed,
    in_child,
    kill_and_collect,
    needs_fork,
    runner,
    wait,
    whole_appends,
)
from sqlite_layouts import LAYOUTS, layout_of, make_older_file, sqlite_store

from nodestep import SQLiteStateStore, StateStoreError, ThreadBusyError, ThreadConflictError
from nodestep.testing import checkpoint, event, events, seqs

pytestmark = pytest.mark.anyio
run = runner("asyncio")


async def test_history_outlives_the_store_object(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    first = SQLiteStateStore(path)
    records = [event(1), checkpoint(2, text="héllo")]
    await first.append("t1", "main", records, after=0)
    await first.aclose()
    again = SQLiteStateStore(path)
    assert await again.read("t1", "main") == records
    assert await again.read_tail("t1", "main") == records[1:]
    await again.aclose()


async def test_records_are_kept_as_the_file_stores_lines(tmp_path: Path) -> None:
    # The same JSON, with the same checksums: what export and import rely on.
    store = SQLiteStateStore(tmp_path / "h.db")
    await store.append("t1", "main", [checkpoint(1, n=1)], after=0)
    await store.aclose()
    with sqlite3.connect(tmp_path / "h.db") as conn:
        (line,) = conn.execute("SELECT line FROM nodestep_events").fetchone()
    assert line.startswith(b'{"id":') and b', "c":"' in line and b'"branch"' not in line


async def test_a_damaged_row_is_reported_with_the_database_and_thread(tmp_path: Path) -> None:
    store = SQLiteStateStore(tmp_path / "h.db")
    await store.append("t1", "main", [checkpoint(1, n=1)], after=0)
    with sqlite3.connect(tmp_path / "h.db") as conn:
        conn.execute("UPDATE nodestep_events SET line = replace(line, '\"n\":1', '\"n\":7')")
    with pytest.raises(StateStoreError, match=r"h\.db: a record of thread 't1', branch 'main'"):
        await store.read("t1", "main")
    await store.aclose()


def test_a_file_that_is_not_a_database_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are not the pages of a database" * 200)
    with pytest.raises(StateStoreError, match=r"Cannot open the SQLite history .*notes\.db"):
        SQLiteStateStore(path)


def test_tables_of_a_newer_nodestep_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    run(SQLiteStateStore(path).aclose())
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE nodestep_meta SET value = '99' WHERE key = 'schema'")
    with pytest.raises(StateStoreError, match=r"schema version 99.*Upgrade nodestep"):
        SQLiteStateStore(path)


@pytest.mark.parametrize("value", ["x", "", "-1", "1.5"])
def test_a_damaged_schema_version_is_refused_naming_the_file_and_the_fix(
    tmp_path: Path, value: str
) -> None:
    path = tmp_path / "h.db"
    run(SQLiteStateStore(path).aclose())
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE nodestep_meta SET value = ? WHERE key = 'schema'", (value,))
    words = rf"h\.db: its schema version .* is {value!r}, not a version number.*SET value = '1'"
    with pytest.raises(StateStoreError, match=words) as info:
        SQLiteStateStore(path)
    assert info.value.path == str(path)


def test_an_unknown_synchronous_setting_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"synchronous='sometimes'.*'FULL'"):
        SQLiteStateStore(tmp_path / "h.db", synchronous="sometimes")


@pytest.mark.slow
async def test_an_append_too_big_for_one_statement_is_stored_whole(tmp_path: Path) -> None:
    store = SQLiteStateStore(tmp_path / "h.db")
    await store.append("t1", "main", events(1, 1), after=0)
    with pytest.raises(ThreadConflictError, match="now ends at event 1"):
        await store.append("t1", "main", events(1, 2500), after=0)
    many = events(2, 2501)
    await store.append("t1", "main", many, after=1)
    assert seqs(await store.read("t1", "main")) == list(range(1, 2502))
    await store.aclose()


def test_a_deferred_transaction_that_reads_then_writes_fails_busy(tmp_path: Path) -> None:
    # Why the store begins every write with BEGIN IMMEDIATE: a plain BEGIN that read
    # before another process wrote cannot write after it, and no busy timeout helps.
    path = tmp_path / "h.db"
    run(SQLiteStateStore(path).aclose())
    a = sqlite3.connect(path, timeout=5, isolation_level=None)
    b = sqlite3.connect(path, timeout=5, isolation_level=None)
    a.execute("BEGIN")
    a.execute("SELECT count(*) FROM nodestep_events").fetchall()
    b.execute("INSERT INTO nodestep_meta VALUES ('other', '1')")
    with pytest.raises(sqlite3.OperationalError, match="database is locked"):
        a.execute("INSERT INTO nodestep_meta VALUES ('mine', '1')")
    a.close()
    b.close()


# -- processes ------------------------------------------------------------------------------


def _append_until_killed(path: Path, write_end: int) -> None:
    append_until_killed(SQLiteStateStore(path), write_end, run)


@pytest.mark.slow
@needs_fork
def test_kill_9_during_appends_leaves_whole_appends_only(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    rng = random.Random(15)
    for _ in range(20):
        read_end, write_end = os.pipe()
        pid = in_child(lambda w=write_end: _append_until_killed(path, w))
        acked = kill_and_collect(pid, read_end, write_end, rng.uniform(0.02, 0.15))
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        store = SQLiteStateStore(path)
        last = whole_appends(store, acked, run)
        run(store.append("t1", "main", events(last + 1, last + 3), after=last))
        run(store.aclose())


def _contend(path: Path, writer: int, count: int) -> int:
    store = SQLiteStateStore(path)

    async def go() -> None:
        done = 0
        while done < count:
            last = await store.last_sequence("t1", "main")
            try:
                await store.append("t1", "main", [event(last + 1, writer=writer)], after=last)
                done += 1
            except ThreadConflictError:
                pass

    run(go())
    return 0


@pytest.mark.slow
@needs_fork
def test_processes_appending_at_once_never_duplicate_or_see_a_locked_database(
    tmp_path: Path,
) -> None:
    path = tmp_path / "h.db"
    run(SQLiteStateStore(path).aclose())
    count = 150
    pids = [in_child(lambda k=k: _contend(path, k, count)) for k in range(3)]
    assert [wait(pid, timeout=120) for pid in pids] == [0, 0, 0]
    records = run(SQLiteStateStore(path).read("t1", "main"))
    assert seqs(records) == list(range(1, 3 * count + 1))
    for k in range(3):
        assert sum(r["values"]["writer"] == k for r in records) == count


@needs_fork
def test_a_store_used_in_a_forked_child_opens_its_own_connection(tmp_path: Path) -> None:
    store = SQLiteStateStore(tmp_path / "h.db")
    run(store.append("t1", "main", events(1, 1), after=0))

    def child() -> int:
        run(store.append("t1", "main", events(2, 2), after=1))
        return 0

    assert wait(in_child(child)) == 0
    assert seqs(run(store.read("t1", "main"))) == [1, 2]
    run(store.aclose())


def test_opening_a_database_reads_none_of_its_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # So opening costs the same whatever the history's size.
    path = tmp_path / "h.db"
    first = SQLiteStateStore(path)
    run(first.append("t1", "main", events(1, 200), after=0))
    run(first.aclose())
    statements: list[str] = []
    connect = sqlite3.connect

    def traced(*args: object, **kwargs: object) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)  # type: ignore[arg-type]
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(sqlite3, "connect", traced)
    store = SQLiteStateStore(path)
    assert statements and not any("nodestep_events" in s for s in statements), statements
    run(store.aclose())


async def test_append_and_release_stores_the_records_and_frees_the_branch_together(
    tmp_path: Path,
) -> None:
    store = SQLiteStateStore(tmp_path / "h.db")
    lease = await store.acquire_lease("t1", "main", "run-1", ttl=30.0)
    await store.append_and_release(lease, [checkpoint(1)], after=0)
    assert seqs(await store.read("t1", "main")) == [1]
    # The branch is free at once: another holder takes it, no expiry to wait for.
    await store.acquire_lease("t1", "main", "run-2", ttl=30.0)
    await store.aclose()


async def test_a_refused_append_and_release_keeps_the_lease_and_stores_nothing(
    tmp_path: Path,
) -> None:
    # One transaction: the release is rolled back with the refused append, so the branch
    # stays held until its holder gives it back (or it expires), as after any refused append.
    store = SQLiteStateStore(tmp_path / "h.db")
    await store.append("t1", "main", [checkpoint(1)], after=0)
    lease = await store.acquire_lease("t1", "main", "run-1", ttl=30.0)
    with pytest.raises(ThreadConflictError):
        await store.append_and_release(lease, [event(6)], after=5)
    assert seqs(await store.read("t1", "main")) == [1]
    with pytest.raises(ThreadBusyError):
        await store.acquire_lease("t1", "main", "run-2", ttl=30.0)
    await store.aclose()


async def test_acquire_and_append_is_one_transaction(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    store = SQLiteStateStore(path)
    await store.append("t1", "main", [checkpoint(1)], after=0)
    statements: list[str] = []
    assert store._conn is not None
    store._conn.set_trace_callback(statements.append)
    lease, stored = await store.acquire_and_append(
        "t1", "main", "run-1", [event(2)], ttl=30.0, after=1
    )
    assert stored and lease.holder == "run-1"
    heads = [" ".join(s.split()[:3]) for s in statements]
    assert heads[0] == "BEGIN IMMEDIATE" and heads[-1] == "COMMIT"
    assert heads.count("BEGIN IMMEDIATE") == 1 and heads.count("COMMIT") == 1
    await store.release_lease(lease)
    # A failing insert takes the lease back with it: the two happen together or not at all.
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON nodestep_events WHEN NEW.seq = 3 "
            "BEGIN SELECT RAISE(ABORT, 'the disk says no'); END"
        )
    with pytest.raises(StateStoreError, match="the disk says no"):
        await store.acquire_and_append("t1", "main", "run-2", [event(3)], ttl=30.0, after=2)
    assert seqs(await store.read("t1", "main")) == [1, 2]
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM nodestep_leases").fetchone() == (0,)
    await store.aclose()


def _commits(store: SQLiteStateStore, log: list[tuple[str, str]]) -> None:
    """Log each commit of ``store`` as (the connection's synchronous setting, what it wrote)."""
    kinds = ("run_started", "superstep_completed", "run_completed", "checkpoint")
    state = {"mode": store.synchronous, "lease": ""}
    seen: set[str] = set()  # the kinds of the records the transaction inserted

    def trace(sql: str) -> None:
        if sql.startswith("PRAGMA synchronous="):
            state["mode"] = sql.split("=", 1)[1]
        elif sql.startswith("INSERT INTO nodestep_events"):  # a statement, or a row of one
            seen.update(k for k in kinds if f"'{k}'" in sql)
        elif sql.startswith("INSERT INTO nodestep_leases"):
            state["lease"] = "lease"
        elif sql == "COMMIT":
            log.append((state["mode"], "+".join(k for k in kinds if k in seen) or state["lease"]))
            state["lease"] = ""
            seen.clear()

    assert store._conn is not None
    store._conn.set_trace_callback(trace)


@pytest.mark.parametrize("setting", ["FULL", "EXTRA"])
async def test_under_full_a_run_is_flushed_once_at_its_last_append(
    tmp_path: Path, setting: str
) -> None:
    # As FilesystemStateStore(fsync=True): a run's records before its last reach the disk
    # with its last, so a call that returned has all of its records on the disk.
    from nodestep import END, START, BaseState, Graph, node

    class S(BaseState):
        n: int = 0

    @node
    def one(state: S) -> dict[str, int]:
        return {"n": state.n + 1}

    @node
    def two(state: S) -> dict[str, int]:
        return {"n": state.n + 1}

    def graph() -> Graph[S]:
        return Graph(S, state_store=store).flow(START >> one, one >> two, two >> END)

    store = SQLiteStateStore(tmp_path / "h.db", synchronous=setting)
    log: list[tuple[str, str]] = []
    _commits(store, log)
    first = graph()
    await first.ainvoke({"n": 1}, thread_id="t")  # the lease taken with the new thread's
    await first.ainvoke({"n": 1}, thread_id="t")  # ... with the records after its position
    await graph().ainvoke({"n": 1}, thread_id="t")  # a lease alone: this graph is behind
    flushed = [wrote for mode, wrote in log if mode == setting]
    assert flushed == ["superstep_completed+run_completed"] * 3, log
    unflushed = {wrote for mode, wrote in log if mode == "NORMAL"}
    assert unflushed == {"lease", "run_started+checkpoint", "run_started", "superstep_completed"}
    # The connection is left as the store says after a run, and a lone append is flushed.
    assert store._conn is not None
    level = {"FULL": 2, "EXTRA": 3}[setting]
    assert store._conn.execute("PRAGMA synchronous").fetchone() == (level,)
    log.clear()
    await store.append("t1", "main", [checkpoint(1, n=1)], after=0)
    assert log == [(setting, "checkpoint")]
    assert (await first.get_state("t")).value.n == 3
    await store.aclose()


async def test_under_normal_the_setting_is_never_changed(tmp_path: Path) -> None:
    from nodestep import END, START, BaseState, Graph, node

    class S(BaseState):
        n: int = 0

    @node
    def one(state: S) -> dict[str, int]:
        return {"n": state.n + 1}

    store = SQLiteStateStore(tmp_path / "h.db")
    graph = Graph(S, state_store=store).flow(START >> one, one >> END)
    log: list[tuple[str, str]] = []
    _commits(store, log)
    await graph.ainvoke({"n": 1}, thread_id="t")
    assert log and {mode for mode, _ in log} == {"NORMAL"}, log
    await store.aclose()


async def test_a_closed_store_opens_again_with_a_cursor_of_its_new_connection(
    tmp_path: Path,
) -> None:
    # Every statement runs on the connection's one cursor (``_run``): closing drops both, and
    # the next call, a write as a read, opens a connection and a cursor of its own.
    store = SQLiteStateStore(tmp_path / "h.db")
    await store.append("t1", "main", [event(1)], after=0)
    await store.aclose()
    assert store._conn is None and store._cursor is None
    await store.append("t1", "main", [event(2)], after=1)
    assert store._cursor is not None and store._cursor.connection is store._conn
    await store.aclose()
    assert seqs(await store.read("t1", "main")) == [1, 2]
    await store.aclose()


async def test_a_first_append_run_again_after_its_answer_was_lost_says_stored_once(
    tmp_path: Path,
) -> None:
    # PostgreSQL runs a statement again when its connection died before the answer came
    # (pg_retry): the records may be stored already. The operation finds them by id.
    from nodestep.store._checks import encode_events
    from nodestep.store._sql import ops
    from nodestep.store._sql.store import WRITES

    store = SQLiteStateStore(tmp_path / "h.db")
    await store.append("t1", "main", [checkpoint(1)], after=0)
    after_id = (await store.last_record("t1", "main"))[1]
    lease = await store.acquire_lease("t1", "main", "run-1", ttl=30.0)
    first = [event(2)]
    lines = encode_events("t1", "main", first, 2)
    for _ in range(2):  # the first try, then the same statement again
        op = ops.append_following("t1", "main", first, lines, 1, after_id, lease)
        assert await store._run(op, WRITES) is True
    assert seqs(await store.read("t1", "main")) == [1, 2]
    other = [event(2)]  # another run's records, after the same record: refused
    op = ops.append_following(
        "t1", "main", other, encode_events("t1", "main", other, 2), 1, after_id, lease
    )
    assert await store._run(op, WRITES) is False
    await store.aclose()


async def test_an_append_is_one_read_of_its_checks_then_a_plain_insert(tmp_path: Path) -> None:
    # BEGIN IMMEDIATE holds the database from before the read, so no one writes between
    # the checks and the insert: the insert need not make them itself (it cost 56 us of
    # CPU an append where the read and a plain insert take 36).
    store = SQLiteStateStore(tmp_path / "h.db")
    lease = await store.acquire_lease("t1", "main", "run-1", ttl=30.0)
    paused = event(2, type="run_paused", run="r1", step=0)  # a status the next rows carry
    await store.append_leased(lease, [checkpoint(1), paused], after=0)
    statements: list[str] = []
    assert store._conn is not None
    store._conn.set_trace_callback(statements.append)
    await store.append_leased(lease, events(3, 4), after=2)
    heads = [" ".join(s.split()[:3]) for s in statements]
    assert heads == ["BEGIN IMMEDIATE", "SELECT seq, id,"] + ["INSERT INTO nodestep_events"] * 2 + [
        "COMMIT"
    ]
    assert not any("RETURNING" in s or "SELECT" in s for s in statements[2:])
    assert seqs(await store.read("t1", "main")) == [1, 2, 3, 4]
    (info,) = (await store.list_threads()).threads
    assert info.status == "paused"
    await store.aclose()


async def test_a_lost_lease_stores_nothing_on_a_branch_without_records(tmp_path: Path) -> None:
    # The read of the checks finds no row on an empty branch; the lease is then read alone.
    store = SQLiteStateStore(tmp_path / "h.db")
    old = await store.acquire_lease("t1", "main", "run-1", ttl=30.0)
    await store.release_lease(old)
    new = await store.acquire_lease("t1", "main", "run-2", ttl=30.0)
    first = events(1, 2)
    with pytest.raises(ThreadBusyError, match="no longer held by this writer"):
        await store.append_leased(old, first, after=0)
    with pytest.raises(ThreadBusyError, match="no longer held by this writer"):
        await store.append_and_release(old, first, after=0)
    assert await store.read("t1", "main") == []
    assert await store.locate("t1", first[0]["id"]) is None
    assert await store.append_leased(new, first, after=0) == new
    assert seqs(await store.read("t1", "main")) == [1, 2]
    await store.aclose()


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("leased", [True, False], ids=["leased", "plain"])
async def test_the_read_of_an_appends_checks_searches_keys_and_scans_nothing(
    tmp_path: Path, leased: bool, layout: str
) -> None:
    # Its cost must not grow with the history: one entry of each primary key.
    from nodestep.store._sql import locked_ops

    store = sqlite_store(tmp_path / "h.db", layout)
    await store.append("t1", "main", events(1, 30), after=0)
    lease = await store.acquire_lease("t1", "main", "run-1", ttl=30.0) if leased else None
    read: tuple[str, tuple[str, ...]] = (
        (locked_ops._HELD_LAST_ROW, ("t1", "main", lease.id))
        if lease is not None
        else (locked_ops._LAST_ROW, ("t1", "main"))
    )
    assert store._conn is not None
    plan = [row[3] for row in store._conn.execute(f"EXPLAIN QUERY PLAN {read[0]}", read[1])]
    key = {"new": "INDEX sqlite_autoindex_nodestep_events_1", "older": "PRIMARY KEY"}[layout]
    assert plan[0] == f"SEARCH nodestep_events USING {key} (thread=? AND branch=?)"
    assert all(not step.startswith("SCAN") for step in plan), plan
    assert any("nodestep_leases" in step for step in plan) == leased
    await store.aclose()


def test_a_new_file_has_rowid_events_and_leases_without_rowid(tmp_path: Path) -> None:
    SQLiteStateStore(tmp_path / "h.db")
    assert layout_of(tmp_path / "h.db") == {"nodestep_events": False, "nodestep_leases": True}


async def test_a_file_of_the_older_layout_keeps_it_and_takes_every_kind_of_write(
    tmp_path: Path,
) -> None:
    # Nothing rebuilds an older file: the same statements serve both layouts.
    path = tmp_path / "older.db"
    make_older_file(path)
    store = SQLiteStateStore(path)
    lease, _ = await store.acquire_and_append(
        "t1", "main", "run-1", [checkpoint(1)], ttl=30.0, after=0
    )
    lease = await store.append_leased(lease, events(2, 3), after=1)
    with pytest.raises(ThreadBusyError):
        await store.acquire_lease("t1", "main", "run-2", ttl=30.0)
    await store.append_and_release(lease, events(4, 5), after=3)
    await store.release_lease(await store.acquire_lease("t1", "main", "run-2", ttl=30.0))
    await store.aclose()
    assert layout_of(path) == {"nodestep_events": True, "nodestep_leases": False}
    again = SQLiteStateStore(path)
    assert [r["seq"] for r in await again.read("t1", "main")] == [1, 2, 3, 4, 5]
    assert await again.list_threads() != []
    assert again.check_integrity(full=True) == []
    await again.aclose()


def test_both_layouts_keep_the_same_lines_and_read_them_back_alike(tmp_path: Path) -> None:
    records = [checkpoint(1), *events(2, 40)]

    async def fill(store: SQLiteStateStore) -> list[dict[str, Any]]:
        await store.append("t1", "main", records, after=0)
        out = await store.read("t1", "main")
        await store.aclose()
        return out

    def lines(path: Path) -> list[bytes]:
        with sqlite3.connect(path) as conn:
            rows = conn.execute("SELECT line FROM nodestep_events ORDER BY seq").fetchall()
        conn.close()
        return [bytes(line) for (line,) in rows]

    new, older = tmp_path / "new.db", tmp_path / "older.db"
    assert anyio.run(fill, sqlite_store(new, "new")) == anyio.run(
        fill, sqlite_store(older, "older")
    )
    assert lines(new) == lines(older) and len(lines(new)) == 40
