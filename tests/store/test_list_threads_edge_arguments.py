"""``list_threads`` answers alike on every store at the edges of its arguments.

``limit=sys.maxsize`` (a common way to say "all of them") lists every thread, where the SQL
stores once passed ``limit + 1`` to the database, beyond its 64-bit integers (a raw
``OverflowError`` from SQLite, a ``StateStoreError`` blaming the server from PostgreSQL).
An empty list of statuses matches no thread, where PostgreSQL once got ``IN ()``, which is
not SQL.
"""

from __future__ import annotations

import sys

import pytest

from nodestep import END, START, BaseState, Graph, node
from nodestep.store import StateStore

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Count(BaseState):
    n: int = 0


@node
def count(state: Count) -> dict[str, int]:
    return {"n": state.n + 1}


async def test_list_threads_takes_the_largest_limit_and_an_empty_status_list(
    store: StateStore,
) -> None:
    graph = Graph(Count, state_store=store).flow(START >> count, count >> END)
    for thread in ("a", "b"):
        await graph.ainvoke({}, thread_id=thread)
    everything = await graph.list_threads(limit=sys.maxsize)
    assert sorted(info.thread_id for info in everything.threads) == ["a", "b"]
    assert everything.next_cursor is None
    for status in ([], ()):
        none = await graph.list_threads(status=status)
        assert (none.threads, none.next_cursor) == ([], None)
