"""The ``StateStore`` interface: an append-only log of history records per thread and branch.

A store knows nothing about graphs or state types. It keeps *records*: flat JSON objects
that the engine builds, each with these keys (and more that depend on the record's type):

=========  =================================================================================
``id``     a uuid4 string, unique in the store
``seq``    the record's sequence number in its branch: 1, 2, 3, ... with no gaps (a forked
           branch starts at the number after the event it was forked from)
``ts``     a ``time.time()`` timestamp
``thread`` the thread id
``branch`` the branch id (``"main"`` unless forked)
``type``   what happened, e.g. ``"run_started"`` or ``"checkpoint"`` (see ``docs/history.md``)
=========  =================================================================================

Records are JSON data: dicts, lists, strings, numbers, booleans and ``None``. A store must
give them back equal to what it was given, as new objects (callers may change what they get).

Writing a back end of your own means subclassing ``StateStore`` and implementing its seven
abstract methods (``read_tail`` has a default built on them; override it to answer a load in
one round trip); run the conformance suite in ``nodestep.testing`` against it. Three rules
matter:

* **Append is atomic and checked.** ``append(thread, branch, records, after=n)`` stores all
  records or none, and only if the branch's last sequence number is still ``n``; otherwise
  it raises ``ThreadConflictError`` and stores nothing. That check is what keeps two writers
  of one thread from losing each other's records.
* **Checkpoints are indexed.** ``last_checkpoint`` must not scan the history: the engine calls
  it for every load, and history can be long.
* **No cost that grows with history.** ``append``, ``read`` of a short range,
  ``last_sequence`` and ``last_checkpoint`` should cost the same for 100 and 100,000 records.

Leases (one writer per thread branch) and request keys have defaults a store one process
uses can inherit: leases in a table in this process, request keys found by reading the
branch. A store that processes share overrides ``acquire_lease``, ``renew_lease`` and
``release_lease`` to keep leases where they all see them, each a check and a write under
one lock or transaction; a store with long histories overrides ``find_request`` with an
index (see ``docs/stores.md``).
"""

from __future__ import annotations

import os
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import anyio

from nodestep._display.views import branch_html, store_html
from nodestep._errors import StateStoreError, ThreadBusyError, ThreadConflictError
from nodestep.store._leases import RENEW_WITHIN, Lease, LeaseTable
from nodestep.store._threads import ThreadPage, ThreadStatus

__all__ = [
    "REQUEST_KEY",
    "AppendPipe",
    "BranchRecord",
    "Lease",
    "Record",
    "RecordPlace",
    "StateStore",
    "append_taken",
    "missing_checkpoint",
]

REQUEST_KEY = "request"
"""The key of a ``run_started`` record that holds the call's ``request_key``."""

_create_lock = threading.Lock()  # guards the first use of a store's default lease table


def _new_create_lock_after_fork() -> None:
    # A lock another thread held at fork time would stay held in the child forever.
    global _create_lock
    _create_lock = threading.Lock()


os.register_at_fork(after_in_child=_new_create_lock_after_fork)

Record = dict[str, Any]
"""One history record: a flat JSON object (see the module docstring for its keys)."""


@dataclass(frozen=True, slots=True)
class BranchRecord:
    """A branch forked from a thread's history.

    Attributes:
        id: The branch id: the name given to ``fork`` or a random id.
        thread_id: The thread.
        parent_id: The branch it was forked from.
        from_event_id: The event of the parent branch the fork starts after.
        from_sequence: That event's sequence number; the branch's first record is the next.
        created_at: A ``time.time()`` timestamp.
    """

    id: str
    thread_id: str
    parent_id: str
    from_event_id: str
    from_sequence: int
    created_at: float

    def to_json(self) -> Record:
        """Return the record's JSON form, as stores keep it."""
        return {
            "type": "branch",
            "thread": self.thread_id,
            "branch": self.id,
            "parent": self.parent_id,
            "from_event": self.from_event_id,
            "from_seq": self.from_sequence,
            "ts": self.created_at,
        }

    def _repr_html_(self) -> str:
        return branch_html(self)

    @classmethod
    def from_json(cls, data: Record) -> BranchRecord:
        """Read a record written by ``to_json``."""
        return cls(
            id=data["branch"],
            thread_id=data["thread"],
            parent_id=data["parent"],
            from_event_id=data["from_event"],
            from_sequence=data["from_seq"],
            created_at=data["ts"],
        )


class RecordPlace(NamedTuple):
    """Where a store keeps one record: its file, its line and the line's byte offset.

    ``str()`` gives ``"<path>: line <line> (byte <offset>)"``, the form every error about a
    line of a history file starts with.
    """

    path: str
    line: int
    offset: int

    def __str__(self) -> str:
        return f"{self.path}: line {self.line} (byte {self.offset})"


class AppendPipe(Protocol):
    """One run's appends to one branch, sent before the answers to the earlier ones.

    A run appends its supersteps one after another. A store whose appends cross a network
    (or a process boundary) can take a run's next append before it has answered the last
    one (``StateStore.open_pipe``): it sends each at once, checks each on the server as
    before, and the engine reads the answers later, at most ``depth`` behind and always
    before the run returns, pauses, fails or streams an event. An append sent after one
    that is refused is refused too (each names the record it follows), so the branch never
    holds a step whose predecessor is missing. A process that dies may lose the appends
    still unanswered (a server stops at the first answer it cannot deliver), never one
    before them: what stays is a prefix of the run.

    Attributes:
        depth: How many sent appends may wait for their answers at once.
    """

    depth: int

    def __len__(self) -> int:
        """Return how many sent appends still wait for their answers."""
        ...

    async def send(
        self, lease: Lease, records: Sequence[dict[str, Any]], *, after: int, after_id: str
    ) -> bool:
        """Send an append of ``records`` after record ``after`` (whose id is ``after_id``).

        Returns:
            ``False``, sending nothing, when this append must go the usual way
            (``append_leased``), e.g. because the lease is due for renewal.

        Raises:
            StateStoreError: a record is not a valid event; nothing sent.
        """
        ...

    async def confirm(self) -> int:
        """Wait for the oldest sent append's answer; return the last sequence it stored.

        Raises:
            ThreadBusyError: the lease was lost before it; nothing of it is stored.
            ThreadConflictError: another writer appended first; the same.
            StateStoreError: the store refused it or cannot be reached.
        """
        ...

    async def close(self) -> None:
        """Read the answers still due (refusals are not raised) and free the connection."""
        ...


def missing_checkpoint(thread_id: str, branch_id: str, at: int) -> StateStoreError:
    """Return the error for a branch whose records before ``at`` hold no checkpoint."""
    return StateStoreError(
        f"Thread '{thread_id}' (branch '{branch_id}') has records but no checkpoint at or "
        f"before record {at}; its history is damaged or was written by another program."
    )


class StateStore(ABC):
    """Where threads keep their history: an append-only log of records per branch.

    All methods are async. The built-in stores (memory, file, SQLite, PostgreSQL) implement
    it; see the module docstring for the rules a back end of your own must keep.

    Attributes:
        generation: Stands for the history the store reads, compared by identity: a store
            whose history can be replaced under it sets a new object when it notices (the
            file store, when another file was renamed over its path). A graph serves a
            thread's latest state from its cache only while the store's last sequence
            number and ``generation`` are those the state was loaded with. The default,
            ``None`` for the life of the store, suits a store whose history is never
            replaced; reading it must cost no I/O.
    """

    generation: object = None

    def _repr_html_(self) -> str:
        kind, location, threads = self._display_facts()
        return store_html(kind, location, threads)

    def _display_facts(self) -> tuple[str, str, int | None]:
        """Return what a notebook shows of the store: its kind, where it keeps
        histories, and its number of threads, or ``None`` where that needs I/O."""
        return type(self).__name__, repr(self), None

    @abstractmethod
    async def append(
        self, thread_id: str, branch_id: str, records: Sequence[Record], *, after: int
    ) -> None:
        """Append ``records`` to a branch, atomically, if its last sequence is still ``after``.

        The records carry their own ``seq`` values, ``after + 1``, ``after + 2``, ... An empty
        branch has last sequence 0 (or, for a forked branch, its ``from_sequence`` before its
        first record).

        Raises:
            ThreadConflictError: the branch's last sequence is not ``after``; nothing stored.
            StateStoreError: the records cannot be written; nothing stored.
        """

    @abstractmethod
    async def read(
        self, thread_id: str, branch_id: str, *, start: int = 1, stop: int | None = None
    ) -> list[Record]:
        """Return the branch's records with ``start <= seq <= stop`` (``None``: to the end).

        A branch with no records gives ``[]``.
        """

    @abstractmethod
    async def last_sequence(self, thread_id: str, branch_id: str) -> int:
        """Return the sequence number of the branch's last record, or 0 if it has none."""

    async def last_record(self, thread_id: str, branch_id: str) -> tuple[int, str | None]:
        """Return the branch's last sequence number and its record's id: ``(0, None)`` if empty.

        A graph keeps each thread's latest position, and serves it while the store's last
        record is still the one it was loaded with. The sequence number alone cannot tell:
        a thread deleted and written again (by another process) can reach the same number
        with other records. A store that gives the id here is checked by both; the default
        gives ``None`` for the id (``last_sequence`` alone), which suits a store that
        processes do not share or whose deletions change ``generation``, as the memory
        and file stores do. A store that processes share gives the id in the same lookup.
        """
        return await self.last_sequence(thread_id, branch_id), None

    @abstractmethod
    async def last_checkpoint(
        self, thread_id: str, branch_id: str, *, at_or_before: int | None = None
    ) -> int | None:
        """Return the sequence number of the branch's last ``checkpoint`` record.

        Args:
            at_or_before: Only consider checkpoints with ``seq <= at_or_before``.
        """

    async def read_tail(
        self, thread_id: str, branch_id: str, *, at: int | None = None
    ) -> list[Record]:
        """Return the records from the last checkpoint at or before ``at`` through ``at``.

        ``at`` ``None`` means the branch's last record; ``[]`` when the branch is empty. This
        is what loading a state needs. The default calls ``last_sequence``,
        ``last_checkpoint`` and ``read``; a back end may answer it in one round trip.
        """
        if at is None:
            at = await self.last_sequence(thread_id, branch_id)
            if at == 0:
                return []
        start = await self.last_checkpoint(thread_id, branch_id, at_or_before=at)
        if start is None:
            raise missing_checkpoint(thread_id, branch_id, at)
        return await self.read(thread_id, branch_id, start=start, stop=at)

    @abstractmethod
    async def locate(self, thread_id: str, event_id: str) -> tuple[str, int] | None:
        """Return ``(branch_id, seq)`` of the record with id ``event_id`` in the thread.

        An id is new in its thread, unless two writers counted ids alike (two graphs with
        ``sequential_ids()`` on one thread). Of its copies, return the one with the lowest
        ``seq``, and of those the one whose branch id sorts first by code points, so that
        every store gives the same answer (``nodestep.store._index.first_copy``).
        """

    @abstractmethod
    async def create_branch(self, branch: BranchRecord, first: Sequence[Record]) -> bool:
        """Create a branch and append its first records (a checkpoint), atomically.

        Returns:
            ``False``, storing nothing, when the thread already has a branch with that id.
        """

    @abstractmethod
    async def list_branches(self, thread_id: str) -> list[BranchRecord]:
        """Return the thread's forked branches, oldest first."""

    async def describe_record(self, thread_id: str, branch_id: str, seq: int) -> RecordPlace | None:
        """Return where the branch's record ``seq`` is kept, or ``None`` when not known.

        The engine asks only when a stored record cannot be decoded, so that its error
        names the place to look at (the file, line and byte offset). The default, for
        stores without such places, returns ``None``; a file store overrides it. It may be
        slow: it is never called on a path that works.
        """
        return None

    async def aclose(self) -> None:  # noqa: B027 - an optional hook, empty by default
        """Release what the store holds open; the default does nothing."""

    # -- one writer per branch: leases ----------------------------------------------------

    async def acquire_lease(
        self, thread_id: str, branch_id: str, holder: str, *, ttl: float
    ) -> Lease:
        """Take the branch for ``holder`` for ``ttl`` seconds, unless another lease holds it.

        The check and the taking are one step under the store's lock: of two writers that
        ask at once, one gets the lease. A lease that expired can be taken by anyone. The
        default keeps leases in this process (right for a store one process uses); a store
        that processes share overrides the three lease methods.

        Raises:
            ThreadBusyError: another holder's lease has not expired; nothing changed.
        """
        lock, table = self._lease_table()
        with lock:
            return table.acquire(thread_id, branch_id, holder, ttl, time.time())

    async def renew_lease(self, lease: Lease) -> Lease:
        """Extend ``lease`` by its ttl from now, and return the renewed lease.

        A lease that expired is renewed too, as long as no one took the branch since.

        Raises:
            ThreadBusyError: the lease is not the branch's current one any more (``lost``):
                it expired and another writer took the branch.
        """
        lock, table = self._lease_table()
        with lock:
            return table.renew(lease, time.time())

    async def release_lease(self, lease: Lease) -> None:
        """Give the branch back, if ``lease`` still holds it; else do nothing."""
        lock, table = self._lease_table()
        with lock:
            table.release(lease)

    async def append_leased(self, lease: Lease, records: Sequence[Record], *, after: int) -> Lease:
        """Append ``records`` to the lease's branch as ``append`` does, as its holder.

        No one else can take a lease before it expires, so while ``lease`` has more than
        half its ttl left this is ``append`` and nothing more: no store call per append for
        the lease. Closer to expiry it renews the lease first, which refuses a lease that
        was lost. Stores need not override it.

        Returns:
            The lease in force: ``lease``, or its renewal.

        Raises:
            ThreadBusyError: the lease was lost; nothing stored.
            ThreadConflictError: the branch's last sequence is not ``after``; nothing stored.
        """
        if time.time() > lease.expires - RENEW_WITHIN * lease.ttl:
            lease = await self.renew_lease(lease)
        await self.append(lease.thread_id, lease.branch_id, records, after=after)
        return lease

    async def append_and_release(
        self, lease: Lease, records: Sequence[Record], *, after: int
    ) -> None:
        """Append ``records`` as ``append_leased`` does, then give the lease back.

        A run's last append calls it: the run has nothing more to write under the lease.
        The default makes the two calls; a store may do both in one transaction (SQLite
        does), which must then store the records and drop the lease together or do
        neither. A release that fails after the records are stored is not an error: the
        lease then expires after its ttl, as a crashed writer's does.

        Raises:
            ThreadBusyError: the lease was lost; nothing stored.
            ThreadConflictError: the branch's last sequence is not ``after``; nothing stored.
            StateStoreError: the records cannot be written; nothing stored.
        """
        lease = await self.append_leased(lease, records, after=after)
        with suppress(StateStoreError):
            await self.release_lease(lease)

    async def acquire_and_append(
        self,
        thread_id: str,
        branch_id: str,
        holder: str,
        records: Sequence[Record],
        *,
        ttl: float,
        after: int,
        after_id: str | None = None,
    ) -> tuple[Lease, bool]:
        """Take the branch for ``holder``, then append ``records`` as its holder.

        A run's first append, when the run already knows the branch's position (its graph
        keeps the latest one it wrote): one call takes the lease and stores the run's first
        records, checked against that position as ``append`` checks them, and by the id of
        its last record (``after_id``) where the store gives ids (``last_record``). If the
        branch has moved on since (its last record is not that one), nothing is stored but
        the lease is taken all the same, and the caller reads the branch under it. The
        default makes the calls one after the other; a store may do both in one
        transaction (SQLite does), which must then take the lease and store the records
        together, or take the lease alone when the branch moved on.

        Returns:
            The lease, and whether ``records`` were stored.

        Raises:
            ThreadBusyError: another holder's lease has not expired, or took the branch
                over before the append (a ttl shorter than the call); nothing stored.
            StateStoreError: the records cannot be written; nothing stored, and the
                lease is given back.
        """
        lease = await self.acquire_lease(thread_id, branch_id, holder, ttl=ttl)

        async def append() -> tuple[Lease, bool]:
            try:
                if after_id is not None:
                    seq, last_id = await self.last_record(thread_id, branch_id)
                    if last_id is not None and (seq, last_id) != (after, after_id):
                        return lease, False  # the same length, other records: written anew
                return await self.append_leased(lease, records, after=after), True
            except ThreadBusyError:
                raise  # a ThreadConflictError too, but not "moved on": append_taken's
            except ThreadConflictError:
                return lease, False  # the branch moved on

        return await append_taken(self, lease, append)

    def _lease_table(self) -> tuple[threading.Lock, LeaseTable]:
        # Kept with the pid that made it. A forked child starts a table of its own: the
        # parent's lock may be held by a thread the child does not have, and the parent's
        # leases belong to runs that go on in the parent only (this table is the process's).
        found: tuple[int, threading.Lock, LeaseTable] | None = self.__dict__.get("_default_leases")
        pid = os.getpid()
        if found is None or found[0] != pid:
            with _create_lock:
                found = self.__dict__.get("_default_leases")
                if found is None or found[0] != pid:
                    found = self.__dict__["_default_leases"] = (pid, threading.Lock(), LeaseTable())
        return found[1], found[2]

    async def open_pipe(self, lease: Lease) -> AppendPipe | None:
        """Return a pipe for a run's appends ahead of their answers, or ``None`` (the default).

        See ``AppendPipe``: a store whose appends cross a network implements it.
        """
        return None

    # -- exactly-once input: request keys -------------------------------------------------

    async def find_request(self, thread_id: str, branch_id: str, key: str) -> int | None:
        """Return the ``seq`` of the branch's ``run_started`` record with request key ``key``.

        The engine stores a call's ``request_key`` in its first record, under
        ``REQUEST_KEY``, and asks for it before it runs a call with a key. The default
        reads the whole branch; a store with long histories keeps an index instead, as the
        built-in stores do.
        """
        for record in await self.read(thread_id, branch_id):
            if record.get(REQUEST_KEY) == key and record.get("type") == "run_started":
                seq: int = record["seq"]
                return seq
        return None

    # -- moving threads: the kept part of a pruned branch ---------------------------------

    async def store_pruned(
        self,
        thread_id: str,
        branch_id: str,
        records: Sequence[Record],
        branch: BranchRecord | None = None,
    ) -> None:
        """Store a pruned branch the store does not have: its kept records, as prune leaves them.

        ``import_thread`` calls it for a branch whose export starts past the branch's
        opening (``records[0]``, a checkpoint, has ``seq`` greater than 1 for ``"main"``,
        or than ``branch.from_sequence + 1`` for a fork, given with its ``branch`` record).
        The branch then reads, runs and forks as the pruned one of the store it came from:
        its records from that checkpoint on, appends numbered on from the last. The
        built-in stores keep it as their own ``prune`` does; the default refuses, for a
        store written before this method that does not say how it keeps a pruned branch.

        Raises:
            StateStoreError: The store already has the branch, or a record is refused;
                nothing was stored.
            NotImplementedError: The store cannot keep a pruned branch.
        """
        raise NotImplementedError(
            f"{type(self).__name__} does not implement store_pruned(), so it cannot keep a "
            f"pruned branch (one whose first record is a checkpoint past the branch's "
            f"start); implement it as the store's prune keeps a branch (see docs/stores.md)."
        )

    # -- thread management ------------------------------------------------------------------
    # Not abstract, so that a store written before them still works for runs; the rules
    # every store keeps are in nodestep.store._threads and docs/threads.md.

    async def list_threads(
        self,
        *,
        status: ThreadStatus | Sequence[ThreadStatus] | None = None,
        active_after: float | None = None,
        active_before: float | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ThreadPage:
        """Return a page of the store's threads, most recent activity first.

        Args:
            status: Only threads in this status, or in one of these.
            active_after: Only threads whose last activity (``updated_at``) is at or after
                this ``time.time()`` timestamp.
            active_before: Only threads whose last activity is before this timestamp.
            limit: The most threads on the page.
            cursor: The ``next_cursor`` of the previous page; ``None`` for the first.

        Raises:
            GraphConfigError: An argument is out of range, or ``cursor`` is not a cursor.
        """
        raise self._no_thread_management("list_threads")

    async def delete_thread(self, thread_id: str) -> bool:
        """Delete every record and branch of a thread; return ``False`` if it had none."""
        raise self._no_thread_management("delete_thread")

    async def prune(
        self,
        thread_id: str | None = None,
        *,
        keep_last: int | None = None,
        older_than: float | None = None,
    ) -> int:
        """Drop history before a checkpoint, keeping every branch loadable; return the count.

        Each branch (of ``thread_id``, or of every thread) is cut at one of its checkpoints,
        and its records before it are dropped: with ``keep_last``, the latest checkpoint
        that keeps at least the branch's last ``keep_last`` records; with ``older_than``,
        the latest checkpoint written before that timestamp. With both, the earlier cut.
        Branches and their branch records stay, so forks still load.

        Raises:
            GraphConfigError: Neither rule is given, or one is out of range.
        """
        raise self._no_thread_management("prune")

    def _no_thread_management(self, method: str) -> NotImplementedError:
        return NotImplementedError(
            f"{type(self).__name__} does not implement {method}(); implement list_threads, "
            f"delete_thread and prune (see docs/threads.md) to manage its threads."
        )


async def append_taken(
    store: StateStore, lease: Lease, append: Callable[[], Awaitable[tuple[Lease, bool]]]
) -> tuple[Lease, bool]:
    """Run ``append``, a first append as the holder of the lease just taken from ``store``,
    and return what it does; if it raises, give the lease back, unless it was lost meanwhile.

    The end of ``StateStore.acquire_and_append``, shared by the stores that override it
    with two calls of their own (PostgreSQL).
    """
    try:
        return await append()
    except ThreadBusyError:
        raise  # lost meanwhile (a ttl shorter than the call): no lease to give back
    except BaseException:
        with anyio.CancelScope(shield=True), suppress(StateStoreError):
            await store.release_lease(lease)  # else it expires after its ttl
        raise
