"""``SQLiteStateStore`` copies its write-ahead log into the database in a thread of its own.

The commits never run SQLite's automatic checkpoint (short of a log of ``FAR`` pages): a
checkpoint thread runs one after every ``EVERY`` write transactions, and what is stored
reads the same whatever it does meanwhile.
"""

from __future__ import annotations

import os
import random
import sqlite3
import threading
from pathlib import Path

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

from nodestep import SQLiteStateStore
from nodestep.store._sql import checkpoints
from nodestep.store._sql.checkpoints import Checkpointer
from nodestep.testing import event, events, seqs

pytestmark = pytest.mark.anyio
run = runner("asyncio")


def _pages_in_the_database(path: Path) -> int:
    """The database file's pages, not counting the log: what checkpoints copied."""
    return path.stat().st_size // 4096


async def test_the_writers_connection_leaves_checkpoints_to_the_thread(tmp_path: Path) -> None:
    store = SQLiteStateStore(tmp_path / "h.db")
    await store.append("t1", "main", [event(1)], after=0)
    assert store._conn is not None
    (limit,) = store._conn.execute("PRAGMA wal_autocheckpoint").fetchone()
    assert limit == checkpoints.FAR
    await store.aclose()


async def test_a_checkpoint_runs_after_every_so_many_writes_and_copies_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoints, "EVERY", 40)
    path = tmp_path / "h.db"
    store = SQLiteStateStore(path)
    text = "x" * 3000  # about a page a record
    for seq in range(1, 40):
        await store.append("t1", "main", [event(seq, text=text)], after=seq - 1)
    store._checkpoints.wait(30)
    assert store._checkpoints.runs == 0
    before = _pages_in_the_database(path)
    await store.append("t1", "main", [event(40, text=text)], after=39)  # the 40th write
    store._checkpoints.wait(30)
    assert store._checkpoints.runs == 1
    assert _pages_in_the_database(path) >= before + 40
    # Another connection reads all of it from the database file alone, once the log is gone.
    await store.aclose()
    assert not (tmp_path / "h.db-wal").exists()
    again = SQLiteStateStore(path)
    assert seqs(await again.read("t1", "main")) == list(range(1, 41))
    await again.aclose()


async def test_appends_and_reads_during_checkpoints_lose_and_repeat_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoints, "EVERY", 3)
    path = tmp_path / "h.db"
    store = SQLiteStateStore(path)
    reader = SQLiteStateStore(path)
    for seq in range(1, 601, 3):
        await store.append("t1", "main", events(seq, seq + 2), after=seq - 1)
        if seq % 60 == 1:
            assert seqs(await reader.read("t1", "main")) == list(range(1, seq + 3))
    store._checkpoints.wait(30)
    # About 30 of the 66 tries run (the others find one still running); how many depends on
    # how the threads are scheduled (2 on a loaded machine), so only the first is sure to.
    assert store._checkpoints.runs >= 1
    assert store.check_integrity(full=True) == []
    assert seqs(await reader.read("t1", "main")) == list(range(1, 601))
    await reader.aclose()
    await store.aclose()


def test_a_checkpoint_of_a_removed_file_does_not_create_it(tmp_path: Path) -> None:
    path = tmp_path / "gone.db"
    checkpointer = Checkpointer(path, "NORMAL")
    checkpointer.checkpoint()
    assert not path.exists() and checkpointer.runs == 0


async def test_closing_the_store_waits_for_its_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoints, "EVERY", 1)
    store = SQLiteStateStore(tmp_path / "h.db")
    store._checkpoints.lock.acquire()  # the thread's checkpoint waits for this
    await store.append("t1", "main", [event(1)], after=0)
    assert store._checkpoints.running
    threading.Timer(0.2, store._checkpoints.lock.release).start()
    await store.aclose()
    assert not store._checkpoints.running and store._checkpoints.runs == 1


async def test_checkpoints_keep_one_connection_until_the_store_closes(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    store = SQLiteStateStore(path)
    await store.append("t1", "main", [event(1)], after=0)
    store._checkpoints.checkpoint()
    first = store._checkpoints.connection
    await store.append("t1", "main", [event(2)], after=1)
    store._checkpoints.checkpoint()
    assert first is not None and store._checkpoints.connection is first
    assert store._checkpoints.runs == 2
    await store.aclose()
    assert store._checkpoints.connection is None
    assert not (tmp_path / "h.db-wal").exists()  # the store's were the last connections
    await store.append("t1", "main", [event(3)], after=2)  # a later call opens them again
    store._checkpoints.checkpoint()
    assert store._checkpoints.connection is not None and store._checkpoints.runs == 3
    assert seqs(await store.read("t1", "main")) == [1, 2, 3]
    await store.aclose()


@needs_fork
def test_a_forked_child_checkpoints_on_a_connection_of_its_own(tmp_path: Path) -> None:
    store = SQLiteStateStore(tmp_path / "h.db")
    run(store.append("t1", "main", [event(1)], after=0))
    store._checkpoints.checkpoint()
    parents = store._checkpoints.connection
    assert parents is not None

    def child() -> int:
        if store._checkpoints.connection is not None:
            return 3  # the parent's must be neither used nor closed here
        run(store.append("t1", "main", [event(2)], after=1))
        store._checkpoints.checkpoint()
        own = store._checkpoints.connection
        return 0 if own is not None and own is not parents and store._checkpoints.runs == 1 else 4

    assert wait(in_child(child)) == 0
    run(store.append("t1", "main", [event(3)], after=2))
    store._checkpoints.checkpoint()
    assert store._checkpoints.connection is parents and store._checkpoints.runs == 2
    assert store.check_integrity(full=True) == []
    assert seqs(run(store.read("t1", "main"))) == [1, 2, 3]
    run(store.aclose())


@needs_fork
def test_a_fork_waits_for_a_checkpoint_in_progress(tmp_path: Path) -> None:
    # No connection of the parent may be inside SQLite when the process forks.
    path = tmp_path / "h.db"
    store = SQLiteStateStore(path)
    run(store.append("t1", "main", [event(1)], after=0))
    store._checkpoints.lock.acquire()  # as a checkpoint in progress holds it
    released: list[bool] = []

    def end_the_checkpoint() -> None:
        released.append(True)
        store._checkpoints.lock.release()

    threading.Timer(0.2, end_the_checkpoint).start()

    def child() -> int:
        run(store.append("t1", "main", [event(2)], after=1))
        return 0

    pid = in_child(child)
    assert released == [True]  # the fork waited for it
    assert wait(pid) == 0
    run(store.append("t1", "main", [event(3)], after=2))
    assert seqs(run(store.read("t1", "main"))) == [1, 2, 3]
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    run(store.aclose())


def _append_checkpointing_until_killed(path: Path, write_end: int) -> None:
    checkpoints.EVERY = 1  # in this child only: a checkpoint after every append
    append_until_killed(SQLiteStateStore(path), write_end, run, pad=3000)


@pytest.mark.slow
@needs_fork
def test_kill_9_amid_checkpoints_loses_no_acknowledged_append(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    rng = random.Random(36)
    copied: list[int] = []
    for _ in range(15):
        read_end, write_end = os.pipe()
        pid = in_child(lambda w=write_end: _append_checkpointing_until_killed(path, w))
        # The first child gets long enough to append well past a few pages, even on a busy
        # machine; the others are killed at random moments.
        delay = 0.4 if not copied else rng.uniform(0.02, 0.2)
        acked = kill_and_collect(pid, read_end, write_end, delay)
        # Before any connection of ours: what the child's checkpoints copied.
        copied.append(_pages_in_the_database(path))
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        store = SQLiteStateStore(path)
        found = whole_appends(store, acked, run)
        run(store.aclose())
    assert found > 300  # the children got far
    assert copied[0] > 10  # the first child's checkpoints copied its appends
