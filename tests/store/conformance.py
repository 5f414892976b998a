"""The conformance suite every ``StateStore`` must pass.

Subclass ``StateStoreConformance`` in a test module and give it a ``store`` fixture that
yields a new, empty store; every test here then runs against it::

    class TestMyStore(StateStoreConformance):
        @pytest.fixture
        def store(self, tmp_path):
            store = MyStore(tmp_path / "db")
            yield store
            run(store.aclose())

The tests are plain functions driving the async API with ``asyncio.run``, so no pytest
plugin is needed. ``InMemoryStateStore`` is the verified fake: whatever it does here is the
behaviour the other stores must match.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
import uuid
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

import pytest

from nodestep.errors import StateStoreError, ThreadConflictError
from nodestep.store.base import BranchRecord, Record, StateStore

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run one store call to completion."""
    return asyncio.run(coro)


def event(
    seq: int,
    thread: str = "t1",
    branch: str = "main",
    *,
    type: str = "state_updated",
    **values: Any,
) -> Record:
    """Return a history record, as the engine would build it."""
    return {
        "id": str(uuid.uuid4()),
        "seq": seq,
        "ts": time.time(),
        "thread": thread,
        "branch": branch,
        "type": type,
        "values": values or {"n": seq},
    }


def checkpoint(seq: int, thread: str = "t1", branch: str = "main", **values: Any) -> Record:
    """Return a checkpoint record."""
    return event(seq, thread, branch, type="checkpoint", **values)


def events(first: int, last: int, thread: str = "t1", branch: str = "main") -> list[Record]:
    """Return state_updated records with seq ``first`` to ``last``."""
    return [event(seq, thread, branch) for seq in range(first, last + 1)]


def fork(thread: str, branch: str, after: Record) -> BranchRecord:
    """Return a branch of ``thread`` forked after the record ``after``."""
    return BranchRecord(
        id=branch,
        thread_id=thread,
        parent_id=after["branch"],
        from_event_id=after["id"],
        from_sequence=after["seq"],
        created_at=time.time(),
    )


def seqs(records: Sequence[Record]) -> list[int]:
    return [r["seq"] for r in records]


MISSING = object()
"""In a change to a record: remove the key."""


def changed(record: Record, change: dict[str, Any]) -> Record:
    """Return ``record`` with ``change`` applied (``MISSING`` values remove their key)."""
    out = {**record, **change}
    return {k: v for k, v in out.items() if v is not MISSING}


# Changes that make the record ``event(3)`` (third of thread t1, branch main) invalid, and
# words the store's error must hold. Both stores check records the same way, before storing.
INVALID_CHANGES: dict[str, tuple[dict[str, Any], str]] = {
    "missing-id": ({"id": MISSING}, "its 'id' must be a string, found no such key"),
    "missing-branch": ({"branch": MISSING}, "its 'branch' must be a string, found no such key"),
    "none-id": ({"id": None}, "its 'id' must be a string, found None"),
    "string-seq": ({"seq": "3"}, "its 'seq' must be an integer, found '3'"),
    "bool-seq": ({"seq": True}, "its 'seq' must be an integer, found True"),
    "string-ts": ({"ts": "now"}, "its 'ts' must be a number, found 'now'"),
    "other-thread": (
        {"thread": "t2"},
        "it belongs to thread 't2', branch 'main', not to thread 't1', branch 'main'",
    ),
    "other-branch": (
        {"branch": "alt"},
        "it belongs to thread 't1', branch 'alt', not to thread 't1', branch 'main'",
    ),
    "seq-gap": ({"seq": 5}, "its seq is 5, but it must be 3"),
    "seq-repeat": ({"seq": 2}, "its seq is 2, but it must be 3"),
    "reserved-type": ({"type": "batch"}, "its type 'batch' is reserved"),
    "int-beyond-64-bits": (
        {"values": {"n": 2**64}},
        r"it is not JSON data \(Integer exceeds 64-bit range\)",
    ),
    "negative-int-beyond-64-bits": ({"values": {"n": -(2**63) - 1}}, "64-bit range"),
    "int-key": ({"values": {1: "one"}}, r"not JSON data \(Dict key must be str\)"),
    "set": ({"values": {"tags": {"a"}}}, r"not JSON data \(Type is not JSON serializable: set\)"),
}


class StateStoreConformance:
    """The behaviour every ``StateStore`` shares; subclasses provide a ``store`` fixture."""

    @pytest.fixture
    def store(self) -> StateStore:
        raise NotImplementedError("a conformance test class must define a `store` fixture")

    # -- append and read -----------------------------------------------------------------

    def test_append_then_read_gives_equal_records(self, store: StateStore) -> None:
        records = [event(1, text="first"), checkpoint(2, items=[1, 2.5, None, True, {"a": []}])]
        run(store.append("t1", "main", records, after=0))
        assert run(store.read("t1", "main")) == records

    def test_read_returns_new_objects_each_time(self, store: StateStore) -> None:
        records = [event(1, nested={"list": [1, 2]})]
        run(store.append("t1", "main", records, after=0))
        first = run(store.read("t1", "main"))
        assert first[0] is not records[0]
        first[0]["values"]["nested"]["list"].append(3)
        records[0]["values"]["nested"]["list"].append(4)
        assert run(store.read("t1", "main"))[0]["values"] == {"nested": {"list": [1, 2]}}

    def test_read_range_selects_by_sequence_number(self, store: StateStore) -> None:
        run(store.append("t1", "main", events(1, 10), after=0))
        assert seqs(run(store.read("t1", "main", start=4))) == list(range(4, 11))
        assert seqs(run(store.read("t1", "main", stop=3))) == [1, 2, 3]
        assert seqs(run(store.read("t1", "main", start=3, stop=5))) == [3, 4, 5]
        assert seqs(run(store.read("t1", "main", start=7, stop=7))) == [7]
        assert seqs(run(store.read("t1", "main", start=8, stop=99))) == [8, 9, 10]
        assert run(store.read("t1", "main", start=11)) == []
        assert run(store.read("t1", "main", start=5, stop=4)) == []
        assert seqs(run(store.read("t1", "main", start=0, stop=2))) == [1, 2]

    def test_read_of_unknown_thread_or_branch_is_empty(self, store: StateStore) -> None:
        run(store.append("t1", "main", events(1, 2), after=0))
        assert run(store.read("nope", "main")) == []
        assert run(store.read("t1", "nope")) == []

    def test_last_sequence_is_zero_for_unknown_and_counts_appends(self, store: StateStore) -> None:
        assert run(store.last_sequence("t1", "main")) == 0
        run(store.append("t1", "main", events(1, 3), after=0))
        assert run(store.last_sequence("t1", "main")) == 3
        run(store.append("t1", "main", events(4, 4), after=3))
        assert run(store.last_sequence("t1", "main")) == 4
        assert run(store.last_sequence("t1", "other")) == 0

    def test_unicode_survives_the_round_trip(self, store: StateStore) -> None:
        text = 'héllo wörld ✓ 日本語 😀 \u2028 line\nbreak "quoted" \\ tab\t nul\x00 end'
        thread = "thréad-😀"
        records = [event(1, thread, "brånch", **{text: text, "emoji": "👩‍👩‍👧"})]
        run(store.append(thread, "brånch", records, after=0))
        assert run(store.read(thread, "brånch")) == records
        assert run(store.locate(thread, records[0]["id"])) == ("brånch", 1)

    # -- optimistic concurrency ----------------------------------------------------------

    def test_append_with_wrong_after_raises_and_stores_nothing(self, store: StateStore) -> None:
        run(store.append("t1", "main", events(1, 2), after=0))
        for after in (0, 1, 3):
            late = events(after + 1, after + 2)
            with pytest.raises(ThreadConflictError) as info:
                run(store.append("t1", "main", late, after=after))
            assert (info.value.expected, info.value.found) == (after, 2)
            assert (info.value.thread_id, info.value.branch_id) == ("t1", "main")
            assert run(store.locate("t1", late[0]["id"])) is None
        assert seqs(run(store.read("t1", "main"))) == [1, 2]

    def test_append_of_several_records_is_all_or_nothing(self, store: StateStore) -> None:
        run(store.append("t1", "main", events(1, 1), after=0))
        refused = [event(1), checkpoint(2), event(3)]
        with pytest.raises(ThreadConflictError):
            run(store.append("t1", "main", refused, after=0))
        assert seqs(run(store.read("t1", "main"))) == [1]
        assert run(store.last_checkpoint("t1", "main")) is None
        batch = [event(2), checkpoint(3), event(4)]
        run(store.append("t1", "main", batch, after=1))
        assert run(store.read("t1", "main", start=2)) == batch

    def test_threads_sharing_one_store_never_duplicate_a_sequence(self, store: StateStore) -> None:
        per_thread, workers = 40, 4
        conflicts = [0] * workers

        async def writer(k: int) -> None:
            done = 0
            while done < per_thread:
                last = await store.last_sequence("t1", "main")
                try:
                    await store.append("t1", "main", [event(last + 1, writer=k)], after=last)
                    done += 1
                except ThreadConflictError:
                    conflicts[k] += 1

        threads = [threading.Thread(target=run, args=(writer(k),)) for k in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        records = run(store.read("t1", "main"))
        assert seqs(records) == list(range(1, per_thread * workers + 1))
        for k in range(workers):
            assert sum(r["values"].get("writer") == k for r in records) == per_thread

    # -- checkpoints and ids -------------------------------------------------------------

    def test_last_checkpoint_finds_the_latest_at_or_before(self, store: StateStore) -> None:
        assert run(store.last_checkpoint("t1", "main")) is None
        records = [event(1), checkpoint(2), event(3), checkpoint(4), checkpoint(5), event(6)]
        run(store.append("t1", "main", records, after=0))
        assert run(store.last_checkpoint("t1", "main")) == 5
        assert run(store.last_checkpoint("t1", "main", at_or_before=6)) == 5
        assert run(store.last_checkpoint("t1", "main", at_or_before=4)) == 4
        assert run(store.last_checkpoint("t1", "main", at_or_before=3)) == 2
        assert run(store.last_checkpoint("t1", "main", at_or_before=1)) is None
        assert run(store.last_checkpoint("t1", "other")) is None

    def test_locate_finds_an_event_by_id_in_its_own_thread_only(self, store: StateStore) -> None:
        one, two = events(1, 2)
        run(store.append("t1", "main", [one, two], after=0))
        other = event(1, "t2")
        run(store.append("t2", "main", [other], after=0))
        assert run(store.locate("t1", two["id"])) == ("main", 2)
        assert run(store.locate("t2", other["id"])) == ("main", 1)
        assert run(store.locate("t1", other["id"])) is None
        assert run(store.locate("t1", str(uuid.uuid4()))) is None

    # -- branches ------------------------------------------------------------------------

    def test_create_branch_starts_after_the_fork_point(self, store: StateStore) -> None:
        main = [event(1), checkpoint(2), event(3)]
        run(store.append("t1", "main", main, after=0))
        first = [checkpoint(3, branch="alt", forked=True)]
        assert run(store.create_branch(fork("t1", "alt", main[1]), first)) is True
        assert run(store.read("t1", "alt")) == first
        assert run(store.last_sequence("t1", "alt")) == 3
        assert run(store.last_checkpoint("t1", "alt")) == 3
        assert run(store.locate("t1", first[0]["id"])) == ("alt", 3)
        run(store.append("t1", "alt", [event(4, branch="alt")], after=3))
        assert seqs(run(store.read("t1", "alt"))) == [3, 4]
        assert run(store.read("t1", "main")) == main

    def test_create_branch_refuses_an_existing_id_and_stores_nothing(
        self, store: StateStore
    ) -> None:
        main = events(1, 3)
        run(store.append("t1", "main", main, after=0))
        branch = fork("t1", "alt", main[0])
        assert run(store.create_branch(branch, [checkpoint(2, branch="alt")])) is True
        again = [checkpoint(3, branch="alt")]
        later = BranchRecord("alt", "t1", "main", main[2]["id"], 2, time.time())
        assert run(store.create_branch(later, again)) is False
        assert run(store.create_branch(fork("t1", "main", main[0]), [checkpoint(2)])) is False
        assert run(store.locate("t1", again[0]["id"])) is None
        assert run(store.list_branches("t1")) == [branch]
        assert seqs(run(store.read("t1", "alt"))) == [2]
        assert seqs(run(store.read("t1", "main"))) == [1, 2, 3]

    def test_list_branches_gives_a_threads_forks_oldest_first(self, store: StateStore) -> None:
        main = events(1, 4)
        run(store.append("t1", "main", main, after=0))
        run(store.append("t2", "main", events(1, 1, "t2"), after=0))
        assert run(store.list_branches("t1")) == []
        made = []
        for name, at in (("b", 3), ("a", 1), ("c", 2)):
            branch = fork("t1", name, main[at - 1])
            assert run(store.create_branch(branch, [checkpoint(at + 1, branch=name)]))
            made.append(branch)
        nested = fork("t1", "a-child", run(store.read("t1", "a"))[0])
        assert run(store.create_branch(nested, [checkpoint(3, branch="a-child")]))
        assert run(store.list_branches("t1")) == [*made, nested]
        assert run(store.list_branches("t2")) == []

    def test_threads_and_branches_are_isolated(self, store: StateStore) -> None:
        a = events(1, 3, "ta")
        b = [event(1, "tb"), checkpoint(2, "tb")]
        run(store.append("ta", "main", a[:1], after=0))
        run(store.append("tb", "main", b, after=0))
        run(store.append("ta", "main", a[1:], after=1))
        run(store.create_branch(fork("ta", "x", a[0]), [checkpoint(2, "ta", "x")]))
        run(store.create_branch(fork("tb", "x", b[0]), [checkpoint(2, "tb", "x")]))
        assert run(store.read("ta", "main")) == a
        assert run(store.read("tb", "main")) == b
        assert (run(store.last_sequence("ta", "main")), run(store.last_sequence("tb", "main"))) == (
            3,
            2,
        )
        assert run(store.last_checkpoint("ta", "main")) is None
        assert run(store.last_checkpoint("tb", "main")) == 2
        assert [x.thread_id for x in run(store.list_branches("ta"))] == ["ta"]
        assert [x.thread_id for x in run(store.list_branches("tb"))] == ["tb"]
        assert run(store.read("ta", "x"))[0]["thread"] == "ta"
        assert run(store.read("tb", "x"))[0]["thread"] == "tb"

    # -- refused records -----------------------------------------------------------------

    @pytest.mark.parametrize(
        ("change", "words"), list(INVALID_CHANGES.values()), ids=list(INVALID_CHANGES)
    )
    def test_invalid_record_is_refused_and_nothing_is_stored(
        self, store: StateStore, change: dict[str, Any], words: str
    ) -> None:
        first = events(1, 1)
        run(store.append("t1", "main", first, after=0))
        good, bad = event(2), changed(event(3), change)
        with pytest.raises(StateStoreError) as info:
            run(store.append("t1", "main", [good, bad], after=1))
        assert not isinstance(info.value, ThreadConflictError)
        message = str(info.value)
        assert re.search(words, message), message
        assert "thread 't1', branch 'main'" in message and "Nothing was stored" in message
        assert run(store.last_sequence("t1", "main")) == 1
        assert run(store.locate("t1", good["id"])) is None
        assert run(store.read("t1", "main")) == first
        retry = [good, event(3)]
        run(store.append("t1", "main", retry, after=1))
        assert run(store.read("t1", "main")) == first + retry

    def test_refusal_names_the_record_and_its_type(self, store: StateStore) -> None:
        records = [event(1), checkpoint(2, n=2**70)]
        with pytest.raises(StateStoreError) as info:
            run(store.append("t1", "main", records, after=0))
        message = str(info.value)
        assert "Cannot store record 1 (type 'checkpoint') of thread 't1', branch 'main'" in message
        assert "Integer exceeds 64-bit range" in message
        assert "integers within 64 bits" in message  # the fix: what records may hold
        assert run(store.last_sequence("t1", "main")) == 0

    def test_record_that_is_not_a_dict_is_refused(self, store: StateStore) -> None:
        bad: Any = [event(1), ["not", "a", "record"]]
        with pytest.raises(StateStoreError, match=r"record 1 of .*it is a list, not a dict"):
            run(store.append("t1", "main", bad, after=0))
        assert run(store.read("t1", "main")) == []

    def test_integers_at_the_64_bit_limits_are_stored(self, store: StateStore) -> None:
        records = [event(1, low=-(2**63), high=2**64 - 1)]
        run(store.append("t1", "main", records, after=0))
        assert run(store.read("t1", "main")) == records

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
    def test_create_branch_with_an_invalid_first_record_stores_nothing(
        self, store: StateStore, change: dict[str, Any], words: str
    ) -> None:
        main = events(1, 3)
        run(store.append("t1", "main", main, after=0))
        branch = fork("t1", "alt", main[1])
        bad = changed(checkpoint(3, branch="alt"), change)
        with pytest.raises(StateStoreError, match=words):
            run(store.create_branch(branch, [bad]))
        assert run(store.list_branches("t1")) == []
        assert run(store.read("t1", "alt")) == []
        assert run(store.locate("t1", bad["id"])) is None
        assert run(store.create_branch(branch, [checkpoint(3, branch="alt")])) is True
        assert run(store.list_branches("t1")) == [branch]
