"""After a PostgreSQL server restart, a store's first calls work: no pooled connection is dead.

A server of the test's own (``scripts/pg_test_server.sh``, never the shared one) is crashed
and started again while a store holds open connections of every kind: the sync pool (worker
threads, trio), an asyncio loop's own connections, and an async pool (``aopen``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from nodestep import PostgresStateStore
from nodestep.testing import checkpoint, events, seqs
from postgres_server import own_server, server_command


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, Path]]:
    with own_server() as found:
        yield found


def _restart(directory: Path) -> None:
    server_command("crash", directory)
    server_command("restart", directory)


async def _calls(store: PostgresStateStore, thread: str) -> None:
    """One call of each kind; each must work on its first try."""
    last = await store.last_sequence(thread, "main")
    lease = await store.acquire_lease(thread, "main", "me", ttl=30)
    await store.append_leased(lease, events(last + 1, last + 2, thread=thread), after=last)
    assert seqs(await store.read(thread, "main")) == list(range(1, last + 3))
    assert len(await store.read_tail(thread, "main")) >= 1
    await store.release_lease(lease)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_every_call_after_a_server_restart_works_on_its_first_try(
    server: tuple[str, Path], backend: str
) -> None:
    dsn, directory = server
    store = PostgresStateStore(dsn, schema=f"r_{uuid.uuid4().hex[:8]}", min_size=3)

    async def first() -> None:
        await store.append("t", "main", [checkpoint(1, thread="t")], after=0)
        await _calls(store, "t")

    anyio.run(first, backend=backend)
    for _ in range(2):
        _restart(directory)
        anyio.run(_calls, store, "t", backend=backend)
    anyio.run(store.aclose, backend=backend)


@pytest.mark.slow
def test_an_async_pool_serves_its_loop_again_after_a_server_restart(
    server: tuple[str, Path],
) -> None:
    dsn, directory = server

    async def main() -> None:
        async with PostgresStateStore(dsn, schema=f"r_{uuid.uuid4().hex[:8]}") as store:
            await store.append("t", "main", [checkpoint(1, thread="t")], after=0)
            await _calls(store, "t")
            for _ in range(2):
                await anyio.to_thread.run_sync(_restart, directory)
                await _calls(store, "t")

    asyncio.run(main())
