"""A cancel that lands while the store takes a run's lease leaves the thread free: the run
holds the lease it was given and gives it back as it stops.

Why it matters: an async PostgreSQL connection may be cancelled after its server committed
the lease; the store call then raises the cancellation, not the lease. Unshielded, no run
held that lease, no one gave it back, and every call on the thread was refused with
``ThreadBusyError`` for the lease's ttl (30 s by default).
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import anyio.lowlevel
import pytest

from nodestep import END, START, BaseState, Graph, InMemoryStateStore, node
from nodestep._engine.backend import shielded
from nodestep.store import Lease, Record

pytestmark = pytest.mark.anyio


class Count(BaseState):
    n: int = 0


class CancelledInside(InMemoryStateStore):
    """A memory store that lets a cancel in once it has taken a lease, as an async
    connection does whose server committed before its caller was cancelled."""

    def __init__(self) -> None:
        super().__init__()
        self.cancel: anyio.CancelScope | None = None  # cancelled inside the next lease call
        self.where = ""  # "acquire_lease" or "acquire_and_append"

    async def _let_cancel_in(self, where: str) -> None:
        scope = self.cancel
        if scope is not None and where == self.where:
            self.cancel = None
            scope.cancel()
            await anyio.lowlevel.checkpoint()

    async def acquire_lease(
        self, thread_id: str, branch_id: str, holder: str, *, ttl: float
    ) -> Lease:
        lease = await super().acquire_lease(thread_id, branch_id, holder, ttl=ttl)
        await self._let_cancel_in("acquire_lease")
        return lease

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
        taken = await super().acquire_and_append(
            thread_id, branch_id, holder, records, ttl=ttl, after=after, after_id=after_id
        )
        await self._let_cancel_in("acquire_and_append")
        return taken


@node
async def count(state: Count) -> dict:
    await anyio.lowlevel.checkpoint()  # where a cancel let in by the store lands
    return {"n": state.n + 1}


def counter(store: CancelledInside) -> Graph[Count]:
    return Graph(Count, state_store=store).flow(START >> count, count >> END)


async def test_a_cancel_while_a_new_thread_is_taken_leaves_it_free() -> None:
    store = CancelledInside()
    graph = counter(store)
    with anyio.CancelScope() as scope:
        store.cancel, store.where = scope, "acquire_lease"
        await graph.ainvoke({}, thread_id="t")
    assert scope.cancelled_caught
    events = (await graph.history("t")).events
    assert events[-1].type == "run_stopped" and events[-1].data["reason"] == "cancelled"
    result = await graph.ainvoke(None, thread_id="t")  # no ThreadBusyError: the lease is free
    assert result.status == "completed" and result.state.n == 1


async def test_a_cancel_while_a_known_thread_is_taken_with_its_first_records_leaves_it_free() -> (
    None
):
    store = CancelledInside()
    graph = counter(store)
    await graph.ainvoke({}, thread_id="t")  # the graph knows the thread's position now
    with anyio.CancelScope() as scope:
        store.cancel, store.where = scope, "acquire_and_append"
        await graph.ainvoke({}, thread_id="t")
    assert scope.cancelled_caught
    events = (await graph.history("t")).events
    assert [e.type for e in events][-2:] == ["run_started", "run_stopped"]
    assert events[-1].data["reason"] == "cancelled"
    result = await graph.ainvoke(None, thread_id="t")  # continues the stopped run at once
    assert result.status == "completed" and result.state.n == 2


async def test_a_cancel_while_update_state_takes_the_thread_leaves_it_free() -> None:
    store = CancelledInside()
    graph = counter(store)
    await graph.ainvoke({}, thread_id="t")
    with anyio.CancelScope() as scope:
        store.cancel, store.where = scope, "acquire_lease"
        await graph.update_state("t", {"n": 10})
    # Whether the update was stored before the cancel took effect or not, the thread is free.
    await graph.update_state("t", {"n": 20})
    assert (await graph.get_state("t")).value.n == 20


async def test_the_engines_shielded_scope_holds_a_cancel_until_it_exits() -> None:
    # ``shielded()`` makes anyio's own scope; on asyncio from its class after the first one
    # (learnt then), so the second round checks the scope made the short way.
    for _ in range(2):
        reached = []
        with anyio.CancelScope() as outer:
            with shielded() as scope:
                assert isinstance(scope, anyio.CancelScope) and scope.shield
                assert type(scope) is type(anyio.CancelScope())
                outer.cancel()
                await anyio.lowlevel.checkpoint()  # the shield keeps the cancel out
                reached.append("inside")
            await anyio.lowlevel.checkpoint()  # where it lands
            reached.append("after")  # pragma: no cover - never reached
        assert outer.cancelled_caught and reached == ["inside"]


async def test_a_cancel_while_the_lease_is_taken_again_and_again_leaves_the_thread_free() -> None:
    # Each round takes the lease in a scope of ``shielded()``, the later ones made the short
    # way on asyncio, and each one's cancel is kept out of the store call.
    store = CancelledInside()
    graph = counter(store)
    for n in range(1, 4):
        with anyio.CancelScope() as scope:
            store.cancel, store.where = scope, "acquire_lease" if n == 1 else "acquire_and_append"
            await graph.ainvoke({}, thread_id="t")
        assert scope.cancelled_caught
        result = await graph.ainvoke(None, thread_id="t")  # no ThreadBusyError
        assert result.status == "completed" and result.state.n == n
