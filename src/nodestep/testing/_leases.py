"""The conformance tests of leases, fencing and request keys, for every store.

Part of ``nodestep.testing._conformance`` (``StateStoreConformance`` inherits these tests).
A store that inherits ``StateStore``'s defaults passes them in one process; a store that
keeps leases of its own (shared by processes) must keep the same promises: of two writers
of a branch, one holds it; a lease that expired can be taken over; the writer that lost
it can never append again; a lease taken with a run's first records stores them only if the
branch ends where the run says, and is taken all the same; a request key is found where the
run stored it.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import anyio.to_thread
import pytest

from nodestep._errors import StateStoreError, ThreadBusyError, ThreadConflictError
from nodestep.store import REQUEST_KEY, StateStore
from nodestep.testing._records import checkpoint, event, events, fork, seqs

__all__ = ["LeaseConformance"]

_SHORT = 0.2  # the ttl of the leases that the tests let expire


def _started(seq: int, key: str | None, thread: str = "t1", branch: str = "main") -> Any:
    record = event(seq, thread, branch, type="run_started")
    if key is not None:
        record[REQUEST_KEY] = key
    return record


class LeaseConformance:
    """The tests of leases and request keys; ``StateStoreConformance`` inherits them."""

    # -- leases --------------------------------------------------------------------------

    async def test_a_held_branch_refuses_a_second_holder_naming_the_first(
        self, store: StateStore
    ) -> None:
        lease = await store.acquire_lease("t1", "main", "run-a", ttl=30)
        assert (lease.thread_id, lease.branch_id, lease.holder) == ("t1", "main", "run-a")
        assert lease.expires > time.time() + 25
        with pytest.raises(ThreadBusyError, match=r"run 'run-a'.* holds it") as info:
            await store.acquire_lease("t1", "main", "run-b", ttl=30)
        assert (info.value.holder, info.value.expires) == ("run-a", lease.expires)
        assert (info.value.thread_id, info.value.branch_id, info.value.lost) == (
            "t1",
            "main",
            False,
        )
        assert isinstance(info.value, ThreadConflictError)
        renewed = await store.renew_lease(lease)  # the refusal changed nothing
        assert renewed.id == lease.id and renewed.expires >= lease.expires

    async def test_leases_are_per_thread_and_branch(self, store: StateStore) -> None:
        await store.acquire_lease("t1", "main", "run-a", ttl=30)
        await store.acquire_lease("t1", "alt", "run-b", ttl=30)
        await store.acquire_lease("t2", "main", "run-c", ttl=30)

    async def test_a_released_branch_can_be_taken_and_a_stale_release_frees_nothing(
        self, store: StateStore
    ) -> None:
        first = await store.acquire_lease("t1", "main", "run-a", ttl=30)
        await store.release_lease(first)
        second = await store.acquire_lease("t1", "main", "run-b", ttl=30)
        await store.release_lease(first)  # no longer its lease: does nothing
        with pytest.raises(ThreadBusyError, match="run 'run-b'"):
            await store.acquire_lease("t1", "main", "run-c", ttl=30)
        await store.release_lease(second)
        await store.acquire_lease("t1", "main", "run-c", ttl=30)

    async def test_an_expired_lease_is_taken_over_and_its_holder_can_never_append_again(
        self, store: StateStore
    ) -> None:
        await store.append("t1", "main", events(1, 1), after=0)
        old = await store.acquire_lease("t1", "main", "run-a", ttl=_SHORT)
        await anyio.sleep(_SHORT * 1.5)
        new = await store.acquire_lease("t1", "main", "run-b", ttl=30)
        with pytest.raises(ThreadBusyError, match="no longer held by this writer") as info:
            await store.renew_lease(old)
        assert (info.value.lost, info.value.holder) == (True, "run-b")
        late = events(2, 2)
        with pytest.raises(ThreadBusyError, match="nothing more of it is stored"):
            await store.append_leased(old, late, after=1)
        assert await store.locate("t1", late[0]["id"]) is None
        assert await store.append_leased(new, events(2, 2), after=1) == new
        assert seqs(await store.read("t1", "main")) == [1, 2]

    async def test_an_expired_lease_no_one_took_is_renewed(self, store: StateStore) -> None:
        lease = await store.acquire_lease("t1", "main", "run-a", ttl=_SHORT)
        await anyio.sleep(_SHORT * 1.5)
        renewed = await store.renew_lease(lease)
        assert renewed.id == lease.id and renewed.expires > time.time()
        with pytest.raises(ThreadBusyError, match="run 'run-a'"):
            await store.acquire_lease("t1", "main", "run-b", ttl=30)

    async def test_append_leased_checks_the_sequence_too(self, store: StateStore) -> None:
        lease = await store.acquire_lease("t1", "main", "run-a", ttl=30)
        assert await store.append_leased(lease, events(1, 2), after=0) == lease
        with pytest.raises(ThreadConflictError, match="now ends at event 2"):
            await store.append_leased(lease, events(2, 2), after=1)
        assert seqs(await store.read("t1", "main")) == [1, 2]

    async def test_append_leased_close_to_expiry_renews_the_lease_first(
        self, store: StateStore
    ) -> None:
        lease = await store.acquire_lease("t1", "main", "run-a", ttl=_SHORT)
        await anyio.sleep(_SHORT * 0.6)
        renewed = await store.append_leased(lease, events(1, 1), after=0)
        assert renewed.id == lease.id and renewed.expires > lease.expires

    async def test_acquire_and_append_takes_the_branch_and_stores_the_records(
        self, store: StateStore
    ) -> None:
        await store.append("t1", "main", events(1, 1), after=0)
        lease, stored = await store.acquire_and_append(
            "t1", "main", "run-a", events(2, 3), ttl=30, after=1
        )
        assert stored is True
        assert (lease.thread_id, lease.branch_id, lease.holder) == ("t1", "main", "run-a")
        assert seqs(await store.read("t1", "main")) == [1, 2, 3]
        with pytest.raises(ThreadBusyError, match="run 'run-a'"):
            await store.acquire_lease("t1", "main", "run-b", ttl=30)
        assert await store.append_leased(lease, events(4, 4), after=3) == lease

    async def test_acquire_and_append_after_the_branch_moved_on_takes_the_branch_alone(
        self, store: StateStore
    ) -> None:
        await store.append("t1", "main", events(1, 2), after=0)
        late = events(2, 2)
        lease, stored = await store.acquire_and_append("t1", "main", "run-a", late, ttl=30, after=1)
        assert stored is False
        assert seqs(await store.read("t1", "main")) == [1, 2]
        assert await store.locate("t1", late[0]["id"]) is None
        with pytest.raises(ThreadBusyError, match="run 'run-a'"):
            await store.acquire_lease("t1", "main", "run-b", ttl=30)
        assert await store.append_leased(lease, events(3, 3), after=2) == lease  # held

    async def test_acquire_and_append_after_a_record_of_another_id_takes_the_branch_alone(
        self, store: StateStore
    ) -> None:
        # The thread was deleted and written again to as many records: not the run's.
        old = events(1, 2)
        await store.append("t1", "main", old, after=0)
        await store.delete_thread("t1")
        await store.append("t1", "main", events(1, 2), after=0)
        if (await store.last_record("t1", "main"))[1] is None:
            return  # a store that gives no ids is checked by sequence alone
        late = events(3, 3)
        lease, stored = await store.acquire_and_append(
            "t1", "main", "run-a", late, ttl=30, after=2, after_id=old[-1]["id"]
        )
        assert stored is False
        assert seqs(await store.read("t1", "main")) == [1, 2]
        assert await store.locate("t1", late[0]["id"]) is None
        assert await store.append_leased(lease, events(3, 3), after=2) == lease  # held

    async def test_acquire_and_append_on_a_held_branch_changes_nothing(
        self, store: StateStore
    ) -> None:
        held = await store.acquire_lease("t1", "main", "run-a", ttl=30)
        first = events(1, 1)
        with pytest.raises(ThreadBusyError, match="run 'run-a'"):
            await store.acquire_and_append("t1", "main", "run-b", first, ttl=30, after=0)
        assert await store.read("t1", "main") == []
        assert await store.locate("t1", first[0]["id"]) is None
        assert await store.append_leased(held, events(1, 1), after=0) == held

    async def test_acquire_and_append_of_records_refused_leaves_the_branch_free(
        self, store: StateStore
    ) -> None:
        bad = [{**event(1), "type": 7}]  # a record's type is a string
        with pytest.raises(StateStoreError, match=r"record 0 .*of thread 't1'"):
            await store.acquire_and_append("t1", "main", "run-a", bad, ttl=30, after=0)
        assert await store.read("t1", "main") == []
        lease = await store.acquire_lease("t1", "main", "run-b", ttl=30)  # no one holds it
        assert lease.holder == "run-b"

    async def test_one_of_four_threads_taking_a_branch_at_once_gets_it(
        self, store: StateStore, anyio_backend_name: str, anyio_backend_options: dict[str, Any]
    ) -> None:
        winners: list[int] = []
        barrier = threading.Barrier(4)

        async def take(k: int) -> None:
            barrier.wait()
            try:
                await store.acquire_lease("t1", "main", f"run-{k}", ttl=30)
            except ThreadBusyError:
                return
            winners.append(k)

        def in_thread(k: int) -> None:
            anyio.run(take, k, backend=anyio_backend_name, backend_options=anyio_backend_options)

        def start_and_join() -> None:
            threads = [threading.Thread(target=in_thread, args=(k,)) for k in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

        await anyio.to_thread.run_sync(start_and_join)
        assert len(winners) == 1

    # -- request keys --------------------------------------------------------------------

    async def test_find_request_gives_the_run_started_record_of_a_key(
        self, store: StateStore
    ) -> None:
        records = [checkpoint(1), _started(2, "order-7"), event(3), _started(4, None)]
        await store.append("t1", "main", records, after=0)
        await store.append("t1", "main", [_started(5, "order-8")], after=4)
        assert await store.find_request("t1", "main", "order-7") == 2
        assert await store.find_request("t1", "main", "order-8") == 5
        assert await store.find_request("t1", "main", "order-9") is None
        assert await store.find_request("t2", "main", "order-7") is None
        assert await store.find_request("t1", "alt", "order-7") is None

    async def test_find_request_looks_in_the_branch_of_the_key_only(
        self, store: StateStore
    ) -> None:
        main = [checkpoint(1), _started(2, "order-7")]
        await store.append("t1", "main", main, after=0)
        first = [checkpoint(2, branch="alt")]
        await store.create_branch(fork("t1", "alt", main[0]), first)
        await store.append("t1", "alt", [_started(3, "order-9", branch="alt")], after=2)
        assert await store.find_request("t1", "alt", "order-9") == 3
        assert await store.find_request("t1", "main", "order-9") is None
        other = event(3, type="state_updated")
        other[REQUEST_KEY] = "order-10"  # only run_started records hold request keys
        await store.append("t1", "main", [other], after=2)
        assert await store.find_request("t1", "main", "order-10") is None
