"""One writer per thread: a run holds its branch, and every other writer is refused first.

Each test runs against both built-in stores (the ``store`` fixture) and on both event
loops.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    FilesystemStateStore,
    Graph,
    GraphConfigError,
    InMemoryStateStore,
    Resume,
    StateStoreError,
    ThreadBusyError,
    ThreadConflictError,
    UnknownThreadError,
    add,
    interrupt,
    node,
)
from nodestep._engine.lease import ThreadHold
from nodestep.store import Lease, Record, StateStore
from nodestep.testing import sequential_ids, ticking_clock
from store_helpers import cancel_when

pytestmark = pytest.mark.anyio


class Stock(BaseState):
    items: Annotated[list[str], add] = Field(default_factory=list)
    count: int = 0


def stock_graph(
    store: StateStore,
    gate: anyio.Event | None = None,
    entered: anyio.Event | None = None,
    **settings: Any,
) -> Graph:
    """``restock`` sets ``entered`` (the run holds the thread by then) and waits for ``gate``."""

    @node
    async def restock(state: Stock) -> dict:
        if entered is not None:
            entered.set()
        if gate is not None:
            await gate.wait()
        return {"count": state.count + 1}

    return Graph(Stock, state_store=store, **settings).flow(START >> restock, restock >> END)


async def types(graph: Graph, thread: str = "shelf") -> list[str]:
    return [e.type for e in (await graph.history(thread)).events]


async def test_a_second_run_of_a_held_thread_is_refused_before_it_writes(
    store: StateStore,
) -> None:
    gate, entered = anyio.Event(), anyio.Event()
    graph = stock_graph(store, gate, entered)
    refused: list[ThreadBusyError] = []

    async def second() -> None:
        await entered.wait()
        before = await store.last_sequence("shelf", "main")
        with pytest.raises(ThreadBusyError, match=r"is busy: run '\w+'.* holds it") as info:
            await graph.ainvoke({"items": ["late"]}, thread_id="shelf")
        assert await store.last_sequence("shelf", "main") == before  # nothing stored
        refused.append(info.value)
        gate.set()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(second)
        result = await graph.ainvoke({"items": ["first"]}, thread_id="shelf")
    assert refused[0].holder == result.run_id
    assert refused[0].pid == os.getpid() or isinstance(store, InMemoryStateStore)
    assert result.state.items == ["first"]
    assert await types(graph) == [
        "checkpoint",
        "run_started",
        "superstep_completed",
        "run_completed",
    ]


async def test_update_state_and_migrate_of_a_held_thread_are_refused(store: StateStore) -> None:
    await stock_graph(store).ainvoke({}, thread_id="shelf")
    gate, entered = anyio.Event(), anyio.Event()
    graph = stock_graph(store, gate, entered)

    async def edits() -> None:
        await entered.wait()
        with pytest.raises(ThreadBusyError, match="is busy: run") as edit:
            await graph.update_state("shelf", {"count": 100})
        with pytest.raises(ThreadBusyError, match="is busy: run") as migration:
            await graph.migrate("shelf", lambda values: values, from_state=Stock)
        # The fix is the method's own, not a run's (neither takes wait_for_thread= or a
        # request_key).
        for info, method in ((edit, "update_state"), (migration, "migrate")):
            message = str(info.value)
            assert f"Nothing was stored. Call {method} again once the thread is free" in message
            assert "wait_for_thread" not in message and "request_key" not in message
        gate.set()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(edits)
        result = await graph.ainvoke({}, thread_id="shelf")
    assert result.state.count == 2
    await graph.update_state("shelf", {"count": 100})  # free again once the run ended
    assert (await graph.get_state("shelf")).value.count == 100


async def test_a_run_is_refused_while_update_state_holds_the_thread(store: StateStore) -> None:
    graph = stock_graph(store)
    lease = await store.acquire_lease("shelf", "main", "update_state", ttl=30)
    with pytest.raises(ThreadBusyError, match=r"update_state .*holds it"):
        await graph.ainvoke({}, thread_id="shelf")
    await store.release_lease(lease)
    assert (await graph.ainvoke({}, thread_id="shelf")).state.count == 1


async def test_fork_of_a_held_thread_is_not_refused(store: StateStore) -> None:
    graph = stock_graph(store)
    await graph.ainvoke({}, thread_id="shelf")
    first = (await graph.history("shelf")).events[-1]
    await store.acquire_lease("shelf", "main", "run-x", ttl=30)
    branch = await graph.fork("shelf", from_=first.id, name="alt")
    assert (await graph.ainvoke({}, thread_id="shelf", branch_id=branch.id)).state.count == 2


async def test_wait_for_thread_waits_for_the_holder_then_runs(
    store: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = stock_graph(store)
    lease = await store.acquire_lease("shelf", "main", "run-x", ttl=30)
    refused = anyio.Event()
    acquire = store.acquire_lease

    async def acquire_or_say_refused(*args: Any, **kwargs: Any) -> Any:
        try:
            return await acquire(*args, **kwargs)
        except ThreadBusyError:
            refused.set()
            raise

    monkeypatch.setattr(store, "acquire_lease", acquire_or_say_refused)

    async def let_go() -> None:
        await refused.wait()  # the run found the thread held, and waits
        await store.release_lease(lease)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(let_go)
        result = await graph.ainvoke({"items": ["a"]}, thread_id="shelf", wait_for_thread=5)
    assert result.state.items == ["a"]


async def test_wait_for_thread_gives_up_after_its_seconds_saying_how_long_it_waited(
    store: StateStore,
) -> None:
    graph = stock_graph(store)
    await store.acquire_lease("shelf", "main", "run-x", ttl=30)
    with pytest.raises(ThreadBusyError, match=r"This call waited 0\.0[5-9]\d* s") as info:
        await graph.ainvoke({}, thread_id="shelf", wait_for_thread=0.05)
    assert info.value.waited >= 0.05 and info.value.holder == "run-x"
    assert await store.last_sequence("shelf", "main") == 0


@pytest.mark.slow
async def test_a_run_renews_its_lease_while_a_long_node_runs(store: StateStore) -> None:
    gate = anyio.Event()
    # A ttl long enough that a loaded machine (two test workers and the PostgreSQL server
    # on two cores) does not stall a renewal past it; 0.15 s did, now and then.
    graph = stock_graph(store, gate, lease_ttl=0.5)
    seen: list[str] = []

    async def other() -> None:
        await anyio.sleep(1.6)  # real time: more than three times the ttl the run must renew
        try:
            await store.acquire_lease("shelf", "main", "run-x", ttl=30)
        except ThreadBusyError as error:
            seen.append(error.holder)
        gate.set()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(other)
        result = await graph.ainvoke({}, thread_id="shelf")
    assert seen == [result.run_id]
    await store.acquire_lease("shelf", "main", "run-x", ttl=30)  # released at the end


@pytest.mark.slow
async def test_runs_of_different_ttls_at_once_each_renew_theirs(store: StateStore) -> None:
    # The loop's one renewal timer is set for the earliest: a short ttl after a long one.
    gate = anyio.Event()
    slow = stock_graph(store, gate, lease_ttl=30.0)
    quick = stock_graph(store, gate, lease_ttl=0.5)  # as above: a loaded machine's margin
    seen: list[str] = []

    async def other() -> None:
        await anyio.sleep(2.0)  # real time: four times the short ttl
        for thread in ("long-ttl", "short-ttl"):
            try:
                await store.acquire_lease(thread, "main", "run-x", ttl=30)
            except ThreadBusyError as error:
                seen.append(error.holder)
        gate.set()

    results: dict[str, Any] = {}

    async def run(name: str, graph: Graph) -> None:
        results[name] = await graph.ainvoke({}, thread_id=name)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(run, "long-ttl", slow)
        await anyio.sleep(0.01)
        tasks.start_soon(run, "short-ttl", quick)
        tasks.start_soon(other)
    assert seen == [results["long-ttl"].run_id, results["short-ttl"].run_id]


async def test_runs_that_never_wait_on_the_loop_leave_no_timers_behind(
    store: StateStore, anyio_backend: str
) -> None:
    # Each run used to leave a cancelled timer in asyncio's queue until the loop turned,
    # and a coroutine whose runs never wait on the loop piled them up.
    if anyio_backend != "asyncio":
        pytest.skip("asyncio's timers")
    import asyncio

    graph = Graph(Stock, state_store=store).flow(START >> bump, bump >> END)
    loop = asyncio.get_running_loop()
    await graph.ainvoke({}, thread_id="quiet")
    before = len(loop._scheduled)  # asyncio's queue of timers: the renewals' one, a store's
    for n in range(300):
        await graph.ainvoke({}, thread_id=f"quiet-{n}")
    assert len(loop._scheduled) <= before + 1  # not one more a run


@node
def bump(state: Stock) -> dict:
    return {"count": state.count + 1}


async def test_a_run_whose_lease_was_taken_over_cannot_append_and_says_what_it_stored(
    store: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A runner whose renewals stop (its process paused, say) loses the thread.
    monkeypatch.setattr(ThreadHold, "keep_alive", lambda self: None)
    gate, entered = anyio.Event(), anyio.Event()
    graph = stock_graph(store, gate, entered, lease_ttl=0.05)

    async def take_over() -> None:
        await entered.wait()  # the run holds the thread (on a loaded machine, not at once)
        await anyio.sleep(0.1)  # real time: the run's lease (ttl 0.05 s, never renewed) expires
        await store.acquire_lease("shelf", "main", "run-x", ttl=30)
        gate.set()

    caught: list[BaseException] = []

    async def run() -> None:
        with pytest.raises(ThreadBusyError, match="no longer held by this writer") as info:
            await graph.ainvoke({}, thread_id="shelf")
        caught.append(info.value)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(take_over)
        tasks.start_soon(run)
    error = caught[0]
    assert isinstance(error, ThreadBusyError)
    assert error.lost and error.holder == "run-x"
    assert "This call stored events 1 to 2 before, and they stay" in str(error)
    assert await types(graph) == ["checkpoint", "run_started"]


async def test_the_thread_is_free_again_after_a_run_fails(store: StateStore) -> None:
    @node
    def broken(state: Stock) -> dict:
        raise ConnectionError("down")

    graph = Graph(Stock, state_store=store).flow(START >> broken, broken >> END)
    with pytest.raises(ConnectionError, match="down"):
        await graph.ainvoke({}, thread_id="shelf")
    lease = await store.acquire_lease("shelf", "main", "run-x", ttl=30)
    await store.release_lease(lease)


async def test_the_thread_is_free_again_after_a_cancelled_run(store: StateStore) -> None:
    entered = anyio.Event()
    graph = stock_graph(store, anyio.Event(), entered)
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(cancel_when, entered, scope)
            await graph.ainvoke({}, thread_id="shelf")
    assert (await types(graph))[-1] == "run_stopped"
    await store.acquire_lease("shelf", "main", "run-x", ttl=30)


class _Interloper(InMemoryStateStore):
    """Another writer's record lands before the run's second append (no lease kept)."""

    async def append_leased(self, lease: Any, records: Any, *, after: int) -> Any:
        if after == 2:
            foreign: Record = {**records[0], "id": "00000000-0000-4000-8000-0000000000ff"}
            await self.append(lease.thread_id, lease.branch_id, [foreign], after=after)
        return await super().append_leased(lease, records, after=after)


async def test_a_refused_append_says_which_events_the_call_had_stored() -> None:
    graph = stock_graph(_Interloper())
    with pytest.raises(ThreadConflictError, match="now ends at event 3") as info:
        await graph.ainvoke({}, thread_id="shelf")
    message = str(info.value)
    assert "this append follows event 2, but the store now ends at event 3" in message
    assert "Nothing of this append was stored" in message
    assert "This call stored events 1 to 2 before, and they stay" in message
    # Without a request_key, a retry as it is would apply the input again: it says so.
    assert "without a request_key, a call run again applies its input again" in message
    assert info.value.stored

    keyed = stock_graph(_Interloper())
    with pytest.raises(ThreadConflictError, match="now ends at event 3") as info:
        await keyed.ainvoke({}, thread_id="shelf", request_key="restock-1")
    assert "Retry it with the same request_key to finish it" in str(info.value)


class _Deleter(InMemoryStateStore):
    """Another writer deletes the thread before the run's second append."""

    async def append_leased(self, lease: Any, records: Any, *, after: int) -> Any:
        if after == 2:
            assert await self.delete_thread(lease.thread_id)
        return await super().append_leased(lease, records, after=after)


async def test_a_refused_append_on_a_deleted_thread_says_its_events_are_gone() -> None:
    store = _Deleter()
    graph = stock_graph(store)
    with pytest.raises(ThreadConflictError, match="now ends at event 0") as info:
        await graph.ainvoke({}, thread_id="shelf")
    message = str(info.value)
    assert "This call had stored events 1 to 2, but the branch no longer holds them" in message
    assert "they stay" not in message and "request_key" not in message
    assert await store.read("shelf", "main") == []


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"wait_for_thread": -1}, "wait_for_thread takes the seconds"),
        ({"wait_for_thread": float("inf")}, "wait_for_thread takes the seconds"),
        ({"wait_for_thread": True}, "wait_for_thread takes the seconds"),
        ({"wait_for_thread": "5"}, "wait_for_thread takes the seconds"),
    ],
)
async def test_a_wait_that_is_not_seconds_is_refused(
    store: StateStore, options: dict[str, Any], words: str
) -> None:
    with pytest.raises(GraphConfigError, match=words):
        await stock_graph(store).ainvoke({}, thread_id="shelf", **options)


async def test_wait_for_thread_without_a_store_is_refused() -> None:
    graph = stock_graph(None)  # type: ignore[arg-type]
    with pytest.raises(GraphConfigError, match=r"ainvoke\(wait_for_thread=...\) works on a stored"):
        await graph.ainvoke({}, wait_for_thread=1)


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), "30", True])
def test_a_lease_ttl_that_is_not_positive_seconds_is_refused(ttl: Any) -> None:
    with pytest.raises(GraphConfigError, match=f"lease_ttl must be a positive number.*{ttl!r}"):
        Graph(Stock, lease_ttl=ttl)


async def test_two_file_stores_of_one_file_share_the_leases(tmp_path: Path) -> None:
    one = FilesystemStateStore(tmp_path / "h.jsonl")
    two = FilesystemStateStore(tmp_path / "h.jsonl")
    lease = await one.acquire_lease("shelf", "main", "run-a", ttl=30)
    with pytest.raises(ThreadBusyError, match=rf"run 'run-a' \(pid {os.getpid()} on host"):
        await two.acquire_lease("shelf", "main", "run-b", ttl=30)
    await one.release_lease(lease)
    await two.acquire_lease("shelf", "main", "run-b", ttl=30)
    await one.aclose()
    await two.aclose()


async def test_a_damaged_lease_file_is_an_error_naming_it(tmp_path: Path) -> None:
    store = FilesystemStateStore(tmp_path / "h.jsonl")
    store.lease_path.write_bytes(b"{not json")
    with pytest.raises(StateStoreError, match=r"h\.jsonl\.leases, which holds which run"):
        await store.acquire_lease("shelf", "main", "run-a", ttl=30)
    await store.aclose()


async def test_a_read_only_file_store_takes_no_lease(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    await FilesystemStateStore(path).aclose()
    store = FilesystemStateStore(path, read_only=True)
    with pytest.raises(StateStoreError, match="read"):
        await store.acquire_lease("shelf", "main", "run-a", ttl=30)
    await store.aclose()


async def test_a_completed_run_gives_its_lease_back_with_its_last_append(
    store: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The last superstep and run_completed are one append, which also drops the lease
    # (one SQLite transaction instead of three); the history keeps both records.
    last: list[list[str]] = []
    append_and_release = store.append_and_release

    async def spy(lease: Any, records: Any, *, after: int) -> None:
        last.append([r["type"] for r in records])
        await append_and_release(lease, records, after=after)

    monkeypatch.setattr(store, "append_and_release", spy)
    graph = stock_graph(store)
    await graph.ainvoke({}, thread_id="shelf")
    assert last == [["superstep_completed", "run_completed"]]
    await store.acquire_lease("shelf", "main", "run-x", ttl=30)  # free at once
    kinds = [e.type for e in (await graph.history("shelf")).events]
    assert kinds[-2:] == ["superstep_completed", "run_completed"]


# -- a run on a thread its graph knows takes the lease with its first records ----------


def spy_calls(store: StateStore, monkeypatch: pytest.MonkeyPatch, names: list[str]) -> list[str]:
    """Record the calls of the store's methods ``names`` made from now on, by name."""
    calls: list[str] = []
    for name in names:
        method = getattr(store, name)

        def spied(*args: Any, _name: str = name, _method: Any = method, **kwargs: Any) -> Any:
            calls.append(_name)
            return _method(*args, **kwargs)

        monkeypatch.setattr(store, name, spied)
    return calls


TAKING = ["acquire_lease", "acquire_and_append", "last_record", "last_sequence", "read_tail"]
TAKEN_WITH_FIRST_RECORDS = (
    ["acquire_and_append"],  # SQLite: one transaction
    ["acquire_and_append", "acquire_lease"],  # PostgreSQL: the lease, then its own append
    ["acquire_and_append", "acquire_lease", "last_record"],  # StateStore's default
)
"""The calls of a run's first append taken with its lease, by the stores' kinds."""


async def read_under_its_lease(store: StateStore, calls: list[str]) -> list[Record]:
    """Check that a run whose first records were refused read the branch under the lease it
    took (the calls ``spy_calls`` saw), and that the branch is numbered without gaps; return
    its records."""
    if store.generation is None:  # its append refused, the lease taken all the same
        read = ["last_record", "read_tail"]
        assert calls in [[*taken, *read] for taken in TAKEN_WITH_FIRST_RECORDS]
    records = await store.read("shelf", "main")
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    return records


async def test_a_run_on_a_thread_its_graph_wrote_takes_the_lease_with_its_first_records(
    store: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = stock_graph(store)
    await graph.ainvoke({"items": ["a"]}, thread_id="shelf")
    calls = spy_calls(store, monkeypatch, TAKING)
    result = await graph.ainvoke({"items": ["b"]}, thread_id="shelf")
    assert (result.state.items, result.state.count) == (["a", "b"], 2)
    if store.generation is None:  # one call, which also stores run_started; no read
        assert calls in TAKEN_WITH_FIRST_RECORDS
    else:  # a file another may rename over its path: read it first, the usual way
        assert calls == ["acquire_lease", "last_record"]
    await store.acquire_lease("shelf", "main", "run-x", ttl=30)  # given back at the end
    kinds = await types(graph)
    assert kinds.count("run_started") == kinds.count("run_completed") == 2


async def test_a_run_whose_graph_is_behind_the_thread_reads_it_under_the_lease_it_took(
    store: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, other = stock_graph(store), stock_graph(store)  # each keeps its own positions
    await first.ainvoke({"items": ["a"]}, thread_id="shelf")
    await other.ainvoke({"items": ["b"]}, thread_id="shelf")  # ``first`` did not see it
    calls = spy_calls(store, monkeypatch, TAKING)
    result = await first.ainvoke({"items": ["c"]}, thread_id="shelf")
    assert (result.state.items, result.state.count) == (["a", "b", "c"], 3)
    records = await read_under_its_lease(store, calls)
    assert [r["type"] for r in records].count("run_started") == 3
    await store.acquire_lease("shelf", "main", "run-x", ttl=30)  # given back at the end


async def test_a_new_thread_takes_the_lease_with_its_first_records(
    store: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = stock_graph(store)
    calls = spy_calls(store, monkeypatch, TAKING)
    result = await graph.ainvoke({"items": ["a"]}, thread_id="shelf")
    assert (result.state.items, result.state.count) == (["a"], 1)
    if store.generation is None:  # opened as new: one call, checked against no records
        assert calls in TAKEN_WITH_FIRST_RECORDS
    else:  # a file another may rename over its path: read it first, the usual way
        assert calls == ["acquire_lease", "last_record"]
    assert await types(graph) == [
        "checkpoint",
        "run_started",
        "superstep_completed",
        "run_completed",
    ]
    await store.acquire_lease("shelf", "main", "run-x", ttl=30)  # given back at the end


async def test_a_thread_a_new_graph_has_not_seen_is_read_under_the_lease_its_guess_took(
    store: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A restarted process, or another graph: the thread is not new, though this graph
    # has no position of it. Its records, opened as a new thread's, are refused.
    await stock_graph(store).ainvoke({"items": ["a"]}, thread_id="shelf")
    before = await store.read("shelf", "main")
    calls = spy_calls(store, monkeypatch, TAKING)
    result = await stock_graph(store).ainvoke({"items": ["b"]}, thread_id="shelf")
    assert (result.state.items, result.state.count) == (["a", "b"], 2)
    records = await read_under_its_lease(store, calls)
    assert records[: len(before)] == before  # the refused records left nothing behind
    assert [r["type"] for r in records].count("checkpoint") == 1
    await store.acquire_lease("shelf", "main", "run-x", ttl=30)  # given back at the end


async def test_a_graph_with_its_own_ids_reads_a_thread_it_has_not_seen_before_it_writes(
    store: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A refused guess would use up ids and clock readings, which an injected factory and
    # clock are there to keep reproducible: with them, the usual way (read, then write).
    await stock_graph(store).ainvoke({"items": ["a"]}, thread_id="shelf")
    seen = len(await store.read("shelf", "main"))
    graph = stock_graph(store, id_factory=sequential_ids(100), clock=ticking_clock())
    calls = spy_calls(store, monkeypatch, TAKING)
    await graph.ainvoke({"items": ["b"]}, thread_id="shelf")
    assert calls[:2] == ["acquire_lease", "last_record"]
    ids = [r["id"] for r in (await store.read("shelf", "main"))[seen:]]
    first = int(ids[0].rsplit("-", 1)[1])
    assert ids == [sequential_ids(first + i)() for i in range(len(ids))]  # none used up


async def waited_for(graph: Graph, store: StateStore, lease: Lease) -> Any:
    """Run ``graph`` on the shelf with ``wait_for_thread``; ``lease`` is given back soon."""

    async def let_go() -> None:
        await anyio.sleep(0.05)
        await store.release_lease(lease)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(let_go)
        return await graph.ainvoke({"items": ["a"]}, thread_id="shelf", wait_for_thread=5)


async def test_a_new_thread_held_by_another_is_refused_or_waited_for(
    store: StateStore,
) -> None:
    graph = stock_graph(store)
    lease = await store.acquire_lease("shelf", "main", "run-x", ttl=30)
    with pytest.raises(ThreadBusyError, match=r"run 'run-x'.* holds it"):
        await graph.ainvoke({"items": ["early"]}, thread_id="shelf")
    assert await store.last_sequence("shelf", "main") == 0  # nothing stored
    result = await waited_for(graph, store, lease)
    assert (result.state.items, result.state.count) == (["a"], 1)


async def test_a_missing_branch_or_thread_is_refused_whatever_the_graph_knows(
    store: StateStore,
) -> None:
    graph = stock_graph(store)
    with pytest.raises(UnknownThreadError, match="has no branch 'side'"):
        await graph.ainvoke({"items": ["a"]}, thread_id="shelf", branch_id="side")
    with pytest.raises(UnknownThreadError, match="no history to continue"):
        await graph.ainvoke(None, thread_id="shelf")
    assert await store.last_sequence("shelf", "main") == 0
    assert await store.last_sequence("shelf", "side") == 0
    await store.acquire_lease("shelf", "main", "run-x", ttl=30)  # no lease left held


async def test_a_paused_thread_answered_elsewhere_takes_new_input_from_a_graph_that_saw_it_paused(
    store: StateStore,
) -> None:
    @node
    def ask(state: Stock) -> dict:
        return {"items": [interrupt("more?", id="more")]}

    def asking() -> Graph:
        return Graph(Stock, state_store=store).flow(START >> ask, ask >> END)

    saw_paused, other = asking(), asking()
    assert (await saw_paused.ainvoke({}, thread_id="shelf")).status == "interrupted"
    await other.ainvoke(None, thread_id="shelf", resume=Resume("x"))
    # Its cached position says paused, which refuses new input: the stored one decides.
    result = await saw_paused.ainvoke({"count": 5}, thread_id="shelf")
    assert result.status == "interrupted" and result.state.items == ["x"]
    assert result.state.count == 5


async def test_a_run_on_a_held_thread_its_graph_knows_is_refused_or_waits(
    store: StateStore,
) -> None:
    graph = stock_graph(store)
    await graph.ainvoke({}, thread_id="shelf")
    before = await store.last_sequence("shelf", "main")
    lease = await store.acquire_lease("shelf", "main", "run-x", ttl=30)
    with pytest.raises(ThreadBusyError, match=r"run 'run-x'.* holds it"):
        await graph.ainvoke({"items": ["late"]}, thread_id="shelf")
    assert await store.last_sequence("shelf", "main") == before  # nothing stored
    result = await waited_for(graph, store, lease)
    assert (result.state.items, result.state.count) == (["a"], 2)
