"""A run's appends to PostgreSQL sent ahead of their answers: ``PostgresStateStore.open_pipe``.

Each append is ``_sql.chained_append``: the usual checks (the run's lease, the branch's
last sequence) plus the id of the record it follows, sent on one connection of the run's
in libpq's pipeline mode (``_pg_pipe``), each in a transaction of its own. The engine reads
the answers in order (``confirm``); the first refusal is diagnosed as ``append`` does it
(``_sql.refusal``: the lease lost, or another writer first), and every append sent after it
was refused by the server too, since the record it follows is missing.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from nodestep._errors import StateStoreError
from nodestep.store import _checks, _sql
from nodestep.store._contract import Record
from nodestep.store._leases import RENEW_WITHIN, Lease
from nodestep.store._pg_pipe import Pipe

__all__ = ["PipedAppends", "depth_of"]

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
        run: Runs an ``_sql`` operation on another connection of the store (diagnosis).
        give: Takes the connection back (None: it was left unusable and is ended).
        where: The store, for messages.
    """

    def __init__(
        self,
        pipe: Pipe,
        depth: int,
        run: Callable[[_sql.Op], Awaitable[Any]],
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
        if len(records) > _sql.BIG_APPEND:
            return False  # needs a transaction of several statements
        t, b = lease.thread_id, lease.branch_id
        lines = _checks.encode_events(t, b, records, after + 1)
        stmt = _sql.chained_append(_sql.rows_of(t, b, records, lines), after, after_id, lease)
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
        await self._run(_sql.refusal(lease.thread_id, lease.branch_id, after, lease))
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
