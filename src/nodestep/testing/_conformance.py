"""The conformance suite every ``StateStore`` must pass, for nodestep's stores and yours.

Subclass ``StateStoreConformance`` in a test module and give it a ``store`` fixture that
yields a new, empty store; every test of the suite then runs against it::

    import pytest

    from nodestep.testing import StateStoreConformance


    class TestMyStore(StateStoreConformance):
        @pytest.fixture
        async def store(self, tmp_path):
            store = MyStore(tmp_path / "db")
            yield store
            await store.aclose()

The tests are ``async def`` tests marked ``pytest.mark.anyio``: anyio's pytest plugin, which
comes with anyio, runs them (and an async ``store`` fixture) on the event loop its
``anyio_backend`` fixture names. Define that fixture to choose, e.g. parametrized over
``["asyncio", "trio"]`` to run the suite on both. A plain ``def store`` fixture works too.

``InMemoryStateStore`` is the verified fake: whatever it does here is the behaviour the
other stores must match. The tests of invalid records expect them refused with the
``StateStoreError`` messages of nodestep's own record check, as the built-in stores do.
The record helpers (``event``, ``checkpoint``, ``events``, ``fork``, ``seqs``) build
records as the engine would, for a store's own tests.

This module needs pytest: ``pip install 'nodestep[test]'``.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import anyio
import anyio.to_thread

try:
    import pytest
except ImportError as e:  # pragma: no cover - pytest is installed wherever the tests run
    raise ImportError(
        "nodestep.testing._conformance is a pytest test suite, and pytest is not installed: "
        "pip install 'nodestep[test]'",
        name="pytest",
    ) from e

from nodestep._errors import ThreadConflictError
from nodestep.store import BranchRecord, StateStore
from nodestep.testing._leases import LeaseConformance
from nodestep.testing._records import checkpoint, event, events, fork, seqs
from nodestep.testing._refusals import RecordRefusals
from nodestep.testing._threads import ThreadConformance

__all__ = ["StateStoreConformance", "checkpoint", "event", "events", "fork", "seqs"]


class StateStoreConformance(RecordRefusals, LeaseConformance, ThreadConformance):
    """The behaviour every ``StateStore`` shares; subclasses provide a ``store`` fixture.

    Each test gets a new, empty store from the subclass's ``store`` fixture (plain or
    async, returning or yielding the store) and awaits its methods on the event loop of
    ``anyio_backend``. One test also drives the store from four OS threads at once, each
    running an event loop of its own of that kind: a store must guard its data with a lock
    that works across threads. The lease and request key tests (``LeaseConformance``) hold
    a store to one writer per branch: a store that inherits ``StateStore``'s lease methods
    passes them in one process. The thread management tests (``ThreadConformance``) hold
    ``list_threads``, ``delete_thread`` and ``prune`` to the rules of
    ``nodestep.store._threads``.
    """

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    # Every test is async: anyio's pytest plugin runs it, on the loop of ``anyio_backend``.
    pytestmark = pytest.mark.anyio

    @pytest.fixture
    def store(self) -> StateStore:
        """The store under test: a subclass gives a new, empty one to each test."""
        raise NotImplementedError(
            f"{type(self).__name__} must define a `store` fixture that gives a new, empty "
            f"store; see the docstring of nodestep.testing._conformance"
        )

    # -- append and read -----------------------------------------------------------------

    async def test_append_then_read_gives_equal_records(self, store: StateStore) -> None:
        records = [event(1, text="first"), checkpoint(2, items=[1, 2.5, None, True, {"a": []}])]
        await store.append("t1", "main", records, after=0)
        assert await store.read("t1", "main") == records

    async def test_read_returns_new_objects_each_time(self, store: StateStore) -> None:
        records = [event(1, nested={"list": [1, 2]})]
        await store.append("t1", "main", records, after=0)
        first = await store.read("t1", "main")
        assert first[0] is not records[0]
        first[0]["values"]["nested"]["list"].append(3)
        records[0]["values"]["nested"]["list"].append(4)
        assert (await store.read("t1", "main"))[0]["values"] == {"nested": {"list": [1, 2]}}

    async def test_read_range_selects_by_sequence_number(self, store: StateStore) -> None:
        await store.append("t1", "main", events(1, 10), after=0)
        assert seqs(await store.read("t1", "main", start=4)) == list(range(4, 11))
        assert seqs(await store.read("t1", "main", stop=3)) == [1, 2, 3]
        assert seqs(await store.read("t1", "main", start=3, stop=5)) == [3, 4, 5]
        assert seqs(await store.read("t1", "main", start=7, stop=7)) == [7]
        assert seqs(await store.read("t1", "main", start=8, stop=99)) == [8, 9, 10]
        assert await store.read("t1", "main", start=11) == []
        assert await store.read("t1", "main", start=5, stop=4) == []
        assert seqs(await store.read("t1", "main", start=0, stop=2)) == [1, 2]

    async def test_read_of_unknown_thread_or_branch_is_empty(self, store: StateStore) -> None:
        await store.append("t1", "main", events(1, 2), after=0)
        assert await store.read("nope", "main") == []
        assert await store.read("t1", "nope") == []

    async def test_last_sequence_is_zero_for_unknown_and_counts_appends(
        self, store: StateStore
    ) -> None:
        assert await store.last_sequence("t1", "main") == 0
        await store.append("t1", "main", events(1, 3), after=0)
        assert await store.last_sequence("t1", "main") == 3
        await store.append("t1", "main", events(4, 4), after=3)
        assert await store.last_sequence("t1", "main") == 4
        assert await store.last_sequence("t1", "other") == 0

    async def test_last_record_gives_the_last_sequence_and_that_records_id_or_none(
        self, store: StateStore
    ) -> None:
        assert await store.last_record("t1", "main") == (0, None)
        first = events(1, 3)
        await store.append("t1", "main", first, after=0)
        seq, last_id = await store.last_record("t1", "main")
        assert seq == 3 and last_id in (first[-1]["id"], None)  # None: the store cannot say
        await store.delete_thread("t1")
        again = events(1, 3)  # as long, other records
        await store.append("t1", "main", again, after=0)
        assert await store.last_record("t1", "main") in ((3, again[-1]["id"]), (3, None))

    async def test_unicode_survives_the_round_trip(self, store: StateStore) -> None:
        text = 'héllo wörld ✓ 日本語 😀 \u2028 line\nbreak "quoted" \\ tab\t nul\x00 end'
        thread = "thréad-😀"
        records = [event(1, thread, "brånch", **{text: text, "emoji": "👩‍👩‍👧"})]
        await store.append(thread, "brånch", records, after=0)
        assert await store.read(thread, "brånch") == records
        assert await store.locate(thread, records[0]["id"]) == ("brånch", 1)

    # -- optimistic concurrency ----------------------------------------------------------

    async def test_append_with_wrong_after_raises_and_stores_nothing(
        self, store: StateStore
    ) -> None:
        await store.append("t1", "main", events(1, 2), after=0)
        for after in (0, 1, 3):
            late = events(after + 1, after + 2)
            words = f"this append follows event {after}, but the store now ends at event 2"
            with pytest.raises(ThreadConflictError, match=words) as info:
                await store.append("t1", "main", late, after=after)
            assert (info.value.expected, info.value.found) == (after, 2)
            assert (info.value.thread_id, info.value.branch_id) == ("t1", "main")
            assert await store.locate("t1", late[0]["id"]) is None
        assert seqs(await store.read("t1", "main")) == [1, 2]

    async def test_append_of_several_records_is_all_or_nothing(self, store: StateStore) -> None:
        await store.append("t1", "main", events(1, 1), after=0)
        refused = [event(1), checkpoint(2), event(3)]
        with pytest.raises(ThreadConflictError, match="was changed by another writer"):
            await store.append("t1", "main", refused, after=0)
        assert seqs(await store.read("t1", "main")) == [1]
        assert await store.last_checkpoint("t1", "main") is None
        batch = [event(2), checkpoint(3), event(4)]
        await store.append("t1", "main", batch, after=1)
        assert await store.read("t1", "main", start=2) == batch

    async def test_threads_sharing_one_store_never_duplicate_a_sequence(
        self, store: StateStore, anyio_backend_name: str, anyio_backend_options: dict[str, Any]
    ) -> None:
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

        def in_thread(k: int) -> None:
            # Real threads, each with an event loop of its own, as threads of a server are.
            anyio.run(writer, k, backend=anyio_backend_name, backend_options=anyio_backend_options)

        def start_and_join() -> None:
            threads = [threading.Thread(target=in_thread, args=(k,)) for k in range(workers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

        # Waiting in a worker thread leaves this test's event loop free meanwhile.
        await anyio.to_thread.run_sync(start_and_join)
        records = await store.read("t1", "main")
        assert seqs(records) == list(range(1, per_thread * workers + 1))
        for k in range(workers):
            assert sum(r["values"].get("writer") == k for r in records) == per_thread

    async def test_generation_stays_the_same_object_while_the_history_is_the_same(
        self, store: StateStore
    ) -> None:
        # A graph serves cached states only while it is; a store that changed it on every
        # call would never be answered from the cache.
        generation = store.generation
        await store.append("t1", "main", events(1, 2), after=0)
        await store.read("t1", "main")
        await store.last_sequence("t1", "main")
        first = (await store.read("t1", "main"))[0]
        await store.create_branch(fork("t1", "alt", first), [checkpoint(2, branch="alt")])
        assert store.generation is generation

    # -- checkpoints and ids -------------------------------------------------------------

    async def test_last_checkpoint_finds_the_latest_at_or_before(self, store: StateStore) -> None:
        assert await store.last_checkpoint("t1", "main") is None
        records = [event(1), checkpoint(2), event(3), checkpoint(4), checkpoint(5), event(6)]
        await store.append("t1", "main", records, after=0)
        assert await store.last_checkpoint("t1", "main") == 5
        assert await store.last_checkpoint("t1", "main", at_or_before=6) == 5
        assert await store.last_checkpoint("t1", "main", at_or_before=4) == 4
        assert await store.last_checkpoint("t1", "main", at_or_before=3) == 2
        assert await store.last_checkpoint("t1", "main", at_or_before=1) is None
        assert await store.last_checkpoint("t1", "other") is None

    async def test_locate_finds_an_event_by_id_in_its_own_thread_only(
        self, store: StateStore
    ) -> None:
        one, two = events(1, 2)
        await store.append("t1", "main", [one, two], after=0)
        other = event(1, "t2")
        await store.append("t2", "main", [other], after=0)
        assert await store.locate("t1", two["id"]) == ("main", 2)
        assert await store.locate("t2", other["id"]) == ("main", 1)
        assert await store.locate("t1", other["id"]) is None
        assert await store.locate("t1", str(uuid.uuid4())) is None

    async def test_locate_finds_each_threads_event_when_two_threads_hold_one_id(
        self, store: StateStore
    ) -> None:
        # Ids are unique per thread: graphs that each count their ids from 1 write the
        # same ids into threads of their own, and neither thread may hide the other's.
        first = events(1, 2)
        await store.append("t1", "main", first, after=0)
        await store.append("t2", "main", [{**r, "thread": "t2"} for r in first], after=0)
        assert await store.locate("t1", first[1]["id"]) == ("main", 2)
        assert await store.locate("t2", first[1]["id"]) == ("main", 2)

    async def test_an_id_a_thread_holds_twice_names_its_copy_with_the_lowest_seq(
        self, store: StateStore
    ) -> None:
        # Two writers that count ids alike (two graphs with sequential_ids() on one thread)
        # repeat ids. Every store takes the copy with the lowest seq, and of copies with one
        # seq the one on the branch whose id sorts first by code points ("Zed" < "alt").
        main = events(1, 4)
        await store.append("t1", "main", main, after=0)
        again = [{**r, "seq": r["seq"] + 4} for r in main]
        await store.append("t1", "main", again, after=4)
        alt = [checkpoint(3, branch="alt", forked=True), event(4, branch="alt")]
        alt = [{**alt[0], "id": main[2]["id"]}, {**alt[1], "id": main[1]["id"]}]
        assert await store.create_branch(fork("t1", "alt", main[1]), alt) is True
        zed = [{**checkpoint(3, branch="Zed", forked=True), "id": main[2]["id"]}]
        assert await store.create_branch(fork("t1", "Zed", main[1]), zed) is True
        assert await store.locate("t1", main[0]["id"]) == ("main", 1)
        assert await store.locate("t1", main[1]["id"]) == ("main", 2)  # not alt's seq 4
        assert await store.locate("t1", main[2]["id"]) == ("Zed", 3)
        assert await store.locate("t1", main[3]["id"]) == ("main", 4)

    async def test_an_id_held_twice_names_the_copy_a_prune_keeps(self, store: StateStore) -> None:
        records = [checkpoint(1), event(2), checkpoint(3)]
        records += [{**r, "seq": r["seq"] + 3} for r in records[:2]]  # ids of 1, 2 at 4, 5
        await store.append("t1", "main", records, after=0)
        assert await store.locate("t1", records[1]["id"]) == ("main", 2)
        assert await store.prune("t1", keep_last=3) == 2  # from checkpoint 3 on
        assert await store.locate("t1", records[0]["id"]) == ("main", 4)
        assert await store.locate("t1", records[1]["id"]) == ("main", 5)

    # -- branches ------------------------------------------------------------------------

    async def test_create_branch_starts_after_the_fork_point(self, store: StateStore) -> None:
        main = [event(1), checkpoint(2), event(3)]
        await store.append("t1", "main", main, after=0)
        first = [checkpoint(3, branch="alt", forked=True)]
        assert await store.create_branch(fork("t1", "alt", main[1]), first) is True
        assert await store.read("t1", "alt") == first
        assert await store.last_sequence("t1", "alt") == 3
        assert await store.last_checkpoint("t1", "alt") == 3
        assert await store.locate("t1", first[0]["id"]) == ("alt", 3)
        await store.append("t1", "alt", [event(4, branch="alt")], after=3)
        assert seqs(await store.read("t1", "alt")) == [3, 4]
        assert await store.read("t1", "main") == main

    async def test_create_branch_refuses_an_existing_id_and_stores_nothing(
        self, store: StateStore
    ) -> None:
        main = events(1, 3)
        await store.append("t1", "main", main, after=0)
        branch = fork("t1", "alt", main[0])
        assert await store.create_branch(branch, [checkpoint(2, branch="alt")]) is True
        again = [checkpoint(3, branch="alt")]
        later = BranchRecord("alt", "t1", "main", main[2]["id"], 2, time.time())
        assert await store.create_branch(later, again) is False
        assert await store.create_branch(fork("t1", "main", main[0]), [checkpoint(2)]) is False
        assert await store.locate("t1", again[0]["id"]) is None
        assert await store.list_branches("t1") == [branch]
        assert seqs(await store.read("t1", "alt")) == [2]
        assert seqs(await store.read("t1", "main")) == [1, 2, 3]

    async def test_list_branches_gives_a_threads_forks_oldest_first(
        self, store: StateStore
    ) -> None:
        main = events(1, 4)
        await store.append("t1", "main", main, after=0)
        await store.append("t2", "main", events(1, 1, "t2"), after=0)
        assert await store.list_branches("t1") == []
        made = []
        for name, at in (("b", 3), ("a", 1), ("c", 2)):
            branch = fork("t1", name, main[at - 1])
            assert await store.create_branch(branch, [checkpoint(at + 1, branch=name)])
            made.append(branch)
        nested = fork("t1", "a-child", (await store.read("t1", "a"))[0])
        assert await store.create_branch(nested, [checkpoint(3, branch="a-child")])
        assert await store.list_branches("t1") == [*made, nested]
        assert await store.list_branches("t2") == []

    async def test_threads_and_branches_are_isolated(self, store: StateStore) -> None:
        a = events(1, 3, "ta")
        b = [event(1, "tb"), checkpoint(2, "tb")]
        await store.append("ta", "main", a[:1], after=0)
        await store.append("tb", "main", b, after=0)
        await store.append("ta", "main", a[1:], after=1)
        await store.create_branch(fork("ta", "x", a[0]), [checkpoint(2, "ta", "x")])
        await store.create_branch(fork("tb", "x", b[0]), [checkpoint(2, "tb", "x")])
        assert await store.read("ta", "main") == a
        assert await store.read("tb", "main") == b
        assert (
            await store.last_sequence("ta", "main"),
            await store.last_sequence("tb", "main"),
        ) == (
            3,
            2,
        )
        assert await store.last_checkpoint("ta", "main") is None
        assert await store.last_checkpoint("tb", "main") == 2
        assert [x.thread_id for x in await store.list_branches("ta")] == ["ta"]
        assert [x.thread_id for x in await store.list_branches("tb")] == ["tb"]
        assert (await store.read("ta", "x"))[0]["thread"] == "ta"
        assert (await store.read("tb", "x"))[0]["thread"] == "tb"
