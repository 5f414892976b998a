"""An in-memory index over a log of records: where each branch's records are.

Both built-in stores keep one: the memory store over a list of encoded records, the file
store over byte offsets in its file. Lookups by sequence number, checkpoint and event id are
dict and list operations, so they cost the same however long the history is.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

from nodestep.store.base import BranchRecord, Record

__all__ = ["BranchIndex", "RecordIndex"]


@dataclass(slots=True)
class BranchIndex:
    """The records of one branch: their locations by sequence, and the checkpoints."""

    first_seq: int
    locations: list[Any] = field(default_factory=list)
    checkpoints: list[int] = field(default_factory=list)

    @property
    def last_seq(self) -> int:
        return self.first_seq + len(self.locations) - 1


class RecordIndex:
    """Where every branch's records are, by sequence number and by event id."""

    def __init__(self) -> None:
        self.branches: dict[tuple[str, str], BranchIndex] = {}
        self.ids: dict[str, tuple[str, str, int]] = {}
        self.forks: dict[str, list[BranchRecord]] = {}

    def last_sequence(self, thread_id: str, branch_id: str) -> int:
        b = self.branches.get((thread_id, branch_id))
        return 0 if b is None else b.last_seq

    def expected_seq(self, record: Record) -> int:
        """Return the sequence number the next record of ``record``'s branch must have."""
        b = self.branches.get((record["thread"], record["branch"]))
        return 1 if b is None else b.last_seq + 1

    def add_event(self, record: Record, location: Any) -> None:
        """Index one event record; the caller has checked its ``seq`` with ``expected_seq``."""
        key = (record["thread"], record["branch"])
        b = self.branches.get(key)
        seq = record["seq"]
        if b is None:
            b = self.branches[key] = BranchIndex(first_seq=seq)
        b.locations.append(location)
        if record["type"] == "checkpoint":
            b.checkpoints.append(seq)
        self.ids[record["id"]] = (record["thread"], record["branch"], seq)

    def add_branch(self, branch: BranchRecord) -> None:
        self.forks.setdefault(branch.thread_id, []).append(branch)
        self.branches[(branch.thread_id, branch.id)] = BranchIndex(
            first_seq=branch.from_sequence + 1
        )

    def has_branch(self, thread_id: str, branch_id: str) -> bool:
        return (thread_id, branch_id) in self.branches

    def locations(self, thread_id: str, branch_id: str, start: int, stop: int | None) -> list[Any]:
        b = self.branches.get((thread_id, branch_id))
        if b is None:
            return []
        lo = max(start, b.first_seq) - b.first_seq
        hi = len(b.locations) if stop is None else max(0, min(stop, b.last_seq) - b.first_seq + 1)
        return b.locations[lo:hi]

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
        hit = self.ids.get(event_id)
        if hit is None or hit[0] != thread_id:
            return None
        return hit[1], hit[2]

    def list_branches(self, thread_id: str) -> list[BranchRecord]:
        return list(self.forks.get(thread_id, ()))
