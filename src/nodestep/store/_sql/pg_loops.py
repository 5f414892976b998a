"""Async connections per asyncio event loop: the PostgreSQL store's calls with no thread hop.

psycopg's async connections belong to the loop that opened them, and a store serves the
loops of several threads (``invoke`` gives each calling thread a private loop). So each
loop gets its own few connections, opened on its first call: ``LoopConnections``. A
connection is taken for one operation and given back, so one loop's concurrent nodes never
share one; past ``limit`` connections in use, the caller falls back to the worker threads.

Loops are not told when another loop closes, and a connection cannot be awaited closed from
a loop that is gone; so a connection left over is ended with libpq's own ``finish``, which
needs no loop: when its loop is found closed, when the store is closed or dropped.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["Busy", "LoopConnections", "PerLoop", "alive", "finish", "take"]


class Busy(Exception):
    """Every connection a loop may open is out: the caller uses a worker thread."""


_forked: list[object] = []  # a parent's sessions, inherited by a fork: never ended here


async def take(
    loop: object,
    apool: Any,
    aloop: object,
    loops: PerLoop,
    connect: Callable[[], Awaitable[Any]],
) -> tuple[Any, Callable[[Any], Awaitable[None]]] | None:
    """Take a connection of ``loop`` for as long as the caller wants, and how to give it back.

    From the async pool when it serves ``loop``, else from the loop's own connections;
    ``None`` when those are all out. Give back ``None`` for a connection left unusable:
    it is ended, never reused.
    """
    owner: Any = apool
    if apool is not None and loop is aloop:
        conn = await apool.getconn()
    else:
        owner = loops.of(loop)
        try:
            conn = owner.take()
        except Busy:
            return None
        try:
            conn = conn or await connect()
        except BaseException:
            owner.give(None)
            raise

    async def give(back: Any) -> None:
        if back is None:
            finish(conn)
        if owner is apool:
            await owner.putconn(conn)
        else:
            owner.give(conn)

    return conn, give


def finish(conn: Any) -> None:
    """End ``conn``'s session now, without an event loop (libpq's ``PQfinish``)."""
    with contextlib.suppress(Exception):  # already ended: nothing more to free
        conn.pgconn.finish()


class LoopConnections:
    """The idle async connections of one event loop, and how many of its connections are out."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.idle: list[Any] = []
        self.out = 0
        self.closed = False

    def take(self) -> Any:
        """Return an idle connection (counted as out), or None: open one, or use a thread.

        Raises:
            Busy: ``limit`` connections are out already: use the worker threads.
        """
        if self.out >= self.limit:
            raise Busy()
        self.out += 1
        while self.idle:
            conn = self.idle.pop()
            if _reusable(conn):
                return conn
            finish(conn)
        return None

    def give(self, conn: Any | None) -> None:
        """Take back a connection of ``take`` (None: it could not be opened)."""
        self.out -= 1
        if conn is None:
            return
        if self.closed or not _reusable(conn):
            finish(conn)  # closed, broken, or left inside a transaction by a cancellation
        else:
            self.idle.append(conn)
            if self.closed:  # closed by another thread meanwhile: end it after all
                self.close()

    def close(self) -> None:
        """End the idle connections; the ones out are ended when given back."""
        self.closed = True
        idle, self.idle = self.idle, []
        for conn in idle:
            finish(conn)


def _reusable(conn: Any) -> bool:
    # transaction_status 0 is IDLE: no command running, no transaction open.
    return not conn.closed and int(conn.pgconn.transaction_status) == 0 and alive(conn)


def alive(conn: Any) -> bool:
    """Tell whether an idle connection's session still lives, without a round trip.

    An idle session gets nothing from the server, unless the server ends it: when it is
    stopped or restarted, the server's last message (or the socket's end) waits on the
    socket. A poll of the socket costs about a microsecond, where a query to check would
    cost a round trip per call. Why it matters: after a server restart every pooled
    connection is dead, and the first call on each would fail.
    """
    try:
        readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    except (OSError, ValueError, Exception):  # no socket: the connection is gone
        return False
    return not readable


class PerLoop:
    """A store's ``LoopConnections``, one per live asyncio event loop of this process."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._loops: dict[object, LoopConnections] = {}
        self._pid = os.getpid()
        self._lock = threading.Lock()  # loops of several threads share the store

    def of(self, loop: Any) -> LoopConnections:
        """Return ``loop``'s connections, made on its first call."""
        found = self._loops.get(loop)
        if found is not None and self._pid == os.getpid():
            return found
        with self._lock:
            if self._pid != os.getpid():  # a fork: ending the parent's sessions ends them
                _forked.append(self._loops)  # for the parent too, so keep them, unused
                self._loops, self._pid = {}, os.getpid()
            found = self._loops.get(loop)
            if found is None:
                self._drop_closed()
                found = self._loops[loop] = LoopConnections(self.limit)
            return found

    def forget_after_fork(self) -> None:
        """In a forked child: keep the parent's sessions unused, take a new lock.

        Ending the parent's sessions here would end them for the parent too; and a lock a
        parent thread held at fork time stays held in the child forever.
        """
        _forked.append(self._loops)
        self._loops, self._pid, self._lock = {}, os.getpid(), threading.Lock()

    def _drop_closed(self) -> None:
        # Called when a loop is new, so a store used from many short-lived threads keeps
        # connections only for the loops still open.
        for loop in [lp for lp in self._loops if lp.is_closed()]:  # type: ignore[attr-defined]
            self._loops.pop(loop).close()

    def pop(self, loop: object) -> LoopConnections | None:
        """Forget ``loop``'s connections and return them (to be closed on ``loop``)."""
        with self._lock:
            return self._loops.pop(loop, None)

    def close(self) -> None:
        """End every loop's idle connections now; the ones out are ended when given back."""
        with self._lock:
            loops, self._loops = self._loops, {}
        if self._pid == os.getpid():
            for conns in loops.values():
                conns.close()
