"""Append a thread's records to its store, numbering them and adding checkpoints.

Loading them back is ``_engine.positions``'s.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import anyio

from nodestep._engine.backend import shielded
from nodestep._engine.lease import ThreadHold
from nodestep._engine.observe import store_log
from nodestep._errors import StateStoreError, ThreadBusyError, ThreadConflictError
from nodestep._ids import Clock, IdFactory
from nodestep._state.schema import StateSchema
from nodestep._superstep import machine
from nodestep._superstep.position import Position
from nodestep._superstep.records import Checkpoint, HistoryRecord
from nodestep.store import REQUEST_KEY, AppendPipe, Record, StateStore

__all__ = [
    "CHECKPOINT_EVERY",
    "ITEMS_PER_RECORD",
    "PIPE_AFTER",
    "SETTLE_WITHIN",
    "HistoryWriter",
    "checkpoint_spacing",
    "round_ts",
    "stamp",
]

CHECKPOINT_EVERY = 50
"""A full checkpoint follows every 50 stored records, so a load replays at most 50; a
state of many items waits longer (``checkpoint_spacing``)."""

ITEMS_PER_RECORD = 4
"""A checkpoint of a state holding ``n`` items waits for ``n / 4`` records, if more than 50."""


def checkpoint_spacing(values: dict[str, Any]) -> int:
    """Return how many records a checkpoint of a state holding ``values`` waits for.

    Why not always ``CHECKPOINT_EVERY``: a checkpoint writes the whole state, so at a fixed
    spacing a run whose records each add an item (a chat turn, a message) would pay, per
    record, a cost that grows with everything added before (a 2,000-message conversation's
    checkpoint took 5 ms: 0.3 ms a turn). Spaced by the state's size, counted in items of
    its lists, tuples, sets and dicts, a checkpoint costs each record about the same at any
    size, and a load folds at most that many records: a cold load stays proportional to the
    thread's state. A state without containers keeps a checkpoint every 50 records.

    A value whose class has ``__nodestep_items__`` counts as many items as that method
    says: a workspace's few files may hold megabytes, which their number alone would not
    show.
    """
    items = 0
    for value in values.values():
        weigh = getattr(type(value), "__nodestep_items__", None)
        if weigh is not None:
            items += weigh(value)
        elif isinstance(value, list | tuple | dict | set | frozenset):
            items += len(value)
    return max(CHECKPOINT_EVERY, items // ITEMS_PER_RECORD)


PIPE_AFTER = 4
"""A run's appends wait for their answers until this many have; later ones may be sent
ahead (``nodestep.store.AppendPipe``). A pipe costs a connection of its own and about 0.3 ms to
take and give back: a run of a few steps is faster without (measured on PostgreSQL)."""

SETTLE_WITHIN = 60.0
"""Seconds a run waits for the answers to its appends sent ahead before it gives up."""


def round_ts(ts: float) -> float:
    """Return ``round(ts, 6)``, the stored form of a record's timestamp: the same float.

    Why not ``round`` itself: for a float it goes through a decimal string and back, 4% of
    a W4 step. Below 4e9 (2106), ``ts * 1e6`` is below 2**52, so its float is within a
    quarter of its exact value and its fraction a multiple of its spacing: unless that
    fraction is exactly one half, the exact value rounds the same way, and dividing the
    whole number of microseconds by 1e6 is correctly rounded, as ``round``'s result is. A
    half (a quarter of ``time.time()``'s values) is rounded from the exact value, a tie to
    the even one, as ``round`` does. Anything else (an ``int`` from a test's clock, a
    negative or far time) goes to ``round``.
    """
    if type(ts) is not float or not 0.0 < ts < 4e9:
        return round(ts, 6)
    scaled = ts * 1e6
    whole = scaled // 1.0
    frac = scaled - whole
    if frac != 0.5:
        return (whole + (frac > 0.5)) / 1e6
    mantissa, exponent = math.frexp(ts)  # ts == mantissa * 2**exponent, exactly
    den = 1 << (53 - exponent)
    q, r = divmod(int(mantissa * 9007199254740992.0) * 1_000_000, den)
    r += r
    if r > den or (r == den and q & 1):
        q += 1
    return q / 1_000_000


def stamp(
    body: Record, event_id: str, seq: int, ts: float, thread_id: str, branch_id: str
) -> Record:
    """Add the envelope a store keeps every record under to a record's JSON ``body``."""
    body["id"] = event_id
    body["seq"] = seq
    body["ts"] = ts
    body["thread"] = thread_id
    body["branch"] = branch_id
    return body


class HistoryWriter:
    """Number, stamp and append the records of one thread branch, in order.

    The writer remembers the last sequence number it saw; each append asks the store to
    refuse it if the branch moved on since (another process wrote to the thread), which
    raises ``ThreadConflictError`` instead of interleaving two runs' records. A run's
    writer also holds the branch's lease (``hold``) and appends as its holder, so a run
    whose lease was lost is refused too. A refusal says what the writer stored before.
    One run's records are committed one call after another, never concurrently.
    """

    def __init__(
        self,
        store: StateStore,
        schema: StateSchema,
        thread_id: str,
        branch_id: str,
        pos: Position,
        new_id: IdFactory,
        clock: Clock,
        hold: ThreadHold | None = None,
        request_key: str | None = None,
    ) -> None:
        self.store = store
        self.hold = hold
        self.request_key = request_key  # until stored, with the turn's first records
        self.keyed = request_key is not None  # so a retry applies the input once
        self.first_seq = 0  # the first record this writer stored; 0: none yet
        self.schema = schema
        self.thread_id = thread_id
        self.branch_id = branch_id
        self.pos = pos
        self.new_id = new_id
        self.clock = clock
        # False once a commit failed: the position may then be ahead of the store.
        self.in_sync = True
        # Set when subgraph tasks commit through this writer while the run's own loop
        # does (``_engine.subgraph_writer``): their commits then take turns.
        self.gate: anyio.Lock | None = None
        # A run's writer with a lease may send appends ahead of their answers
        # (``nodestep.store.AppendPipe``); ``settle`` reads the answers still due.
        self.may_pipe = False
        self.pipe: AppendPipe | None = None
        self.waited = 0  # appends answered one by one so far
        self.stored_seq = pos.seq  # the last record known stored (answered)
        self.log_commits = store_log.isEnabledFor(logging.DEBUG)  # asked once per writer

    def _body(self, record: HistoryRecord, seq: int, now: float) -> Record:
        body = record.to_json(self.schema)
        return stamp(body, self.new_id(), seq, now, self.thread_id, self.branch_id)

    async def commit(self, records: Sequence[HistoryRecord]) -> str:
        """Append ``records``, plus a checkpoint when one is due; return the last one's id.

        The caller has already advanced ``pos`` with the records, so a checkpoint added
        here describes the position after them (``advance_and_commit`` does both).

        A ``request_key`` given to the writer is stored in the first ``run_started``
        record it commits (a new turn's first). With ``may_pipe`` and a store that has a
        pipe (``nodestep.store.AppendPipe``), a commit after the run's first returns once its
        records are sent, and the answer is read later (``settle``); a refusal may then
        come from an earlier commit's records.

        Raises:
            StateStoreError: a record cannot be stored (nothing of this call is stored).
            ThreadConflictError: another writer appended to the branch first; none of these
                records is stored, and the message says what the writer stored before.
            ThreadBusyError: the writer's lease was lost; the same.
        """
        try:
            if self.gate is None:  # the common case: no subgraph commits through this writer
                # ``_commit``, inline: one coroutine less on every superstep
                bodies, after = self._bodies(records)
                await self._append(bodies, after)
                return self._stored_as(bodies, after)
            async with self.gate:
                return await self._commit(records)
        except BaseException as error:
            refusal = self._refusal(error)
            if refusal is error:
                raise
            raise refusal from error

    async def commit_taking(
        self, records: Sequence[HistoryRecord], holder: str, ttl: float
    ) -> tuple[ThreadHold, bool]:
        """Take the branch's lease for ``holder`` and commit a run's first records with it.

        One store call (``StateStore.acquire_and_append``), checked against the writer's
        position: its last record's sequence number and id. Returns the run's hold, and
        whether the records were stored: when the branch moved past the position (or was
        deleted and written anew), the lease is taken alone, and this writer, whose
        position is not the branch's, must not be used again.

        Raises:
            ThreadBusyError: another writer holds the branch; nothing changed.
            StateStoreError: the records cannot be stored; nothing changed.
        """
        bodies, after = self._bodies(records)
        # Shielded, as ``take_thread``'s lease: a cancel let in after the store took the
        # lease (and maybe stored the records) would leave it held, by no one, for its ttl.
        with shielded():
            lease, stored = await self.store.acquire_and_append(
                self.thread_id,
                self.branch_id,
                holder,
                bodies,
                ttl=ttl,
                after=after,
                after_id=self.pos.event_id,
            )
        hold = self.hold = ThreadHold(self.store, lease)
        if not stored:
            self.in_sync = False
            return hold, False
        self.stored_seq = bodies[-1]["seq"]
        self.waited += 1
        self._stored_as(bodies, after)
        return hold, True

    async def commit_last(self, records: Sequence[HistoryRecord]) -> str:
        """Commit a run's last records and give its lease back; return the first one's id.

        Why one store call: a completed run's last superstep and its ``run_completed`` end
        the run, so nothing is left to append under the lease. Stored together with the
        lease's release (``StateStore.append_and_release``), they cost an SQLite store one
        transaction where there were three (the superstep, ``run_completed``, the release);
        the history holds the same records. A writer with a pipe open, or with subgraph
        commits through it (``gate``), appends as ``commit`` does and leaves the release
        to the run's hold. Raises as ``commit`` does.
        """
        try:
            if self.gate is not None:
                async with self.gate:
                    return await self._commit_first(records, release=False)
            return await self._commit_first(records, release=self.pipe is None)
        except BaseException as error:
            refusal = self._refusal(error)
            if refusal is error:
                raise
            raise refusal from error

    async def _commit_first(self, records: Sequence[HistoryRecord], *, release: bool) -> str:
        bodies, after = self._bodies(records)
        hold = self.hold
        if release and hold is not None:  # a run's own writer (a subgraph's holds no lease)
            await self.store.append_and_release(hold.lease, bodies, after=after)
            hold.released = True
            self.stored_seq = bodies[-1]["seq"]
        else:
            await self._append(bodies, after)
        self._stored_as(bodies, after)
        first_id: str = bodies[0]["id"]
        return first_id

    async def advance_and_commit(self, records: Sequence[HistoryRecord]) -> str:
        """Advance ``pos`` with ``records`` and commit them, as one step under ``gate``.

        A task of a superstep with subgraph tasks records its end so: no commit of a
        subgraph task then comes between the two, which would store a checkpoint of a
        position ahead of the stored records. Raises as ``commit`` does.
        """
        try:
            async with self.gate or anyio.Lock():
                for record in records:
                    record.advance(self.schema, self.pos)
                return await self._commit(records)
        except BaseException as error:
            refusal = self._refusal(error)
            if refusal is error:
                raise
            raise refusal from error

    def _refusal(self, error: BaseException) -> BaseException:
        """Return what a failed commit raises (``error``, or a refusal saying what this
        writer stored before); the position may now be ahead of the store."""
        self.in_sync = False
        if isinstance(error, ThreadBusyError):
            return error.again(stored=self._stored())
        if isinstance(error, ThreadConflictError):
            stored = self._stored(error.found)
            return ThreadConflictError(
                error.thread_id, error.branch_id, error.expected, error.found, stored=stored
            )
        return error

    def _stored(self, found: int = -1) -> str:
        """Say what this writer stored before a refused append, and how to go on.

        ``found``: where the store's branch now ends (-1: not known). Below this writer's
        first record, another writer deleted the thread (or pruned or rewrote it) since.
        """
        if not self.first_seq:
            return (
                "This call stored nothing before; run it again (with the same request_key "
                "if it has one) to continue from the new state."
            )
        stored = f"events {self.first_seq} to {self.stored_seq}"
        if 0 <= found < self.first_seq:
            return (
                f"This call had stored {stored}, but the branch no longer holds them: another "
                f"writer deleted the thread (or rewrote it) meanwhile. Run the call again to "
                f"start from the thread as it is now."
            )
        if not self.keyed:
            return (
                f"This call stored {stored} before, and they stay. See get_state() for where "
                f"the thread stands before you run it again: without a request_key, a call "
                f"run again applies its input again."
            )
        return (
            f"This call stored {stored} before, and they stay. Retry it with the same "
            f"request_key to finish it without applying its input twice, or get_state() to "
            f"see where the thread stands."
        )

    async def _append(self, bodies: list[Record], after: int) -> None:
        hold = self.hold
        if hold is None:
            await self.store.append(self.thread_id, self.branch_id, bodies, after=after)
            self.stored_seq = bodies[-1]["seq"]
            return
        pipe = self.pipe
        if pipe is None and self.may_pipe and self.waited >= PIPE_AFTER:
            self.may_pipe = False  # asked once
            pipe = self.pipe = await self.store.open_pipe(hold.lease)
        after_id = self.pos.event_id  # the record at ``after``: this run's last one
        if pipe is not None and after_id is not None:
            if await pipe.send(hold.lease, bodies, after=after, after_id=after_id):
                while len(pipe) > pipe.depth:
                    self.stored_seq = await pipe.confirm()
                return
            while len(pipe):  # it goes the usual way: after the answers to the ones sent
                self.stored_seq = await pipe.confirm()
        hold.lease = await self.store.append_leased(hold.lease, bodies, after=after)
        self.stored_seq = bodies[-1]["seq"]
        self.waited += 1

    async def settle(self, error: BaseException | None = None) -> None:
        """Read the answers to the appends still due, and free the pipe (if any).

        A run calls it before it returns, pauses or raises (``error``), shielded from
        cancellation: until then an append sent ahead may still be refused.

        Raises:
            ThreadConflictError, ThreadBusyError, StateStoreError: an append was refused;
                it and everything after it is not stored (raised instead of ``error``,
                which then comes from a state that was never stored).
        """
        pipe, self.pipe = self.pipe, None
        if pipe is None:
            return
        refusal: BaseException | None = None
        scope = anyio.CancelScope(shield=True, deadline=anyio.current_time() + SETTLE_WITHIN)
        with scope:
            try:
                while len(pipe):
                    self.stored_seq = await pipe.confirm()
            except Exception as refused:
                refusal = self._refusal(refused)
            finally:
                await pipe.close()
        if refusal is None and scope.cancelled_caught:  # the answers did not come in time
            refusal = self._refusal(StateStoreError(
                f"Thread '{self.thread_id}' (branch '{self.branch_id}'): the store did not "
                f"answer this run's last appends within {SETTLE_WITHIN:g} s; they may or may "
                f"not be stored. get_state() shows where the thread stands; invoke(None, "
                f"thread_id=...) continues it."
            ))  # fmt: skip
        if refusal is not None and (error is None or isinstance(error, Exception)):
            raise refusal from error  # a cancellation goes on as it is

    async def _commit(self, records: Sequence[HistoryRecord]) -> str:
        bodies, after = self._bodies(records)
        await self._append(bodies, after)
        return self._stored_as(bodies, after)

    def _bodies(self, records: Sequence[HistoryRecord]) -> tuple[list[Record], int]:
        """Return the stored form of ``records`` (and a checkpoint when one is due), and the
        sequence number they follow."""
        pos = self.pos
        after = pos.seq
        now = round_ts(self.clock())
        if len(records) == 1:  # most commits: a superstep's one record, without a listcomp
            bodies = [self._body(records[0], after + 1, now)]
        else:
            bodies = [self._body(r, after + i, now) for i, r in enumerate(records, start=1)]
        since = pos.since_checkpoint
        for record in records:
            since = 0 if isinstance(record, Checkpoint) else since + 1
        if since >= CHECKPOINT_EVERY and since >= checkpoint_spacing(pos.values):
            # Its values come from stored, checked writes: see ``Checkpoint.written``.
            checkpoint = Checkpoint(pos, written=True)
            bodies.append(self._body(checkpoint, after + len(bodies) + 1, now))
        if self.request_key is not None:
            for body in bodies:
                if body["type"] == "run_started":
                    body[REQUEST_KEY] = self.request_key
        return bodies, after

    def _stored_as(self, bodies: list[Record], after: int) -> str:
        """Move the position on past the stored ``bodies``; return the last one's id."""
        pos = self.pos
        if not self.first_seq:
            self.first_seq = after + 1
            self.request_key = None  # stored with the turn's first records
        for body in bodies:  # counted as replay counts them
            machine.stored(pos, body["seq"], body["id"], checkpoint=body["type"] == "checkpoint")
        last_id: str = bodies[-1]["id"]
        if self.log_commits:
            self._log_commit(bodies)
        return last_id

    def _log_commit(self, bodies: list[Record]) -> None:
        """Say which records were stored (DEBUG), by kind and id, never their data."""
        last = bodies[-1]
        extra = {
            "thread_id": self.thread_id,
            "branch_id": self.branch_id,
            "event_id": last["id"],
            "seq": last["seq"],
        }
        kinds = ", ".join(body["type"] for body in bodies)
        store_log.debug(
            "stored %s of thread %r, branch %r, up to seq %d",
            kinds,
            self.thread_id,
            self.branch_id,
            last["seq"],
            extra=extra,
        )
