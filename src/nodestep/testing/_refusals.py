"""The conformance tests of refused records: a store keeps nothing of a record it refuses.

Part of ``nodestep.testing._conformance`` (``StateStoreConformance`` inherits these tests),
kept apart so each module stays one concern. A refused record must leave the store as it
was: a record any reader would refuse later (a ``ts`` written as ``null``, a branch record
without its fork point) would make the file store's whole file unreadable, for every thread.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

import pytest

from nodestep._errors import StateStoreError, ThreadConflictError
from nodestep.store import StateStore
from nodestep.testing._records import (
    INVALID_CHANGES,
    changed,
    checkpoint,
    event,
    events,
    fork,
)

__all__ = ["RecordRefusals"]

# Changes to a valid BranchRecord of branch "alt" that every store must refuse, and words
# of the error.
INVALID_BRANCHES: dict[str, tuple[dict[str, Any], str]] = {
    "no-fork-event": (
        {"from_event_id": None},
        "its 'from_event' must be a string, found None",
    ),
    "no-parent": ({"parent_id": None}, "its 'parent' must be a string, found None"),
    "no-thread": ({"thread_id": 7}, "its 'thread' must be a string, found 7"),
    "string-from-sequence": ({"from_sequence": "2"}, "its 'from_seq' must be an integer"),
    "zero-from-sequence": ({"from_sequence": 0}, "its from_sequence is 0"),
    "nan-created-at": ({"created_at": math.nan}, "its 'ts' must be a finite number, found nan"),
    "infinite-created-at": (
        {"created_at": math.inf},
        "its 'ts' must be a finite number, found inf",
    ),
}


class RecordRefusals:
    """The tests of refused records; ``StateStoreConformance`` inherits them."""

    @pytest.mark.parametrize(
        ("change", "words"), list(INVALID_CHANGES.values()), ids=list(INVALID_CHANGES)
    )
    async def test_invalid_record_is_refused_and_nothing_is_stored(
        self, store: StateStore, change: dict[str, Any], words: str
    ) -> None:
        first = events(1, 1)
        await store.append("t1", "main", first, after=0)
        good, bad = event(2), changed(event(3), change)
        with pytest.raises(StateStoreError, match=words) as info:
            await store.append("t1", "main", [good, bad], after=1)
        assert not isinstance(info.value, ThreadConflictError)
        message = str(info.value)
        assert re.search(words, message), message
        assert "thread 't1', branch 'main'" in message and "Nothing was stored" in message
        assert await store.last_sequence("t1", "main") == 1
        assert await store.locate("t1", good["id"]) is None
        assert await store.read("t1", "main") == first
        retry = [good, event(3)]
        await store.append("t1", "main", retry, after=1)
        assert await store.read("t1", "main") == first + retry

    async def test_refusal_names_the_record_and_its_type(self, store: StateStore) -> None:
        records = [event(1), checkpoint(2, n=2**70)]
        with pytest.raises(
            StateStoreError, match=r"Cannot store record 1 \(type 'checkpoint'\)"
        ) as info:
            await store.append("t1", "main", records, after=0)
        message = str(info.value)
        assert "Cannot store record 1 (type 'checkpoint') of thread 't1', branch 'main'" in message
        assert "Integer exceeds 64-bit range" in message
        assert "integers within 64 bits" in message  # the fix: what records may hold
        assert await store.last_sequence("t1", "main") == 0

    async def test_record_that_is_not_a_dict_is_refused(self, store: StateStore) -> None:
        bad: Any = [event(1), ["not", "a", "record"]]
        with pytest.raises(StateStoreError, match=r"record 1 of .*it is a list, not a dict"):
            await store.append("t1", "main", bad, after=0)
        assert await store.read("t1", "main") == []

    async def test_integers_at_the_64_bit_limits_are_stored(self, store: StateStore) -> None:
        records = [event(1, low=-(2**63), high=2**64 - 1)]
        await store.append("t1", "main", records, after=0)
        assert await store.read("t1", "main") == records

    @pytest.mark.parametrize(
        ("change", "words"),
        [
            (
                {"branch": "main"},
                "belongs to thread 't1', branch 'main', not to thread 't1', branch 'alt'",
            ),
            ({"seq": 2}, "its seq is 2, but it must be 3"),
            ({"values": {"n": 2**64}}, "64-bit range"),
        ],
        ids=["wrong-branch", "wrong-seq", "int-beyond-64-bits"],
    )
    async def test_create_branch_with_an_invalid_first_record_stores_nothing(
        self, store: StateStore, change: dict[str, Any], words: str
    ) -> None:
        main = events(1, 3)
        await store.append("t1", "main", main, after=0)
        branch = fork("t1", "alt", main[1])
        bad = changed(checkpoint(3, branch="alt"), change)
        with pytest.raises(StateStoreError, match=words):
            await store.create_branch(branch, [bad])
        assert await store.list_branches("t1") == []
        assert await store.read("t1", "alt") == []
        assert await store.locate("t1", bad["id"]) is None
        assert await store.create_branch(branch, [checkpoint(3, branch="alt")]) is True
        assert await store.list_branches("t1") == [branch]

    @pytest.mark.parametrize("ts", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
    async def test_event_whose_ts_is_not_finite_is_refused(
        self, store: StateStore, ts: float
    ) -> None:
        # JSON has no nan or infinity: written as null, the ts would fail every reader.
        await store.append("t1", "main", events(1, 1), after=0)
        with pytest.raises(StateStoreError, match="its 'ts' must be a finite number") as info:
            await store.append("t1", "main", [event(2), changed(event(3), {"ts": ts})], after=1)
        assert "record 1 (type 'state_updated') of thread 't1', branch 'main'" in str(info.value)
        assert await store.last_sequence("t1", "main") == 1
        await store.append("t1", "main", events(2, 3), after=1)
        assert await store.last_sequence("t1", "main") == 3

    @pytest.mark.parametrize(
        ("change", "words"), list(INVALID_BRANCHES.values()), ids=list(INVALID_BRANCHES)
    )
    async def test_create_branch_with_an_invalid_branch_record_stores_nothing(
        self, store: StateStore, change: dict[str, Any], words: str
    ) -> None:
        main = events(1, 3)
        await store.append("t1", "main", main, after=0)
        good = fork("t1", "alt", main[1])
        bad = dataclasses.replace(good, **change)
        with pytest.raises(StateStoreError, match=re.escape(words)) as info:
            await store.create_branch(bad, [checkpoint(3, branch="alt")])
        assert "Cannot create branch 'alt'" in str(info.value)
        assert "Nothing was stored" in str(info.value)
        assert await store.list_branches("t1") == []
        assert await store.read("t1", "alt") == []
        assert await store.create_branch(good, [checkpoint(3, branch="alt")]) is True
        assert await store.list_branches("t1") == [good]

    @pytest.mark.parametrize("first", ["none", "event"])
    async def test_create_branch_refuses_first_records_that_do_not_start_with_a_checkpoint(
        self, store: StateStore, first: str
    ) -> None:
        # A branch is loaded from its last checkpoint: one without any could never load.
        main = events(1, 3)
        await store.append("t1", "main", main, after=0)
        branch = fork("t1", "alt", main[1])
        records = [] if first == "none" else [event(3, branch="alt")]
        with pytest.raises(StateStoreError, match="its first record must be a checkpoint"):
            await store.create_branch(branch, records)
        assert await store.list_branches("t1") == []
        assert await store.last_sequence("t1", "alt") == 0
