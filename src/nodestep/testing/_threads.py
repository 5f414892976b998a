"""The conformance tests of thread management: ``list_threads``, ``delete_thread``, ``prune``.

Part of ``nodestep.testing._conformance`` (``StateStoreConformance`` inherits them). The
rules they check are those of ``nodestep.store._threads``; records get explicit timestamps,
so that order and age do not depend on the clock.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from nodestep._errors import GraphConfigError, StateStoreError
from nodestep.store import REQUEST_KEY, BranchRecord, Record, StateStore
from nodestep.testing._records import event, seqs

__all__ = ["ThreadConformance"]


def _at(record: Record, ts: float, **extra: Any) -> Record:
    return {**record, "ts": ts, **extra}


def _history(thread: str, last: int, ts: float, every: int = 4) -> list[Record]:
    """Records 1..last of a main branch: a checkpoint every ``every`` records, one second apart."""
    return [
        _at(
            event(seq, thread, type="checkpoint" if seq % every == 1 else "state_updated"), ts + seq
        )
        for seq in range(1, last + 1)
    ]


async def _write(
    store: StateStore, thread: str, last: int, ts: float, every: int = 4
) -> list[Record]:
    records = _history(thread, last, ts, every)
    await store.append(thread, "main", records, after=0)
    return records


async def _fork(store: StateStore, thread: str, name: str, after: Record, ts: float) -> Record:
    branch = BranchRecord(name, thread, "main", after["id"], after["seq"], ts)
    first = _at(event(after["seq"] + 1, thread, name, type="checkpoint"), ts)
    assert await store.create_branch(branch, [first])
    return first


class ThreadConformance:
    """Listing, deleting and pruning threads: the same answers from every store."""

    async def test_list_threads_of_an_empty_store_is_one_empty_last_page(
        self, store: StateStore
    ) -> None:
        page = await store.list_threads()
        assert (page.threads, page.next_cursor) == ([], None)

    async def test_list_threads_gives_each_thread_once_most_recent_activity_first(
        self, store: StateStore
    ) -> None:
        old = await _write(store, "old", 3, 1000.0)
        await _write(store, "new", 2, 2000.0)
        await _fork(store, "old", "b", old[0], 3000.0)  # a fork is activity of its thread
        page = await store.list_threads()
        assert [t.thread_id for t in page.threads] == ["old", "new"]
        info = page.threads[0]
        assert (info.created_at, info.updated_at, info.last_sequence) == (1001.0, 3000.0, 3)
        assert (page.threads[1].created_at, page.threads[1].updated_at) == (2001.0, 2002.0)

    @pytest.mark.parametrize(
        ("last_type", "extra", "expected"),
        [
            ("run_completed", {}, "completed"),
            ("run_paused", {}, "paused"),
            ("run_started", {}, "unfinished"),
            ("run_failed", {}, "unfinished"),
            ("checkpoint", {"status": "paused"}, "paused"),
            ("checkpoint", {"status": "idle"}, "completed"),
            ("checkpoint", {"status": "failed"}, "unfinished"),
        ],
    )
    async def test_status_comes_from_the_main_branchs_records(
        self, store: StateStore, last_type: str, extra: dict[str, Any], expected: str
    ) -> None:
        first = _at(event(1, "t", type="checkpoint"), 1.0, status="idle")
        last = _at(event(2, "t", type=last_type), 2.0, **extra)
        await store.append("t", "main", [first, last], after=0)
        # An edit changes values, not where the thread stands; a fork's records neither.
        await store.append("t", "main", [_at(event(3, "t"), 3.0)], after=2)
        await _fork(store, "t", "b", first, 4.0)
        await store.append("t", "b", [_at(event(3, "t", "b", type="run_completed"), 5.0)], after=2)
        [info] = (await store.list_threads()).threads
        assert info.status == expected

    async def test_list_threads_filters_by_status_and_last_activity(
        self, store: StateStore
    ) -> None:
        for i, kind in enumerate(["run_completed", "run_paused", "run_started"]):
            start = _at(event(1, f"t{i}", type="checkpoint"), 10.0 * i)
            await store.append(
                f"t{i}", "main", [start, _at(event(2, f"t{i}", type=kind), 10.0 * i + 1)], after=0
            )

        async def ids(**filters: Any) -> list[str]:
            return [t.thread_id for t in (await store.list_threads(**filters)).threads]

        assert await ids(status="paused") == ["t1"]
        assert await ids(status=["completed", "unfinished"]) == ["t2", "t0"]
        assert await ids(active_after=11.0) == ["t2", "t1"]
        assert await ids(active_before=11.0) == ["t0"]
        assert await ids(active_after=1.0, active_before=21.0, status="completed") == ["t0"]
        assert await ids(active_after=1.5, status="completed") == []

    async def test_paging_walks_every_thread_once_in_order(self, store: StateStore) -> None:
        # Three threads share one last activity: the thread id orders them.
        for name, ts in [("a", 50.0), ("b", 70.0), ("c", 50.0), ("d", 60.0), ("e", 50.0)]:
            await store.append(name, "main", [_at(event(1, name, type="checkpoint"), ts)], after=0)
        seen, cursor, pages = [], None, 0
        while True:
            page = await store.list_threads(limit=2, cursor=cursor)
            seen += [t.thread_id for t in page.threads]
            pages += 1
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert seen == ["b", "d", "a", "c", "e"]
        assert pages == 3
        exact = await store.list_threads(limit=5)
        assert exact.next_cursor is None  # no empty page after a full last one

    async def test_threads_of_one_activity_are_in_code_point_order_on_every_page(
        self, store: StateStore
    ) -> None:
        # Code points, as Python sorts strings: not a language's order ("a" before "B"),
        # which a database's collation (en_US.utf8, ICU) would give.
        names = ["é", "a", "B", "f", "b-2", "b1"]
        for name in names:
            await store.append(name, "main", [_at(event(1, name, type="checkpoint"), 5.0)], after=0)
        page = await store.list_threads()
        assert [t.thread_id for t in page.threads] == sorted(names)
        seen, cursor = [], None
        while True:
            page = await store.list_threads(limit=1, cursor=cursor)
            seen += [t.thread_id for t in page.threads]
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert seen == ["B", "a", "b-2", "b1", "f", "é"]

    @pytest.mark.parametrize(
        ("arguments", "named"),
        [
            ({"limit": 0}, "limit=0"),
            ({"status": "done"}, "'done'"),
            ({"cursor": "not a cursor"}, "'not a cursor'"),
            ({"active_after": math.nan}, "active_after=nan"),
        ],
    )
    async def test_list_threads_refuses_bad_arguments_naming_them(
        self, store: StateStore, arguments: dict[str, Any], named: str
    ) -> None:
        with pytest.raises(GraphConfigError, match=named):
            await store.list_threads(**arguments)

    async def test_delete_thread_removes_it_with_its_branches_and_keeps_the_others(
        self, store: StateStore
    ) -> None:
        gone = await _write(store, "gone", 3, 100.0)
        gone[1][REQUEST_KEY] = "key"
        kept = await _write(store, "kept", 3, 200.0)
        await _fork(store, "gone", "b", gone[0], 300.0)
        assert await store.delete_thread("gone") is True
        assert await store.read("gone", "main") == []
        assert await store.read("gone", "b") == []
        assert await store.last_sequence("gone", "main") == 0
        assert await store.locate("gone", gone[2]["id"]) is None
        assert await store.list_branches("gone") == []
        assert await store.find_request("gone", "main", "key") is None
        assert [t.thread_id for t in (await store.list_threads()).threads] == ["kept"]
        assert await store.read("kept", "main") == kept
        assert await store.delete_thread("gone") is False
        assert await store.delete_thread(["not", "an", "id"]) is False  # type: ignore[arg-type]
        again = _history("gone", 1, 400.0)  # the id starts a new history from seq 1
        await store.append("gone", "main", again, after=0)
        assert await store.read("gone", "main") == again

    async def test_prune_keep_last_cuts_at_a_checkpoint_and_the_thread_still_loads(
        self, store: StateStore
    ) -> None:
        records = await _write(store, "t", 12, 0.0)  # checkpoints at 1, 5 and 9
        assert await store.prune("t", keep_last=3) == 8  # 10..12 kept, from checkpoint 9
        assert seqs(await store.read("t", "main")) == [9, 10, 11, 12]
        assert await store.read("t", "main") == records[8:]
        assert await store.read_tail("t", "main") == records[8:]
        assert await store.last_sequence("t", "main") == 12
        assert await store.last_checkpoint("t", "main", at_or_before=8) is None
        assert await store.locate("t", records[7]["id"]) is None
        assert await store.locate("t", records[8]["id"]) == ("main", 9)
        [info] = (await store.list_threads()).threads
        assert (info.created_at, info.updated_at, info.last_sequence) == (9.0, 12.0, 12)
        await store.append("t", "main", [_at(event(13, "t"), 13.0)], after=12)
        assert seqs(await store.read("t", "main", start=12)) == [12, 13]

    async def test_prune_keeps_forks_loadable_even_when_their_fork_point_is_dropped(
        self, store: StateStore
    ) -> None:
        records = await _write(store, "t", 12, 0.0)
        first = await _fork(store, "t", "b", records[2], 20.0)
        assert await store.prune("t", keep_last=1) == 8
        assert await store.read("t", "b") == [first]
        assert [b.id for b in await store.list_branches("t")] == ["b"]
        await store.append("t", "b", [_at(event(5, "t", "b"), 21.0)], after=4)
        assert seqs(await store.read("t", "b")) == [4, 5]

    async def test_prune_older_than_drops_what_precedes_the_last_older_checkpoint(
        self, store: StateStore
    ) -> None:
        await _write(store, "t", 12, 0.0)  # record n has ts n; checkpoints at 1, 5, 9
        assert await store.prune("t", older_than=9.0) == 4  # checkpoint 9 is not older
        assert seqs(await store.read("t", "main"))[0] == 5
        assert await store.prune("t", older_than=100.0) == 4
        assert seqs(await store.read("t", "main"))[0] == 9
        assert await store.prune("t", older_than=100.0) == 0  # nothing left to drop

    async def test_prune_with_both_rules_keeps_what_either_keeps(self, store: StateStore) -> None:
        await _write(store, "t", 12, 0.0)
        assert await store.prune("t", keep_last=1, older_than=6.0) == 4
        assert seqs(await store.read("t", "main"))[0] == 5

    async def test_prune_of_every_thread_and_of_nothing(self, store: StateStore) -> None:
        await _write(store, "a", 12, 0.0)
        await _write(store, "b", 6, 0.0)
        assert await store.prune("nobody", keep_last=1) == 0
        assert await store.prune(keep_last=1) == 8 + 4
        assert seqs(await store.read("a", "main")) == [9, 10, 11, 12]
        assert seqs(await store.read("b", "main")) == [5, 6]

    async def test_prune_forgets_request_keys_of_dropped_runs_only(self, store: StateStore) -> None:
        records = _history("t", 12, 0.0)
        records[1] = {**records[1], "type": "run_started", REQUEST_KEY: "old"}
        records[10] = {**records[10], "type": "run_started", REQUEST_KEY: "new"}
        await store.append("t", "main", records, after=0)
        await store.prune("t", keep_last=1)
        assert await store.find_request("t", "main", "old") is None
        assert await store.find_request("t", "main", "new") == 11

    async def test_a_pruned_thread_exported_and_imported_again_is_the_same_thread(
        self, store: StateStore
    ) -> None:
        from nodestep.store import export_thread, import_thread

        records = _history("t", 12, 0.0)  # checkpoints at 1, 5 and 9
        records[10] = {**records[10], "type": "run_started", REQUEST_KEY: "kept"}
        await store.append("t", "main", records, after=0)
        await _fork(store, "t", "b", records[2], 20.0)  # from seq 3, which the prune drops
        more = [_at(event(seq, "t", "b", type="checkpoint"), 21.0) for seq in (5, 6)]
        await store.append("t", "b", more, after=4)
        await _fork(store, "t", "c", records[9], 22.0)  # from seq 10, which it keeps
        assert await store.prune("t", keep_last=1) == 8 + 2  # main from 9, b from 6
        exported = await export_thread(store, "t")
        assert await store.delete_thread("t")
        assert await import_thread(store, exported) == "t"
        assert await export_thread(store, "t") == exported
        assert seqs(await store.read("t", "main")) == [9, 10, 11, 12]
        assert seqs(await store.read("t", "b")) == [6]
        assert await store.read_tail("t", "main", at=11) == records[8:11]
        assert await store.last_checkpoint("t", "main", at_or_before=8) is None
        assert await store.locate("t", records[8]["id"]) == ("main", 9)
        assert await store.find_request("t", "main", "kept") == 11
        assert [b.id for b in await store.list_branches("t")] == ["b", "c"]
        # it goes on as the pruned thread did: appends numbered on, prunes again
        await store.append("t", "main", [_at(event(13, "t"), 13.0)], after=12)
        await store.append("t", "b", [_at(event(7, "t", "b"), 23.0)], after=6)
        assert seqs(await store.read("t", "b")) == [6, 7]
        assert await store.prune("t", keep_last=1) == 0  # each branch's one checkpoint is kept

    async def test_storing_a_pruned_branch_over_one_the_store_has_is_refused(
        self, store: StateStore
    ) -> None:
        records = await _write(store, "t", 6, 0.0)
        with pytest.raises(StateStoreError, match=r"branch 'main' of thread 't'.*already"):
            await store.store_pruned("t", "main", [_at(event(5, "t", type="checkpoint"), 5.0)])
        not_pruned = [_at(event(1, "u", type="checkpoint"), 1.0)]
        with pytest.raises(StateStoreError, match=r"has seq 1; a pruned branch's starts after 1"):
            await store.store_pruned("u", "main", not_pruned)
        with pytest.raises(StateStoreError, match=r"must be a checkpoint, found 'state_updated'"):
            await store.store_pruned("u", "main", [_at(event(5, "u"), 5.0)])
        assert await store.read("t", "main") == records
        assert await store.read("u", "main") == []

    @pytest.mark.parametrize(
        ("arguments", "named"),
        [({}, "keep_last=N"), ({"keep_last": 0}, "keep_last=0"), ({"older_than": math.inf}, "inf")],
    )
    async def test_prune_refuses_bad_arguments_and_changes_nothing(
        self, store: StateStore, arguments: dict[str, Any], named: str
    ) -> None:
        records = await _write(store, "t", 6, 0.0)
        with pytest.raises(GraphConfigError, match=named):
            await store.prune("t", **arguments)
        assert await store.read("t", "main") == records
