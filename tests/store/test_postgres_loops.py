"""``PostgresStateStore`` on each asyncio loop's own async connections (``_sql.pg_loops``).

Needs the test server (``tests/postgres_server.py``); skips without one.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import warnings
from typing import Any

import anyio
import anyio.to_thread
import pytest
from forking import runner

from nodestep import PostgresStateStore
from nodestep.testing import events, seqs
from postgres_server import postgres_store

run = runner("asyncio")


def _no_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    async def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a store call went to a worker thread")

    monkeypatch.setattr(anyio.to_thread, "run_sync", refuse)


def test_calls_on_an_asyncio_loop_use_no_worker_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    store = postgres_store()  # open(): tables checked, so no call needs a thread
    _no_threads(monkeypatch)

    async def body() -> list[int]:
        await store.append("t", "main", events(1, 3, "t"), after=0)
        return seqs(await store.read("t", "main"))

    assert run(body()) == [1, 2, 3]
    monkeypatch.undo()
    run(store.aclose())


def test_each_loop_gets_its_own_connections_and_closed_loops_give_theirs_up() -> None:
    store = postgres_store()
    loops: list[Any] = []

    async def body(after: int) -> None:
        loops.append(asyncio.get_running_loop())
        await store.append("t", "main", events(after + 1, after + 1, "t"), after=after)

    run(body(0))
    first = store._loops.of(loops[0])
    assert len(first.idle) == 1 and not first.closed
    run(body(1))  # a new loop: the first one, closed, has its connection ended
    assert first.closed and first.idle == []
    assert run(store.last_sequence("t", "main")) == 2
    run(store.aclose())


def test_aclose_ends_every_loops_connections_and_a_later_call_opens_new_ones() -> None:
    tables = postgres_store()
    store = PostgresStateStore(tables.dsn, schema=tables.schema)

    async def body() -> int:
        await store.append("t", "main", events(1, 1, "t"), after=0)
        conns = store._loops.of(asyncio.get_running_loop())
        await store.aclose()
        assert conns.closed and conns.idle == []
        return await store.last_sequence("t", "main")

    assert run(body()) == 1
    run(store.aclose())
    run(tables.aclose())


@pytest.mark.slow
def test_a_dropped_store_ends_its_connections_without_a_resource_warning() -> None:
    tables = postgres_store()
    store: PostgresStateStore | None = PostgresStateStore(tables.dsn, schema=tables.schema)
    assert store is not None
    run(store.append("t", "main", events(1, 1, "t"), after=0))
    assert len(store._loops._loops) == 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = None
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []
    assert run(tables.last_sequence("t", "main")) == 1
    run(tables.aclose())


def test_concurrent_calls_beyond_max_size_fall_back_to_worker_threads() -> None:
    store = postgres_store()
    small = PostgresStateStore(store.dsn, schema=store.schema, max_size=1)
    run(store.append("t", "main", events(1, 5, "t"), after=0))

    async def body() -> list[int]:
        found: list[int] = []

        async def one() -> None:
            found.append(len(await small.read("t", "main")))

        async with anyio.create_task_group() as tg:
            for _ in range(6):
                tg.start_soon(one)
        return found

    assert run(body()) == [5] * 6
    run(small.aclose())
    run(store.aclose())


def test_a_cancelled_call_leaves_no_connection_that_breaks_the_next_one() -> None:
    store = postgres_store()

    async def body() -> int:
        for delay in (0.0, 0.0005, 0.001, 0.002, 0.005):
            with anyio.move_on_after(delay):
                await store.read("t", "main")
        await store.append("t", "main", events(1, 2, "t"), after=0)
        return await store.last_sequence("t", "main")

    assert run(body()) == 2
    run(store.aclose())


def test_calls_from_several_threads_loops_each_see_every_append() -> None:
    store = postgres_store()
    lock = threading.Lock()
    errors: list[BaseException] = []

    def worker(name: str) -> None:
        try:
            for i in range(5):
                with lock:
                    after = run(store.last_sequence(name, "main"))
                run(store.append(name, "main", events(after + 1, after + 1, name), after=after))
                assert i + 1 == run(store.last_sequence(name, "main"))
        except BaseException as e:  # reported below, in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(f"b{i}",)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    run(store.aclose())


@pytest.mark.parametrize("anyio_backend", ["trio"])
@pytest.mark.anyio
async def test_on_trio_calls_keep_to_worker_threads(anyio_backend: str) -> None:
    store = postgres_store()
    await store.append("t", "main", events(1, 1, "t"), after=0)
    assert store._loops._loops == {}  # no asyncio loop: no async connection
    assert await store.last_sequence("t", "main") == 1
    await store.aclose()
