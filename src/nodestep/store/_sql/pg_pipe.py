"""A run's appends sent ahead of their answers: ``PostgresStateStore.open_pipe``.

A run appends its supersteps one after another, and waiting for the server's answer to each
before the next superstep runs costs a round trip per superstep (about 200 µs between two
processes on one machine, most of the time of a small step). ``PipedAppends`` (the store's
``AppendPipe``) sends each append as ``ops.chained_append``: the usual checks (the run's
lease, the branch's last sequence) plus the id of the record it follows, on one connection
of the run's in libpq's pipeline mode (``Pipe``): each statement is sent as soon as it is
made, followed by a Sync, so each is a transaction of its own, and the answers are read
later, in order. The first refusal is diagnosed as ``append`` does it (``ops.refusal``: the
lease lost, or another writer first), and every append sent after it was refused by the
server too, since the record it follows is missing.

A sent statement has left the process: its bytes are in the operating system's socket
buffer, which delivers them even if this process is killed next; only a failure of the
machine or of the network can keep them from the server.

Runs on asyncio only (psycopg's async connections do): readiness is awaited with the
loop's ``add_reader``/``add_writer``.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from nodestep._errors import StateStoreError
from nodestep.store._checks import encode_events
from nodestep.store._contract import Record
from nodestep.store._leases import RENEW_WITHIN, Lease
from nodestep.store._sql import ops

__all__ = ["Answer", "Pipe", "PipedAppends", "depth_of", "encode_params", "numbered"]

_TEXT, _INT8, _FLOAT8, _BYTEA = 25, 20, 701, 17
# The statements prepared on each connection (libpq's, so a connection ended is dropped).
_prepared: weakref.WeakKeyDictionary[Any, dict[str, bytes]] = weakref.WeakKeyDictionary()


@dataclass(slots=True)
class Answer:
    """The server's answer to one statement: its row count, or its error."""

    rows: int = -1
    sqlstate: str | None = None
    message: str = ""
    ended: bool = False  # its result was read; the Sync's comes next


def numbered(sql: str) -> bytes:
    """Return ``sql`` with libpq's ``$1, $2, ...`` for ``ops``' ``?`` placeholders."""
    parts = sql.split("?")
    out = [parts[0]]
    for i, part in enumerate(parts[1:], start=1):
        out.append(f"${i}{part}")
    return "".join(out).encode()


def encode_params(
    params: tuple[Any, ...] | list[Any],
) -> tuple[list[bytes | None], list[int], list[int]]:
    """Return libpq's values, type oids and formats for ``ops``' parameters.

    ``ops`` passes text, whole numbers, floats, bytes (a record's line, sent as binary
    ``bytea``) and None (a text NULL).
    """
    values: list[bytes | None] = []
    types: list[int] = []
    formats: list[int] = []
    for value in params:
        kind = type(value)
        if kind is str:
            values.append(value.encode())
            types.append(_TEXT)
            formats.append(0)
        elif kind is int:
            values.append(b"%d" % value)
            types.append(_INT8)
            formats.append(0)
        elif kind is float:
            values.append(repr(value).encode())
            types.append(_FLOAT8)
            formats.append(0)
        elif kind is bytes:
            values.append(value)
            types.append(_BYTEA)
            formats.append(1)
        elif value is None:
            values.append(None)
            types.append(_TEXT)
            formats.append(0)
        else:
            raise TypeError(f"a pipe sends no {kind.__name__} values")
    return values, types, formats


class Pipe:
    """One connection in pipeline mode: ``send`` statements, then read each ``answer``.

    The caller owns the connection for the pipe's life and gets it back from ``close``
    (None when it was left unusable, which the caller then ends).
    """

    def __init__(self, conn: Any, pq: Any) -> None:
        self.conn = conn
        self.pgconn = conn.pgconn
        self._pq = pq  # psycopg.pq: its ExecStatus and DiagnosticField
        self.waiting: deque[Answer] = deque()  # sent, not answered yet
        self.ready: deque[Answer] = deque()  # answered, not taken yet
        self.broken = False
        self.pgconn.enter_pipeline_mode()

    def __len__(self) -> int:
        return len(self.waiting) + len(self.ready)

    async def send(self, sql: str, params: tuple[Any, ...] | list[Any]) -> None:
        """Send one statement and a Sync; return once the bytes are with the OS.

        The statement is prepared on the connection the first time it is sent there (the
        server then skips parsing and planning it, which costs more than running it).
        """
        values, types, formats = encode_params(params)
        pg = self.pgconn
        try:
            names = _prepared.setdefault(pg, {})
            name = names.get(sql)
            if name is None:
                name = names[sql] = f"nodestep_{len(names)}".encode()
                pg.send_prepare(name, numbered(sql), types)
            pg.send_query_prepared(name, values, formats)
            pg.pipeline_sync()
            self.waiting.append(Answer())
            while pg.flush():  # 1: the socket's buffer is full; wait until it drains
                await self._ready(writer=True)
        except BaseException:
            self.broken = True
            raise

    async def answer(self) -> Answer:
        """Return the oldest unread statement's answer, waiting for it if it has not come."""
        try:
            while not self.ready:
                self._read()
                if not self.ready:
                    await self._ready(writer=False)
            return self.ready.popleft()
        except BaseException:
            self.broken = True
            raise

    def _read(self) -> None:
        """Take in whatever answers have arrived, without waiting."""
        pg, status = self.pgconn, self._pq.ExecStatus
        pg.consume_input()
        while self.waiting and not pg.is_busy():
            res = pg.get_result()
            head = self.waiting[0]
            if res is None:
                if not head.ended:
                    return  # nothing more has arrived
                continue
            found = res.status
            if found == status.PIPELINE_SYNC:
                self.ready.append(self.waiting.popleft())
            elif found == status.TUPLES_OK or found == status.COMMAND_OK:
                head.rows, head.ended = res.ntuples, True
            else:  # FATAL_ERROR, or PIPELINE_ABORTED after one (its prepare's)
                head.ended = True
                if head.sqlstate is None:
                    code = res.error_field(self._pq.DiagnosticField.SQLSTATE)
                    head.sqlstate = code.decode() if code else "?????"
                    head.message = (res.error_message or b"").decode(errors="replace").strip()
                    _prepared.pop(pg, None)  # a prepare may have failed: prepare anew

    async def _ready(self, *, writer: bool) -> None:
        loop = asyncio.get_running_loop()
        fd = self.pgconn.socket
        done = loop.create_future()

        def wake() -> None:
            if not done.done():
                done.set_result(None)

        if writer:
            loop.add_writer(fd, wake)
        else:
            loop.add_reader(fd, wake)
        try:
            await done
        finally:
            if writer:
                loop.remove_writer(fd)
            else:
                loop.remove_reader(fd)

    async def close(self) -> Any:
        """Read every answer still due, leave pipeline mode; return the connection or None."""
        if not self.broken:
            try:
                while self.waiting:
                    await self.answer()
                self.ready.clear()
                self.pgconn.exit_pipeline_mode()
            except BaseException as e:
                self.broken = True
                if not isinstance(e, Exception):
                    raise  # a cancellation: the caller ends the connection
        return None if self.broken else self.conn


# -- a run's appends on a pipe ------------------------------------------------------------

_UNIQUE = "23505"  # unique_violation: a sequence someone else stored first


def depth_of(pipeline: object) -> int:
    """Return ``PostgresStateStore(pipeline=)``: how many appends may wait for answers.

    Raises:
        ValueError: it is not a whole number of 0 or more.
    """
    if isinstance(pipeline, bool) or not isinstance(pipeline, int) or pipeline < 0:
        raise ValueError(
            f"PostgresStateStore(pipeline={pipeline!r}): give how many appends of a run may "
            f"wait for their answers, a whole number of 0 or more (0: none; the default is 2)."
        )
    return pipeline


class PipedAppends:
    """One run's appends to one branch on a connection of its own (an ``AppendPipe``).

    Args:
        pipe: The connection, in pipeline mode.
        depth: How many appends may wait for their answers at once.
        run: Runs an ``ops`` operation on another connection of the store (diagnosis).
        give: Takes the connection back (None: it was left unusable and is ended).
        where: The store, for messages.
    """

    def __init__(
        self,
        pipe: Pipe,
        depth: int,
        run: Callable[[ops.Op], Awaitable[Any]],
        give: Callable[[Any], Awaitable[None]],
        where: str,
    ) -> None:
        self.pipe = pipe
        self.depth = depth
        self._run = run
        self._give = give
        self._where = where
        self._sent: deque[tuple[Lease, int, int]] = deque()  # lease, after, last seq
        self._refused = False

    def __len__(self) -> int:
        return 0 if self._refused else len(self._sent)  # after a refusal: none due

    async def send(
        self, lease: Lease, records: Sequence[Record], *, after: int, after_id: str
    ) -> bool:
        """Send an append; ``False`` (nothing sent) when it must go the usual way."""
        if self._refused or self.pipe.broken:
            return False
        if time.time() > lease.expires - RENEW_WITHIN * lease.ttl:
            return False  # ``append`` renews the lease first; not ahead of the answers
        if len(records) > ops.BIG_APPEND:
            return False  # needs a transaction of several statements
        t, b = lease.thread_id, lease.branch_id
        lines = encode_events(t, b, records, after + 1)
        stmt = ops.chained_append(ops.rows_of(t, b, records, lines), after, after_id, lease)
        await self._io(self.pipe.send(stmt.sql, stmt.params))
        self._sent.append((lease, after, after + len(records)))
        return True

    async def confirm(self) -> int:
        """Read the oldest append's answer; return its last sequence, or raise its refusal."""
        lease, after, last = self._sent[0]
        answer = await self._io(self.pipe.answer())
        self._sent.popleft()
        if answer.sqlstate is None and answer.rows == last - after:
            return last
        self._refused = True
        if answer.sqlstate is not None and answer.sqlstate != _UNIQUE:
            raise StateStoreError(
                f"PostgreSQL history {self._where}: the append after record {after} of "
                f"thread {lease.thread_id!r} (branch {lease.branch_id!r}) failed: "
                f"{answer.message}. Nothing of it was stored."
            )
        await self._run(ops.refusal(lease.thread_id, lease.branch_id, after, lease))
        raise StateStoreError(  # pragma: no cover - refusal always raises
            f"PostgreSQL history {self._where}: an append was refused for no reason found."
        )

    async def _io(self, step: Awaitable[Any]) -> Any:
        try:
            return await step
        except OSError as e:  # psycopg's OperationalError is not one; see below
            raise self._lost(e) from e
        except Exception as e:
            if type(e).__module__.startswith("psycopg"):
                raise self._lost(e) from e
            raise

    def _lost(self, error: Exception) -> StateStoreError:
        return StateStoreError(
            f"PostgreSQL history {self._where}: the connection of a run's appends failed "
            f"({type(error).__name__}: {error}); appends sent on it may or may not be stored. "
            f"get_state() shows where the thread stands; invoke(None, thread_id=...) "
            f"continues it."
        )

    async def close(self) -> None:
        """Read the answers still due and give the connection back."""
        self._sent.clear()
        back = None
        try:
            back = await self.pipe.close()
        finally:  # cancelled meanwhile: the connection is ended, never left out
            await self._give(back)
