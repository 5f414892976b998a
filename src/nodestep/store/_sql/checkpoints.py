"""Checkpoints of an SQLite store's write-ahead log, off the writer's path.

In WAL mode a commit appends to the log (the ``-wal`` file), and the log is copied back
into the database file by a checkpoint. Left to SQLite, the commit that takes the log past
1,000 pages runs that checkpoint itself before it returns, with its flushes: on W10's
agent, about one turn in 35 then took 7 to 8 ms against a median of 1.6 ms.

The store's own connection therefore runs one only as a safety net, past ``FAR`` pages,
and a ``Checkpointer`` runs them instead: after every ``EVERY`` write transactions of the
store it starts a short-lived thread, which runs a ``PASSIVE`` checkpoint (the kind SQLite's
automatic one is) on a connection of its own: it copies what no reader still needs, and
writers and readers go on meanwhile. What a checkpoint flushes, and so what a power cut can
lose, is unchanged: its connection has the store's ``synchronous`` setting. At most one
runs at a time per store; of two processes' checkpoints at once, SQLite runs one and the
other does nothing.

The connection is kept between checkpoints, until the store closes: opening one, its first
statement (which reads the schema) and closing it took 270 us and about 30 system calls a
checkpoint (one every 30 turns of W10's agent), for a checkpoint of 8 us with little to copy.
"""

from __future__ import annotations

import _thread
import contextlib
import sqlite3
import threading
from pathlib import Path

__all__ = ["EVERY", "FAR", "Checkpointer"]

EVERY = 128
"""Write transactions between two checkpoints: a W10 turn writes about 30 pages in 5."""

FAR = 8_000
"""Pages the log may reach before a commit checkpoints it itself (32 MB of 4 KB pages)."""


class Checkpointer:
    """Checkpoints the log of the database at ``path`` in a thread, every ``EVERY`` writes.

    ``wrote`` is called under the store's lock, once per committed write transaction.
    ``lock`` is held while a checkpoint runs, or its connection closes: a fork takes it, so
    that no connection of this process is inside SQLite when the process forks.
    """

    def __init__(self, path: Path, synchronous: str) -> None:
        self.path = path
        self.synchronous = synchronous
        self.lock = threading.Lock()
        self.connection: sqlite3.Connection | None = None
        """The checkpoints' connection, opened by the first (``close`` closes it)."""
        self.runs = 0  # checkpoints run, for the tests
        self._writes = 0
        self._idle = threading.Event()  # set while no checkpoint thread runs
        self._idle.set()

    def wrote(self) -> None:
        """Count a committed write transaction; start a checkpoint after every ``EVERY``.

        The thread is started bare (``_thread``), not as a ``threading.Thread``, whose
        ``start`` waits until the new thread runs: on W10's agent, with the checkpoint
        thread then holding the interpreter until its connection opens, that wait took
        0.8 to 3 ms a start (35 us a turn), in the writer's call.
        """
        self._writes += 1
        if self._writes < EVERY:
            return
        self._writes = 0
        if not self._idle.is_set():
            return  # the next one catches up
        self._idle.clear()
        try:
            _thread.start_new_thread(self._run, ())
        except RuntimeError:  # the interpreter is shutting down: the commits' limit stays
            self._idle.set()

    @property
    def running(self) -> bool:
        """Whether a checkpoint thread is running (or starting)."""
        return not self._idle.is_set()

    def _run(self) -> None:
        try:
            self.checkpoint()
        finally:
            self._idle.set()

    def checkpoint(self) -> None:
        """Copy the log into the database file, as far as no reader needs it; never raise.

        A failure (the file gone, the disk full) leaves the log as it is: the next
        checkpoint, or a commit past ``FAR`` pages, copies it.
        """
        with self.lock:
            conn = self.connection if self.connection is not None else self._connect()
            if conn is None:
                return
            try:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                self.runs += 1
            except sqlite3.Error:  # the next checkpoint opens a connection anew
                self.connection = None
                with contextlib.suppress(sqlite3.Error):
                    conn.close()

    def _connect(self) -> sqlite3.Connection | None:
        """Open the checkpoints' connection (``None`` if it cannot be); under ``lock``."""
        try:
            # mode=rw: a file removed meanwhile is not created anew, empty. Not bound to a
            # thread: each checkpoint runs in a thread of its own, and ``close`` in another.
            conn = sqlite3.connect(
                f"{self.path.as_uri()}?mode=rw",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error:
            return None
        try:
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
        except sqlite3.Error:
            conn.close()
            return None
        self.connection = conn
        return conn

    def close(self) -> None:
        """Close the checkpoints' connection, once a checkpoint in progress ends; the next
        checkpoint opens it again.
        """
        with self.lock:
            conn, self.connection = self.connection, None
            if conn is not None:
                conn.close()

    def wait(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for a checkpoint in progress to end."""
        self._idle.wait(timeout)
