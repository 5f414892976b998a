"""An in-memory index over a log of records: where each branch's records are.

Both built-in stores keep one: the memory store over a list of encoded records, the file
store over byte offsets in its file. Lookups by sequence number, checkpoint and event id are
dict and list operations, so they cost the same however long the history is.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodestep._errors import StateStoreError
from nodestep.store import _checks, _codec
from nodestep.store._contract import BranchRecord, Record, missing_checkpoint
from nodestep.store._threads import ThreadInfo, ThreadStatus, prune_cut, status_after

__all__ = ["BranchIndex", "RecordIndex", "ThreadStats", "first_copy"]


def first_copy(where: tuple[str, int]) -> tuple[int, str]:
    """Order the copies of an event id a thread holds twice: the first one is the id's.

    An id names one event of its thread, unless two writers counted ids alike (two graphs
    with ``sequential_ids()`` on one thread). Every store then takes the copy with the
    lowest sequence number, and of two with one number (on two branches) the one on the
    branch whose id sorts first, by code points (a UTF-8 string's byte order). That depends
    on the records alone, not on the order they were written in, and the SQL stores find
    it with one ``ORDER BY``.

    Args:
        where: A copy's branch id and sequence number.
    """
    branch, seq = where
    return seq, branch


@dataclass(slots=True)
class BranchIndex:
    """The records of one branch: their locations by sequence, and the checkpoints."""

    first_seq: int
    locations: list[Any] = field(default_factory=list)
    checkpoints: list[int] = field(default_factory=list)
    checkpoint_ts: list[float] = field(default_factory=list)  # for prune(older_than=...)

    @property
    def last_seq(self) -> int:
        return self.first_seq + len(self.locations) - 1


@dataclass(slots=True)
class ThreadStats:
    """What ``list_threads`` tells of a thread that its records' locations do not."""

    updated: float
    status: ThreadStatus | None = None
    forked: list[float] = field(default_factory=list)  # its branch records' ts


class RecordIndex:
    """Where every branch's records are, by sequence number and by event id."""

    def __init__(self) -> None:
        self.branches: dict[tuple[str, str], BranchIndex] = {}
        # (thread, event id) -> (branch, seq): an event id is the thread's, as the SQL
        # stores index it; two threads may hold one id (graphs that each count their ids
        # from 1 with sequential_ids, on one store), and neither hides the other's event.
        # Of one id that a thread holds twice, ``ids`` has the copy ``first_copy`` picks,
        # and ``repeats`` the others (kept, as a prune may drop the one picked).
        self.ids: dict[tuple[str, str], tuple[str, int]] = {}
        self.repeats: dict[tuple[str, str], list[tuple[str, int]]] = {}
        self.forks: dict[str, list[BranchRecord]] = {}
        # (thread, branch, request key) -> seq of the run_started record that holds the key
        self.requests: dict[tuple[str, str, str], int] = {}
        self.threads: dict[str, ThreadStats] = {}

    def last_sequence(self, thread_id: str, branch_id: str) -> int:
        try:
            b = self.branches.get((thread_id, branch_id))
        except TypeError:  # an unhashable id names no branch; the caller's check says why
            return 0
        return 0 if b is None else b.first_seq + len(b.locations) - 1  # last_seq, inline

    def add_stored(self, record: Record, location: Any) -> str | None:
        """Index a record read back from a log, or say what is wrong with it there.

        A stored log was written by an append that checked its records, so a record that
        fails here was damaged or written by some other program: it is reported, never
        skipped. Nothing is indexed when a problem is returned.

        Args:
            record: An event record, or a branch record (``BranchRecord.to_json()``).
            location: Where the record is, for ``locations``.
        """
        kind = record.get("type")
        try:  # inline, not a call: a file's load indexes every record
            reserved = kind in _codec.FILE_TYPES
        except TypeError:  # a list or a dict, which no type is: the key check says so
            reserved = False
        if kind == "start":
            return self._add_start(record)
        if kind == "branch":
            problem = _checks.problem(record, _checks.BRANCH_KEYS)
            if problem:
                return f"in a branch record, {problem}"
            branch = BranchRecord.from_json(record)
            if self.has_branch(branch.thread_id, branch.id):
                return f"branch {branch.id!r} of thread {branch.thread_id!r} is created twice"
            self.add_branch(branch)
        elif reserved:
            return f"a {kind} record cannot be here"
        else:
            problem = _checks.problem(record, _checks.EVENT_KEYS)
            if problem:
                return f"in an event record, {problem}"
            key = (record["thread"], record["branch"])
            b = self.branches.get(key)  # one lookup per record: a file load does this a lot
            expected = 1 if b is None else b.last_seq + 1
            if record["seq"] != expected:
                return (
                    f"event {record['id']!r} of thread {record['thread']!r}, branch "
                    f"{record['branch']!r} has seq {record['seq']}, but the branch's next "
                    f"sequence number is {expected}"
                )
            if b is None:
                b = self.branches[key] = BranchIndex(first_seq=expected)
            self._add_to(b, key, (record,), (location,))
        return None

    def _add_start(self, record: Record) -> str | None:
        """Index a pruned file's ``start`` line: the branch's first record kept is ``seq``."""
        thread, branch, seq = record.get("thread"), record.get("branch"), record.get("seq")
        if not (isinstance(thread, str) and isinstance(branch, str) and type(seq) is int):
            return "a start record needs a thread, a branch (strings) and a seq (an integer)"
        b = self.branches.get((thread, branch))
        if seq < 1 or (b is not None and (b.locations or seq < b.first_seq)):
            return (
                f"branch {branch!r} of thread {thread!r} is said to start at seq {seq}, "
                f"where it cannot: it has records before, or starts after it"
            )
        self.branches[(thread, branch)] = BranchIndex(first_seq=seq)
        return None

    def add_event(self, record: Record, location: Any) -> None:
        """Index one event record that follows its branch's last (the caller checked it)."""
        self.add_events((record,), (location,))

    def add_events(self, records: Sequence[Record], locations: Sequence[Any]) -> None:
        """Index event records of one branch that follow its last (the caller checked
        them), at ``locations``: an append's, with one lookup of the branch and of its
        thread's stats for them all (a call a record cost W10's agent on the memory store
        14K instructions a turn)."""
        if len(locations) != len(records):
            raise ValueError(f"{len(records)} records, but {len(locations)} locations")
        if not records:
            return
        first = records[0]
        key = (first["thread"], first["branch"])
        b = self.branches.get(key)
        if b is None:
            b = self.branches[key] = BranchIndex(first_seq=first["seq"])
        self._add_to(b, key, records, locations)

    def _add_to(
        self,
        b: BranchIndex,
        key: tuple[str, str],
        records: Sequence[Record],
        locations: Sequence[Any],
    ) -> None:
        b.locations.extend(locations)
        thread, branch = key
        stats = self.threads.get(thread)
        if stats is None:
            stats = self.threads[thread] = ThreadStats(records[0]["ts"])
        main = branch == "main"
        ids = self.ids
        for record in records:
            seq = record["seq"]
            kind = record["type"]
            if kind == "checkpoint":
                b.checkpoints.append(seq)
                b.checkpoint_ts.append(record["ts"])
            if record["ts"] > stats.updated:
                stats.updated = record["ts"]
            if main:  # most records are supersteps: no call for them
                sc = kind == "superstep_completed"
                stats.status = "unfinished" if sc else status_after(stats.status, record)
            where = (branch, seq)
            had = ids.setdefault((thread, record["id"]), where)  # one lookup, as a load adds many
            if had is not where:
                self.add_repeat(thread, record["id"], where)
            request = record.get("request")  # _contract.REQUEST_KEY, of run_started records
            if request is not None and kind == "run_started":
                self.requests.setdefault((thread, branch, request), seq)

    def add_repeat(self, thread_id: str, event_id: str, where: tuple[str, int]) -> None:
        """Index another copy of an event id the thread has (``where`` is its branch and seq)."""
        key = (thread_id, event_id)
        had = self.ids.get(key)
        if had is None:
            self.ids[key] = where
            return
        if had == where:  # the same record indexed again: no copy
            return
        first, other = sorted((had, where), key=first_copy)
        self.ids[key] = first
        self.repeats.setdefault(key, []).append(other)

    def add_branch(self, branch: BranchRecord) -> None:
        self.forks.setdefault(branch.thread_id, []).append(branch)
        stats = self.threads.get(branch.thread_id)
        if stats is None:  # only a damaged file forks a thread before its first record
            stats = self.threads[branch.thread_id] = ThreadStats(branch.created_at)
        stats.updated = max(stats.updated, branch.created_at)
        stats.forked.append(branch.created_at)
        self.branches[(branch.thread_id, branch.id)] = BranchIndex(
            first_seq=branch.from_sequence + 1
        )

    def check_absent(self, thread_id: str, branch_id: str) -> None:
        """Refuse to store a pruned branch (``store_pruned``) over one this index has.

        Raises:
            StateStoreError: The branch has records, or is a fork of the thread.
        """
        if self.last_sequence(thread_id, branch_id) or self.has_branch(thread_id, branch_id):
            raise StateStoreError(
                f"Cannot store the pruned branch {branch_id!r} of thread {thread_id!r}: the "
                f"store has that branch already. Nothing was stored; delete the thread first."
            )

    def has_thread(self, thread_id: str) -> bool:
        return type(thread_id) is str and thread_id in self.threads

    def has_branch(self, thread_id: str, branch_id: str) -> bool:
        return (thread_id, branch_id) in self.branches

    def locations(self, thread_id: str, branch_id: str, start: int, stop: int | None) -> list[Any]:
        b = self.branches.get((thread_id, branch_id))
        if b is None:
            return []
        lo = max(start, b.first_seq) - b.first_seq
        hi = len(b.locations) if stop is None else max(0, min(stop, b.last_seq) - b.first_seq + 1)
        return b.locations[lo:hi]

    def tail(self, thread_id: str, branch_id: str, at: int | None) -> list[Any]:
        """Return the locations from the last checkpoint at or before ``at`` through ``at``.

        ``at`` ``None`` means the branch's last record; ``[]`` when the branch is empty.

        Raises:
            StateStoreError: the branch has records but no checkpoint before ``at``.
        """
        if at is None:
            at = self.last_sequence(thread_id, branch_id)
            if at == 0:
                return []
        start = self.last_checkpoint(thread_id, branch_id, at)
        if start is None:
            raise missing_checkpoint(thread_id, branch_id, at)
        return self.locations(thread_id, branch_id, start, at)

    def last_checkpoint(
        self, thread_id: str, branch_id: str, at_or_before: int | None
    ) -> int | None:
        b = self.branches.get((thread_id, branch_id))
        if b is None or not b.checkpoints:
            return None
        if at_or_before is None:
            return b.checkpoints[-1]
        i = bisect_right(b.checkpoints, at_or_before)
        return b.checkpoints[i - 1] if i else None

    def locate(self, thread_id: str, event_id: str) -> tuple[str, int] | None:
        return self.ids.get((thread_id, event_id))

    def find_request(self, thread_id: str, branch_id: str, key: str) -> int | None:
        return self.requests.get((thread_id, branch_id, key))

    def list_branches(self, thread_id: str) -> list[BranchRecord]:
        return list(self.forks.get(thread_id, ()))

    # -- thread management ----------------------------------------------------------------

    def thread_infos(self) -> list[ThreadInfo]:
        """Return an info of every thread, in no order."""
        created: dict[str, float] = {}
        for (thread, _), b in self.branches.items():
            if b.checkpoint_ts:  # every branch starts with a checkpoint, pruned or not
                first = b.checkpoint_ts[0]
                created[thread] = min(first, created.get(thread, first))
        return [
            ThreadInfo(
                thread_id=thread,
                status=stats.status or "completed",
                created_at=min([created.get(thread, stats.updated), *stats.forked]),
                updated_at=stats.updated,
                last_sequence=self.last_sequence(thread, "main"),
            )
            for thread, stats in self.threads.items()
        ]

    def drop_thread(self, thread_id: str) -> bool:
        """Forget every branch and record of a thread; return whether it had any."""
        if not self.has_thread(thread_id):  # an id that is no string names no thread
            return False
        if self.threads.pop(thread_id, None) is None:
            return False
        self.forks.pop(thread_id, None)
        self.branches = {k: b for k, b in self.branches.items() if k[0] != thread_id}
        self._keep_ids(lambda thread, branch, seq: thread != thread_id)
        self.requests = {k: seq for k, seq in self.requests.items() if k[0] != thread_id}
        return True

    def _keep_ids(self, kept: Callable[[str, str, int], bool]) -> None:
        """Forget the copies of event ids that ``kept(thread, branch, seq)`` does not keep."""
        ids = {k: where for k, where in self.ids.items() if kept(k[0], *where)}
        repeats = self.repeats
        self.ids, self.repeats = ids, {}
        for (thread, event_id), others in repeats.items():
            for where in others:
                if kept(thread, *where):
                    self.add_repeat(thread, event_id, where)

    def prune_cuts(
        self, thread_id: str | None, keep_last: int | None, older_than: float | None
    ) -> dict[tuple[str, str], int]:
        """Return the branches ``prune`` cuts, each with the checkpoint its kept part starts at."""
        cuts = {}
        for key, b in self.branches.items():
            if thread_id is not None and key[0] != thread_id:
                continue
            pairs = list(zip(b.checkpoints, b.checkpoint_ts, strict=True))
            cut = prune_cut(b.last_seq, pairs, keep_last, older_than)
            if cut is not None:
                cuts[key] = cut
        return cuts

    def drop_before(self, cuts: dict[tuple[str, str], int]) -> int:
        """Forget each branch's records before its cut; return how many."""
        dropped = 0
        for key, cut in cuts.items():
            b = self.branches[key]
            k = cut - b.first_seq
            dropped += k
            del b.locations[:k]
            b.first_seq = cut
            i = b.checkpoints.index(cut)
            del b.checkpoints[:i], b.checkpoint_ts[:i]
        if dropped:

            def kept(thread: str, branch: str, seq: int) -> bool:
                cut = cuts.get((thread, branch))
                return cut is None or seq >= cut

            self._keep_ids(kept)
            self.requests = {k: s for k, s in self.requests.items() if kept(k[0], k[1], s)}
        return dropped
