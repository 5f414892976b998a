"""A run's appends sent ahead of their answers (``PostgresStateStore(pipeline=)``).

What must hold: the history is the one a run answered step by step would store; a SIGKILL
keeps every append whose answer was read and loses at most ``pipeline`` more, leaving a
prefix of the run that a continuation completes, each step once; an append
that is refused refuses every one sent after it, so a branch never holds a step whose
predecessor is missing; the error a run raises says what it stored, and it is true.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from nodestep import (
    END,
    START,
    Command,
    Graph,
    PostgresStateStore,
    StateStoreError,
    ThreadBusyError,
    ThreadConflictError,
    node,
)
from nodestep.store._sql import pg_pipe
from nodestep.testing import event
from postgres_server import ThrowawayPostgresStore, require_postgres
from store_helpers import cancel_when

ROOT = Path(__file__).resolve().parents[2]


class Count(BaseModel):
    n: int = 0
    note: str = ""


def _store(
    pipeline: int = 16, schema: str | None = None, application_name: str = ""
) -> PostgresStateStore:
    dsn = require_postgres()
    if application_name:  # how the server names this store's connections, to end them
        dsn += f"{'&' if '?' in dsn else '?'}application_name={application_name}"
    store = ThrowawayPostgresStore(
        dsn, schema=schema or f"t_{uuid.uuid4().hex[:16]}", pipeline=pipeline
    )
    store.open()
    return store


def _loop(store: PostgresStateStore, target: int, at: Any = None, **options: Any) -> Graph:
    """``n`` counts to ``target``, one superstep each; ``at(n)`` runs inside step ``n``."""

    @node(goto=["count", END])
    def count(state: Count) -> Command:
        if at is not None:
            at(state.n + 1)
        n = state.n + 1
        return Command(update={"n": n}, goto="count" if n < target else END)

    options.setdefault("max_steps", 2000)
    return Graph(Count, name="loop", state_store=store, **options).flow(START >> count)


def _records(store: PostgresStateStore, thread: str) -> list[dict[str, Any]]:
    return anyio.run(store.read, thread, "main")


def _shape(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What two histories of the same run share: every record but its ids and times."""
    skip = {"id", "ts", "run", "thread"}
    return [tuple(sorted((k, repr(v)) for k, v in r.items() if k not in skip)) for r in records]


def _counts(records: list[dict[str, Any]]) -> list[int]:
    """The count each stored superstep reached, in order."""
    steps = [r for r in records if r["type"] == "superstep_completed"]
    return [r["tasks"]["count"]["update"]["n"] for r in steps]


def _assert_whole(records: list[dict[str, Any]]) -> None:
    """Sequences without a gap, and each step's count one more than the step before."""
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    counts = _counts(records)
    assert counts == list(range(counts[0], counts[0] + len(counts))) if counts else True


def _close(*stores: PostgresStateStore) -> None:
    for store in stores:
        anyio.run(store.aclose)


# -- the history is the same -----------------------------------------------------------------


@pytest.mark.slow
@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(target=st.integers(1, 130), depth=st.sampled_from([1, 2, 16, 64]))
def test_a_pipelined_run_stores_what_a_run_answered_step_by_step_stores(
    target: int, depth: int
) -> None:
    piped, answered = _store(depth), _store(0)
    try:
        a = _loop(piped, target).invoke({}, thread_id="t")
        b = _loop(answered, target).invoke({}, thread_id="t")
        assert a.state.n == b.state.n == target
        ours, theirs = _records(piped, "t"), _records(answered, "t")
        assert _shape(ours) == _shape(theirs)
        _assert_whole(ours)
        # A second turn on the same thread: its first append goes the usual way again.
        again = _loop(piped, target + 3).invoke({"note": "again"}, thread_id="t")
        assert again.state.n == target + 3
        _assert_whole(_records(piped, "t"))
    finally:
        _close(piped, answered)


def test_without_a_pipe_on_trio_and_with_pipeline_0_appends_wait_for_each_answer() -> None:
    piped, answered = _store(16), _store(0)
    try:

        async def pipe_of(store: PostgresStateStore) -> Any:
            lease = await store.acquire_lease("t", "main", "me", ttl=30)
            return await store.open_pipe(lease)

        assert anyio.run(pipe_of, answered) is None
        assert anyio.run(pipe_of, piped, backend="trio") is None
        # On trio the run goes the usual way, and stores the same.
        graph = _loop(piped, 5)
        done = anyio.run(lambda: graph.ainvoke({}, thread_id="trio"), backend="trio")
        assert done.state.n == 5
        _assert_whole(_records(piped, "trio"))
    finally:
        _close(piped, answered)


# -- refusals ----------------------------------------------------------------------------------


def _sql(store: PostgresStateStore, statement: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(store.dsn, autocommit=True, options=f"-c search_path={store.schema}") as c:
        cur = c.execute(statement, params)
        return cur.fetchall() if cur.description else []


def test_a_lease_lost_mid_run_refuses_that_step_and_every_one_after_it() -> None:
    store = _store(16)
    try:

        def steal(n: int) -> None:
            if n == 30:  # another holder takes the branch, as after an expiry
                _sql(store, "UPDATE nodestep_leases SET id = 'thief', holder = 'thief'")

        with pytest.raises(ThreadBusyError) as raised:
            _loop(store, 100, steal).invoke({}, thread_id="t")
        records = _records(store, "t")
        _assert_whole(records)
        assert len(_counts(records)) < 30  # nothing of step 30 or later
        # The message's count of what the call stored is the store's.
        assert f"stored events 1 to {records[-1]['seq']} before" in str(raised.value)
    finally:
        _close(store)


def test_a_record_another_writer_appends_mid_run_is_never_built_on() -> None:
    """A writer without the lease (``store.append``) lands between the run's appends: its
    record takes the sequence the run's next append follows, so only the id each append
    names keeps the run's later steps off it."""
    store = _store(16)
    other = PostgresStateStore(store.dsn, schema=store.schema)

    async def append_edit() -> None:
        while True:
            last = await other.last_sequence("t", "main")
            try:
                await other.append("t", "main", [event(last + 1, "t", note="edited")], after=last)
                return
            except ThreadConflictError:
                continue  # the run's own appends are still coming in

    def edit(n: int) -> None:
        if n == 20:
            done = threading.Thread(target=anyio.run, args=(append_edit,))
            done.start()
            done.join()

    try:
        with pytest.raises(ThreadConflictError) as raised:
            _loop(store, 100, edit).invoke({}, thread_id="t")
        records = _records(store, "t")
        assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
        edits = [i for i, r in enumerate(records) if r["type"] == "state_updated"]
        assert edits == [len(records) - 1]  # the edit is last: nothing of the run after it
        _assert_whole(records[:-1])
        assert f"stored events 1 to {records[-2]['seq']} before" in str(raised.value)
        # The thread goes on from the edited state.
        assert _loop(store, 100).get_state_sync("t").value.note == "edited"
    finally:
        _close(store, other)


def test_a_run_whose_connection_is_ended_fails_and_is_continued() -> None:
    # Only this store's connections are ended, never those of a test running beside it.
    name = f"nodestep_ended_{uuid.uuid4().hex[:12]}"
    store = _store(16, application_name=name)
    try:

        def end_connections(n: int) -> None:
            if n == 25:
                _sql(  # each call returns once its connection has ended (or after 5 s)
                    store,
                    "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE pid <> "
                    "pg_backend_pid() AND application_name = %s "
                    "AND query LIKE 'INSERT INTO nodestep_events%%'",
                    name,
                )

        graph = _loop(store, 60, end_connections)
        with pytest.raises(StateStoreError, match=r"invoke\(None, thread_id=\.\.\.\) continues"):
            graph.invoke({}, thread_id="t")
        _assert_whole(_records(store, "t"))
        assert _loop(store, 60).invoke(None, thread_id="t").state.n == 60
        _assert_whole(_records(store, "t"))
    finally:
        _close(store)


@pytest.mark.slow
def test_a_lease_due_for_renewal_is_renewed_the_usual_way_mid_run() -> None:
    store = _store(16)
    try:
        # Real time: 12 steps of 0.1 s outlast the lease's ttl of 0.6 s, which must be renewed.
        graph = _loop(store, 12, lambda n: time.sleep(0.1), lease_ttl=0.6)
        assert graph.invoke({}, thread_id="t").state.n == 12
        _assert_whole(_records(store, "t"))
    finally:
        _close(store)


def test_a_cancelled_ainvoke_settles_its_appends_and_is_continued() -> None:
    store = _store(16)
    try:

        async def main() -> int:
            at_40 = anyio.Event()

            @node(goto=["count", END])
            async def count(state: Count) -> Command:
                if state.n == 40 and not at_40.is_set():
                    at_40.set()
                    await anyio.sleep(5)  # held until the cancel; 5 s bounds one that never comes
                return Command(update={"n": state.n + 1}, goto="count" if state.n < 59 else END)

            graph = Graph(Count, state_store=store, max_steps=200).flow(START >> count)
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(cancel_when, at_40, scope)
                    await graph.ainvoke({}, thread_id="t")
            done = await graph.ainvoke(None, thread_id="t")
            return done.state.n

        assert anyio.run(main) == 60
        records = _records(store, "t")
        assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
        assert "run_stopped" in [r["type"] for r in records]
    finally:
        _close(store)


# -- SIGKILL: what was answered is stored, the rest is a prefix ---------------------------------

KILLED = """
import os, signal, sys
sys.path.insert(0, sys.argv[3])
from test_postgres_pipe import _loop
from nodestep import PostgresStateStore
from nodestep._engine.writer import HistoryWriter

answered = 0
appended = HistoryWriter._append

async def _append(self, bodies, after):
    global answered
    await appended(self, bodies, after)
    answered = max(answered, self.stored_seq)  # the last record whose answer was read

HistoryWriter._append = _append

def die(n):
    if n == int(sys.argv[2]):
        print(answered, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

dsn, schema, depth = sys.argv[1].split("|")
store = PostgresStateStore(dsn, schema=schema, pipeline=int(depth))
_loop(store, 1000, die).invoke({}, thread_id="t")
"""


def _quiet_records(store: PostgresStateStore) -> list[dict[str, Any]]:
    """The thread's records once the server has run what the dead process sent."""
    deadline = time.monotonic() + 10
    records = _records(store, "t")
    while time.monotonic() < deadline:
        time.sleep(0.3)  # the server says nothing when it has run them: two reads must agree
        again = _records(store, "t")
        if len(again) == len(records):
            break
        records = again
    return records


@pytest.mark.slow
@pytest.mark.parametrize(
    ("depth", "kill_at"), [(0, 2), (0, 37), (0, 123), (2, 2), (2, 37), (2, 123), (16, 123)]
)
def test_a_process_killed_mid_run_keeps_a_prefix_with_every_answered_step(
    depth: int, kill_at: int
) -> None:
    store = _store(depth)
    try:
        paths = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])
        env = {**os.environ, "PYTHONPATH": paths}
        where = f"{store.dsn}|{store.schema}|{depth}"
        done = subprocess.run(
            [sys.executable, "-c", KILLED, where, str(kill_at), str(Path(__file__).parent)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == -signal.SIGKILL, done.stderr
        answered = int(done.stdout)
        records = _quiet_records(store)
        _assert_whole(records)  # a prefix: no gap, no step twice, each after the one before
        counts = _counts(records)
        assert records[-1]["seq"] >= answered  # every append whose answer was read is kept
        # At most ``depth`` appends were unanswered when step ``kill_at`` began; the
        # server may have run some of them before it saw the process gone.
        assert kill_at - 1 - depth <= len(counts) <= kill_at - 1
        if counts:
            assert counts[0] == 1
        # Another process continues it (the dead holder's lease is taken over); the lost
        # steps run again, once each.
        assert _loop(store, 1000).invoke(None, thread_id="t").state.n == 1000
        records = _records(store, "t")
        _assert_whole(records)
        assert _counts(records) == list(range(1, 1001))
    finally:
        _close(store)


# -- the pipe's own parts ------------------------------------------------------------------------


def test_placeholders_are_numbered_for_libpq() -> None:
    assert pg_pipe.numbered("SELECT ?, ? WHERE a = ?") == b"SELECT $1, $2 WHERE a = $3"
    assert pg_pipe.numbered("SELECT 1") == b"SELECT 1"


def test_parameters_are_sent_as_text_or_binary_bytea() -> None:
    values, types, formats = pg_pipe.encode_params(["é", 7, 1.5, b"\x00\xff", None])
    assert values == ["é".encode(), b"7", b"1.5", b"\x00\xff", None]
    assert types == [25, 20, 701, 17, 25]
    assert formats == [0, 0, 0, 1, 0]
    with pytest.raises(TypeError, match="a pipe sends no list values"):
        pg_pipe.encode_params([[1]])


def test_a_pipe_answers_in_order_with_each_statement_its_own_transaction() -> None:
    dsn = require_postgres()

    async def main() -> list[Any]:
        conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        await conn.execute("CREATE TEMP TABLE pipe_t (a BIGINT PRIMARY KEY, b BYTEA)")
        pipe = pg_pipe.Pipe(conn, psycopg.pq)
        for a in (1, 2, 1, 3):  # the second 1 is refused; 3 is stored all the same
            await pipe.send("INSERT INTO pipe_t VALUES (?, ?) RETURNING a", [a, b"x"])
        answers = [await pipe.answer() for _ in range(4)]
        back = await pipe.close()
        assert back is conn
        rows = await (await conn.execute("SELECT a FROM pipe_t ORDER BY a")).fetchall()
        await conn.close()
        return [*[(x.rows, x.sqlstate) for x in answers], rows]

    got = anyio.run(main)
    assert got[:4] == [(1, None), (1, None), (-1, "23505"), (1, None)]
    assert got[4] == [(1,), (2,), (3,)]


@pytest.mark.slow
def test_a_run_whose_answers_do_not_come_gives_up_and_is_continued(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server holds the run's appends (a lock taken meanwhile): the run waits
    ``SETTLE_WITHIN`` seconds for their answers, then fails saying what may be stored."""
    from nodestep._engine import writer

    monkeypatch.setattr(writer, "SETTLE_WITHIN", 0.5)
    store = _store(64)  # every step's append may wait unanswered: the run never waits in it
    locker = psycopg.connect(store.dsn, options=f"-c search_path={store.schema}")

    def lock(n: int) -> None:
        if n == 25:  # the next steps' appends wait for the lock on the server
            locker.execute("LOCK TABLE nodestep_events IN ACCESS EXCLUSIVE MODE")

    try:
        with pytest.raises(StateStoreError, match="did not answer this run's last appends"):
            _loop(store, 30, lock).invoke({}, thread_id="t")
        locker.rollback()  # the held appends go on, or end with their connection
        time.sleep(0.2)  # real time: the server says nothing once it has run them
        _assert_whole(_records(store, "t"))
        graph = _loop(store, 30)
        if graph.get_state_sync("t").status != "completed":  # all of them may have gone in
            graph.invoke(None, thread_id="t")
        assert graph.get_state_sync("t").value.n == 30
        _assert_whole(_records(store, "t"))
    finally:
        locker.close()
        _close(store)


@pytest.mark.parametrize("depth", [-1, 1.5, "2", True, None])
def test_a_pipeline_that_is_not_a_whole_number_of_0_or_more_is_refused(depth: Any) -> None:
    with pytest.raises(ValueError, match=r"pipeline=.*a whole number of 0 or more"):
        PostgresStateStore("postgresql://nowhere/none", pipeline=depth)
